import Glibc

/// Where a test process keeps its files: one new directory per process,
/// `/tmp/baton-tests-PID-XXXXXX` (0755), and a directory of each test's own inside it.
/// `scripts/test.sh` removes the directories of processes that have ended when it next runs, so
/// the last run's files stay for reading and no run leaves its files behind for good (the
/// directories used to be made straight under /tmp and were never removed: ~450 of them after a
/// day of runs on this machine).
public enum TestDirectory {
    /// This process's directory, made at first use. Always new: a directory named by the PID
    /// alone was found again by a later run on a CI machine that kept /tmp (PIDs repeat in a
    /// fresh container), and files appended to then held an older run's data.
    public static let root: String = {
        let dir = fresh("/tmp/baton-tests-\(getpid())")
        chmod(dir, 0o755)
        return dir
    }()

    /// A fresh directory `NAME-XXXXXX` in `root`, for one test's files.
    public static func make(_ name: String) -> String { fresh("\(root)/\(name)") }

    /// A new directory `PREFIX-XXXXXX` (`mkdtemp`).
    private static func fresh(_ prefix: String) -> String {
        var template = Array("\(prefix)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            fatalError("TestDirectory: mkdtemp \(prefix) failed, errno \(errno)")
        }
        return String(cString: made)
    }
}
