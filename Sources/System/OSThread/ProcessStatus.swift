import Glibc

/// A process's memory figures from `/proc/PID/status` (`VmRSS`, `VmHWM`, `RssAnon`, `RssFile`, …).
public enum ProcessStatus {
    /// Each `Name:   N kB` line's figure in KiB, by name (without the colon), of process `pid` (nil:
    /// this one); empty when the file cannot be read (the process ended, /proc not mounted).
    public static func kib(of pid: pid_t? = nil) -> [String: Int] {
        let path = "/proc/" + (pid.map { String($0) } ?? "self") + "/status"
        guard case .success(let bytes?) = FileIO.read(path, limit: 1 << 16) else { return [:] }
        var figures: [String: Int] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasSuffix(" kB") {
            let fields = line.split { $0 == " " || $0 == "\t" }
            guard fields.count == 3, fields[0].hasSuffix(":"), let value = Int(fields[1]) else { continue }
            figures[String(fields[0].dropLast())] = value
        }
        return figures
    }
}
