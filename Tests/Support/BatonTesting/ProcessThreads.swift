import Glibc
import OSThread

/// A process's threads as the kernel counts them (/proc/PROCESS/task; this process by default): to
/// find a thread by the name Baton gives it and see how often it ran.
public enum ProcessThreads {
    /// The ids of the threads of `process` (a pid, or `self`) named `name` (/proc/PROCESS/task/*/comm).
    public static func named(_ name: String, process: String = "self") -> [Int] {
        ids(process: process).filter { self.name($0, process: process) == name }
    }

    /// The ids of the threads of `process` (a pid, or `self`): the entries of /proc/PROCESS/task.
    public static func ids(process: String = "self") -> [Int] {
        guard let dir = opendir("/proc/\(process)/task") else { return [] }
        defer { closedir(dir) }
        var found: [Int] = []
        while let entry = readdir(dir) {
            let id = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let tid = Int(id) { found.append(tid) }
        }
        return found
    }

    /// The name of thread `tid` of `process` (/proc/PROCESS/task/TID/comm); "?" if it is gone.
    public static func name(_ tid: Int, process: String = "self") -> String {
        FileIO.firstLine("/proc/\(process)/task/\(tid)/comm") ?? "?"
    }

    /// Every thread of `process`, by id: its name and how many times it has run so far.
    public static func runs(process: String = "self") -> [Int: (name: String, runs: Int)] {
        var all: [Int: (name: String, runs: Int)] = [:]
        for tid in ids(process: process) { all[tid] = (name(tid, process: process), timeslices(tid, process: process)) }
        return all
    }

    /// How many times thread `tid` of `process` has been given a CPU (the third field of
    /// /proc/PROCESS/task/TID/schedstat); 0 if it is gone.
    public static func timeslices(_ tid: Int, process: String = "self") -> Int {
        let fields = (FileIO.firstLine("/proc/\(process)/task/\(tid)/schedstat") ?? "").split(separator: " ")
        return fields.count > 2 ? Int(fields[2]) ?? 0 : 0
    }

    /// The state letter (R, S, D, T, Z …) in a /proc …/stat file: the field after the name, which
    /// is in parentheses and may itself hold spaces and parentheses. Nil if it is gone.
    public static func state(stat path: String) -> Character? {
        guard let stat = FileIO.firstLine(path), let close = stat.lastIndex(of: ")") else { return nil }
        return stat[close...].dropFirst().trimmingPrefix(" ").first
    }

    /// Where each thread of `process` is, one line each: "name state wchan" (state from
    /// /proc/PROCESS/task/TID/stat, the kernel function it sleeps in from …/wchan): for a failure
    /// message about a program that stopped doing what it should (stuck on a pipe, a futex, a socket).
    public static func whereTheyWait(process: String) -> String {
        ids(process: process).sorted().map { tid in
            let state = self.state(stat: "/proc/\(process)/task/\(tid)/stat").map(String.init) ?? "?"
            let wchan = FileIO.firstLine("/proc/\(process)/task/\(tid)/wchan") ?? "?"
            return "\(name(tid, process: process)) \(state) \(wchan)"
        }.joined(separator: "; ")
    }
}
