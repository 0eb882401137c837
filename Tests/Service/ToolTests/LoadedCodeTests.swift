import BatonTesting
import Glibc
import Testing

@testable import OSThread

/// `LoadedCode`: which pages batond gives back after its start, and that giving them back loses
/// nothing. The ranges are this test process's own; only libbz2's are released (the process's
/// other code runs the suite's real-time tests meanwhile).
@Suite(.serialized, .ownThread) struct LoadedCodeTests {
    /// The executable's code and libc's are taken; every page of every range is mapped private,
    /// not writable, and holds no page of its own (the kernel's account, /proc/self/smaps): no
    /// relocated `RELRO` page, which dropping would turn back into the file's unrelocated bytes.
    @Test func takesCodeAndNeverWrittenMemory() throws {
        let code = LoadedCode.pin()
        let own: @convention(c) () -> Int32 = { 7 }
        let here = UInt(bitPattern: unsafeBitCast(own, to: UnsafeRawPointer.self))
        let libc = UInt(bitPattern: try #require(dlsym(nil, "strlen")))
        #expect(code.ranges.contains { $0.contains(here) }, "the executable's code")
        #expect(code.ranges.contains { $0.contains(libc) }, "libc's code")
        let mappings = SmapsEntry.all()
        #expect(mappings.count > 20)
        for range in code.ranges {
            let under = mappings.filter { $0.range.overlaps(range) }
            #expect(under.reduce(0) { $0 + $1.range.clamped(to: range).count } == range.count, "\(range) all mapped")
            for m in under {
                #expect(m.permissions.hasPrefix("r-") && m.permissions.hasSuffix("p"), "\(m.path) \(m.permissions)")
                #expect(m.kib["Anonymous:"] == 0 && m.kib["Swap:"] == 0, "\(m.path) \(m.range): \(m.kib)")
            }
        }
    }

    /// A library loaded when the ranges are taken stays loaded after its last `dlclose`: its
    /// addresses can never come to hold other memory that a release would wipe.
    @Test func aLibraryTakenIsNeverUnloaded() throws {
        // libmd: on every Debian system (dpkg needs it); nothing of Baton's links it.
        let name = "libmd.so.0"
        let handle = try #require(dlopen(name, RTLD_LAZY), "\(String(cString: dlerror()))")
        let code = LoadedCode.pin()
        let symbol = try #require(dlsym(handle, "MD5Init"))
        #expect(code.ranges.contains { $0.contains(UInt(bitPattern: symbol)) })
        // Twice: the test's open, and the one `pin` counted (never closed by it): RTLD_NODELETE
        // alone keeps it.
        #expect(dlclose(handle) == 0)
        #expect(dlclose(handle) == 0)
        #expect(dlopen(name, RTLD_LAZY | RTLD_NOLOAD) != nil, "libmd was unloaded")
    }

    /// Releasing takes a library's pages out of the resident set, and its code runs on: what is
    /// used again is mapped again (and, when asked, locked again as it comes back).
    @Test(arguments: [false, true]) func releasingUnmapsThePagesAndTheCodeRunsOn(relock: Bool) throws {
        let handle = try Self.openBz2()
        let symbol = try #require(dlsym(handle, "BZ2_bzlibVersion"))
        let version = unsafeBitCast(symbol, to: (@convention(c) () -> UnsafePointer<CChar>?).self)
        let expected = try String(cString: #require(version()))
        let text = try #require(SmapsEntry.all().first { $0.range.contains(UInt(bitPattern: symbol)) })
        let mine = LoadedCode(ranges: LoadedCode.pin().ranges.filter { text.range.overlaps($0) })
        #expect(!mine.ranges.isEmpty)
        #expect(Self.resident(text) > 0, "libbz2's code ran, so it is resident")

        #expect(mine.release(relock: relock) == nil)
        #expect(Self.resident(text) == 0, "released")
        let again = try String(cString: #require(version()))
        #expect(again == expected)
        let back = try #require(SmapsEntry.all().first { $0.range.contains(UInt(bitPattern: symbol)) })
        #expect(back.kib["Rss:", default: 0] > 0, "mapped again by its use")
        // Locked again as it comes back: the mapping is locked (`lo` in VmFlags). Not `Locked:`,
        // which is a proportional share: a page of libbz2 that five other programs map (ffmpeg,
        // MPD, … of the tests running beside this one) counts 0.8 KiB, shown as 0.
        if relock { #expect(back.flags.contains("lo"), "locked again: \(back.flags) \(back.kib)") }
        _ = dlclose(handle)
    }

    /// `ProcessStatus` reads this process's figures in KiB, and nothing of a process that is not.
    @Test func readsAProcesssMemoryFigures() {
        let own = ProcessStatus.kib()
        let resident = own["VmRSS"] ?? 0
        #expect(resident > 0 && resident <= own["VmHWM"] ?? 0, "\(own)")
        #expect(ProcessStatus.kib(of: .max).isEmpty)
    }

    static let bz2 = "libbz2.so.1.0"

    /// libbz2: on every Debian system (dpkg needs it); nothing of Baton's links it.
    static func openBz2() throws -> UnsafeMutableRawPointer {
        try #require(dlopen(bz2, RTLD_LAZY), "\(String(cString: dlerror()))")
    }

    /// The resident KiB of what is mapped at `mapping`'s addresses now.
    static func resident(_ mapping: SmapsEntry) -> Int {
        SmapsEntry.all().filter { $0.range.overlaps(mapping.range) }.reduce(0) { $0 + $1.kib["Rss:", default: 0] }
    }
}

/// One mapping of /proc/self/smaps: its addresses, permissions, path and KiB figures.
struct SmapsEntry {
    var range: Range<UInt>
    var permissions: String
    var path: String
    var kib: [String: Int] = [:]
    /// `VmFlags:` (`rd ex mr mw me lo`: `lo` locked).
    var flags: [String] = []

    static func all() -> [SmapsEntry] {
        guard case .success(let bytes?) = FileIO.read("/proc/self/smaps") else { return [] }
        var found: [SmapsEntry] = []
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            if fields.count >= 5, let dash = fields[0].firstIndex(of: "-"),
                let low = UInt(fields[0][..<dash], radix: 16),
                let high = UInt(fields[0][fields[0].index(after: dash)...], radix: 16)
            {
                let path = fields.count > 5 ? fields[5].trimmingPrefix(while: { $0 == " " }) : ""
                found.append(SmapsEntry(range: low..<high, permissions: String(fields[1]), path: String(path)))
            } else if fields.count >= 2, fields[0].hasSuffix(":"), let value = Int(fields[1]), !found.isEmpty {
                found[found.count - 1].kib[String(fields[0])] = value
            } else if fields.first == "VmFlags:", !found.isEmpty {
                found[found.count - 1].flags = line.split(separator: " ").dropFirst().map(String.init)
            }
        }
        return found
    }
}

/// The real batond gives back what its start ran.
@Suite(.ownThread) struct StartCodeGivenBackTests {
    /// Once its zones have opened, batond says it gave back its start's pages of code, and its
    /// resident set is then well below the peak its start reached (`VmRSS` against `VmHWM`). Without
    /// the release, the pages stayed: `mlockall` keeps every page touched.
    @Test func theStartsCodeIsGivenBackOnceTheZonesOpened() throws {
        let d = try BatondProcess()
        defer { _ = d.stop() }
        #expect(
            waitUntil(seconds: 10, every: 0.05) {
                d.log.contains("gave back the pages of code the start ran, once every zone opened")
            },
            "\(d.log)")
        let kib = ProcessStatus.kib(of: d.pid)
        let (resident, peak) = (kib["VmRSS"] ?? 0, kib["VmHWM"] ?? 0)
        #expect(resident > 0 && resident < peak * 3 / 4, "resident \(resident) KiB, peak \(peak) KiB")
    }
}
