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

    /// Every thread of `process`, by id: its name and how many times it has gone to sleep of itself
    /// so far (`wakeUps`).
    public static func wakeUps(process: String = "self") -> [Int: (name: String, wakeUps: Int)] {
        var all: [Int: (name: String, wakeUps: Int)] = [:]
        for tid in ids(process: process) { all[tid] = (name(tid, process: process), wakeUps(tid, process: process)) }
        return all
    }

    /// How many times thread `tid` of `process` has gone to sleep of itself (waited for a timer, a
    /// futex, a socket): `voluntary_ctxt_switches` in /proc/PROCESS/task/TID/status; 0 if it is
    /// gone. One per wake-up, which is what a polling loop costs. Unlike the times it was given a
    /// CPU (`timeslices`), it does not count the preemptions a busy machine adds to a thread that
    /// woke once: a monitor that ticked three times in 3 s on a loaded CI runner read 6 "runs".
    public static func wakeUps(_ tid: Int, process: String = "self") -> Int {
        guard case .success(let bytes?) = FileIO.read("/proc/\(process)/task/\(tid)/status") else { return 0 }
        let key = "voluntary_ctxt_switches:"
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix(key) {
            return Int(line.dropFirst(key.count).trimmingPrefix(while: { $0 == " " || $0 == "\t" })) ?? 0
        }
        return 0
    }

    /// Waits (at most `seconds`) until no thread of `process` woke more than once in half a second:
    /// what a change set going (a pause's fade, the zones stopping their cards) has settled, so
    /// that a count of wake-ups after it is of the idle process. False when it never settled. A
    /// thread that polls faster than twice a second never lets it settle.
    public static func awaitQuiet(process: String, seconds: Double = 10) -> Bool {
        var before = wakeUps(process: process)
        let deadline = monotonicNanoseconds() + Int(seconds * 1e9)
        while monotonicNanoseconds() < deadline {
            usleep(500_000)
            let now = wakeUps(process: process)
            if now.allSatisfy({ tid, t in t.wakeUps - (before[tid]?.wakeUps ?? 0) <= 1 }) { return true }
            before = now
        }
        return false
    }

    /// How many times thread `tid` of `process` has been given a CPU (the third field of
    /// /proc/PROCESS/task/TID/schedstat); 0 if it is gone.
    public static func timeslices(_ tid: Int, process: String = "self") -> Int {
        let fields = (FileIO.firstLine("/proc/\(process)/task/\(tid)/schedstat") ?? "").split(separator: " ")
        return fields.count > 2 ? Int(fields[2]) ?? 0 : 0
    }

    /// How many times thread `tid` of `process` has gone to sleep of itself, and how many times it
    /// was preempted (voluntary_ctxt_switches and nonvoluntary_ctxt_switches in
    /// /proc/PROCESS/task/TID/status); zeros if it is gone.
    public static func switches(_ tid: Int, process: String = "self") -> (voluntary: Int, preempted: Int) {
        guard case .success(let bytes?) = FileIO.read("/proc/\(process)/task/\(tid)/status") else { return (0, 0) }
        var found = (voluntary: 0, preempted: 0)
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: ":")
            guard parts.count == 2, let n = Int(parts[1].trimmingPrefix(while: { $0 == " " || $0 == "\t" })) else {
                continue
            }
            if parts[0] == "voluntary_ctxt_switches" { found.voluntary = n }
            if parts[0] == "nonvoluntary_ctxt_switches" { found.preempted = n }
        }
        return found
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
