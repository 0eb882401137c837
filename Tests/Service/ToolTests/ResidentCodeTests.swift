import Glibc
import Testing

@testable import OSThread

/// `ResidentCode`: which pages batond gives back after its start, and that giving them back loses
/// nothing (this test process's own code and libraries are the subject).
@Suite struct ResidentCodeTests {
    /// The executable's code and libc's are taken; no range touches a mapping that is writable,
    /// shared, or holds pages of its own (a relocated `RELRO` segment), which dropping would revert
    /// to the file's bytes.
    @Test func takesCodeAndNeverWrittenMemory() throws {
        let code = ResidentCode.pin()
        let own: @convention(c) () -> Int32 = { 7 }
        let here = UInt(bitPattern: unsafeBitCast(own, to: UnsafeRawPointer.self))
        let strlenAddress = try #require(dlsym(nil, "strlen"))
        let libc = UInt(bitPattern: strlenAddress)
        #expect(code.ranges.contains { $0.contains(here) }, "the executable's code")
        #expect(code.ranges.contains { $0.contains(libc) }, "libc's code")
        let mappings = ResidentCode.mappings()
        for range in code.ranges {
            let under = mappings.filter { $0.range.overlaps(range) }
            #expect(!under.isEmpty)
            for m in under {
                #expect(!m.writable && m.isPrivate && m.anonymousKiB == 0, "\(m.path) \(m.range)")
            }
        }
    }

    /// A library loaded when the ranges are taken stays loaded after its last `dlclose`: its
    /// addresses can never come to hold other memory that a release would wipe.
    @Test func aLibraryTakenIsNeverUnloaded() throws {
        // libbz2: on every Debian system (dpkg needs it), and nothing of Baton's links it.
        let name = "libbz2.so.1.0"
        #expect(dlopen(name, RTLD_LAZY | RTLD_NOLOAD) == nil, "libbz2 was loaded before the test")
        let handle = try #require(dlopen(name, RTLD_LAZY))
        let code = ResidentCode.pin()
        let symbol = try #require(dlsym(handle, "BZ2_bzlibVersion"))
        #expect(code.ranges.contains { $0.contains(UInt(bitPattern: symbol)) })
        #expect(dlclose(handle) == 0)
        #expect(dlopen(name, RTLD_LAZY | RTLD_NOLOAD) != nil, "libbz2 was unloaded")
    }

    /// Releasing takes the pages out of the resident set (tens of MiB of this test process's code),
    /// and the code runs on: what is used again is mapped again from the file.
    @Test func releasingShrinksTheResidentSetAndTheCodeRunsOn() throws {
        let code = ResidentCode.pin()
        let before = try #require(Self.residentFileKiB())
        code.release(relock: false)
        let after = try #require(Self.residentFileKiB())
        #expect(after < before - 4096, "RssFile \(before) → \(after) KiB")
        #expect(strlen("baton") == 5)
        #expect([3, 1, 2].sorted() == [1, 2, 3])
    }

    /// The header of each mapping as `/proc/self/smaps` prints it (a path with spaces, a deleted
    /// file, none), and the `Anonymous:` line.
    @Test func readsTheKernelsLines() throws {
        let a = try #require(
            ResidentCode.header(Array("7f00a000-7f00c000 r-xp 00001000 fd:01 42     /opt/my lib.so (deleted)".utf8)))
        #expect(a.range == 0x7f00_a000..<0x7f00_c000)
        #expect(a.executable && a.isPrivate && !a.writable)
        #expect(a.path == "/opt/my lib.so (deleted)")
        let b = try #require(ResidentCode.header(Array("7ffd0000-7ffd2000 rw-s 00000000 00:00 0 ".utf8)))
        #expect(b.writable && !b.isPrivate && !b.executable && b.path == "")
        #expect(ResidentCode.header(Array("VmFlags: rd ex mr mw me dw".utf8)) == nil)
        #expect(ResidentCode.header(Array("Size:                  8 kB".utf8)) == nil)
        #expect(ResidentCode.value(Array("Anonymous:           124 kB".utf8), of: "Anonymous:") == 124)
        #expect(ResidentCode.value(Array("AnonHugePages:         0 kB".utf8), of: "Anonymous:") == nil)
    }

    /// `RssFile` of /proc/self/status, in KiB.
    static func residentFileKiB() -> Int? {
        guard case .success(let bytes?) = FileIO.read("/proc/self/status") else { return nil }
        let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("RssFile:") }
        return line.flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") }
    }
}
