import Glibc

/// The code and read-only data that the executable and the libraries loaded with it map from their
/// files, and a way to give back the pages of it that the process touched and no longer runs.
///
/// Starting touches far more code than running does — the loader relocating some fifty libraries,
/// parsing the configuration, initialising OpenSSL and alsa-lib — and `mlockall` keeps every page
/// touched resident for good: batond's resident set playing was two thirds code it ran once.
/// `release` unmaps those pages from the process (`MADV_DONTNEED`); a page still in use is mapped
/// again from the page cache at its next use (a minor fault, a few microseconds), and locked again
/// when the process was locked.
///
/// Safe by construction: a range is taken only when its mapping is private, not writable, holds no
/// page of its own (`Anonymous: 0` — so not a relocated `RELRO` segment, nothing a debugger patched),
/// and belongs to the executable or to a library made undeletable (`dlopen` with `RTLD_NOLOAD |
/// RTLD_NODELETE`): it is never unmapped, so its addresses never hold anything else, and dropping its
/// pages loses nothing the file does not hold. Libraries loaded later (ALSA's plugins) are not taken.
public struct ResidentCode: Sendable {
    /// Page-aligned address ranges.
    public let ranges: [Range<UInt>]

    /// Their size in bytes, resident or not.
    public var bytes: Int { ranges.reduce(0) { $0 + Int($1.upperBound - $1.lowerBound) } }

    /// The mappings of the executable and of every library loaded now, each library made
    /// undeletable first; nothing when `/proc/self/smaps` cannot be read. Any thread; at start,
    /// before other threads load libraries, it takes exactly the ones loaded with the executable.
    public static func pin() -> ResidentCode {
        let executable = executablePath()
        var kept: Set<String> = executable.map { [$0] } ?? []
        for path in Set(mappings().filter(\.executable).map(\.path))
        where path != executable && !path.hasSuffix(" (deleted)") {
            // Counted once more and never closed: no dlclose can unmap it now.
            if dlopen(path, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE) != nil { kept.insert(path) }
        }
        let ranges = mappings().filter { m in
            kept.contains(m.path) && !m.writable && m.isPrivate && m.anonymousKiB == 0
        }.map(\.range)
        return ResidentCode(ranges: ranges)
    }

    /// Drops the ranges' pages from the process's resident set. `relock`: the process is locked
    /// (`mlockall`); the ranges are unlocked to be dropped, and the process locked again as it was
    /// (`MCL_ONFAULT`: a page is locked when it is next used). Any thread but an output thread; takes
    /// the kernel's lock of the address space for a moment (a fault in another thread waits for it).
    public func release(relock: Bool) {
        for range in ranges {
            guard let start = UnsafeMutableRawPointer(bitPattern: range.lowerBound) else { continue }
            let length = Int(range.upperBound - range.lowerBound)
            if relock { munlock(start, length) }
            madvise(start, length, MADV_DONTNEED)
        }
        if relock { mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) }
    }

    struct Mapping {
        var range: Range<UInt>
        var writable = false
        var executable = false
        var isPrivate = false
        var path = ""
        var anonymousKiB: Int?
    }

    /// The process's mappings from `/proc/self/smaps`, read through a fixed buffer (at start the
    /// daemon's peak resident set is being made: no whole-file copy).
    static func mappings() -> [Mapping] {
        let fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var result: [Mapping] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        var line: [UInt8] = []
        line.reserveCapacity(512)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            for byte in chunk[0..<n] {
                guard byte == UInt8(ascii: "\n") else {
                    line.append(byte)
                    continue
                }
                if let mapping = header(line) {
                    result.append(mapping)
                } else if let kib = value(line, of: "Anonymous:"), !result.isEmpty {
                    result[result.count - 1].anonymousKiB = kib
                }
                line.removeAll(keepingCapacity: true)
            }
        }
        return result
    }

    /// `start-end perms offset dev inode [path]`, or nil for another line.
    static func header(_ line: [UInt8]) -> Mapping? {
        var fields: [ArraySlice<UInt8>] = []
        var index = line.startIndex
        while fields.count < 5 {
            while index < line.endIndex && line[index] == UInt8(ascii: " ") { index += 1 }
            let start = index
            while index < line.endIndex && line[index] != UInt8(ascii: " ") { index += 1 }
            guard index > start else { return nil }
            fields.append(line[start..<index])
        }
        guard let dash = fields[0].firstIndex(of: UInt8(ascii: "-")), fields[1].count == 4,
            let low = UInt(String(decoding: fields[0][..<dash], as: UTF8.self), radix: 16),
            let high = UInt(String(decoding: fields[0][(dash + 1)...], as: UTF8.self), radix: 16), low < high
        else { return nil }
        while index < line.endIndex && line[index] == UInt8(ascii: " ") { index += 1 }
        let perms = Array(fields[1])
        var mapping = Mapping(range: low..<high)
        mapping.writable = perms[1] == UInt8(ascii: "w")
        mapping.executable = perms[2] == UInt8(ascii: "x")
        mapping.isPrivate = perms[3] == UInt8(ascii: "p")
        mapping.path = String(decoding: line[index...], as: UTF8.self)
        return mapping
    }

    /// The number after `key` on a `Key:   N kB` line.
    static func value(_ line: [UInt8], of key: StaticString) -> Int? {
        let prefix = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
        guard line.count > prefix.count, line.starts(with: prefix) else { return nil }
        let digits = line[prefix.count...].drop { $0 == UInt8(ascii: " ") }.prefix { $0 >= 48 && $0 <= 57 }
        return Int(String(decoding: digits, as: UTF8.self))
    }

    /// `/proc/self/exe` resolved: the executable's path as its mappings name it.
    static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
