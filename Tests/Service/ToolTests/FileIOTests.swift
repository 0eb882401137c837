import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

/// `FileIO.writeAtomically` with several writers of one path at once (the cover cache: two phones
/// asking for the same cover).
@Suite(.ownThread) struct FileIOTests {
    /// Six threads each write the same path forty times (64 KiB of their own byte) while another
    /// reads it: every read is one writer's whole file, never an empty or a mixed one, and no
    /// temporary file is left. With one shared temporary name, a writer emptied (`O_TRUNC`) the
    /// file another was renaming into place.
    @Test func writersOfOnePathNeverLeaveAPartOfAFile() throws {
        let directory = TestDirectory.make("atomic")
        let path = directory + "/cover.jpg"
        let size = 64 << 10
        let writing = Atomic<Int>(6)
        let bad = Mutex<[String]>([])
        var threads: [OSThread] = []
        for k in 0..<6 {
            threads.append(
                OSThread.start(name: "writer") {
                    let bytes = [UInt8](repeating: UInt8(k + 1), count: size)
                    for _ in 0..<40 {
                        if case .failure(let error) = FileIO.writeAtomically(bytes, to: path, shared: true) {
                            bad.withLock { $0.append("write: \(error)") }
                        }
                    }
                    writing.subtract(1, ordering: .releasing)
                })
        }
        var reads = 0
        while writing.load(ordering: .acquiring) > 0 {
            guard case .success(let bytes?) = FileIO.read(path) else { continue }
            reads += 1
            if bytes.count != size || bytes.contains(where: { $0 != bytes[0] }) {
                bad.withLock { $0.append("a read of \(bytes.count) bytes, first \(bytes.first ?? 0)") }
            }
        }
        for t in threads { t.join() }
        #expect(bad.withLock { $0 }.isEmpty, "\(bad.withLock { $0.prefix(5) })")
        #expect(reads > 0)
        #expect(FileIO.files(in: directory).map(\.name) == ["cover.jpg"], "temporary files left")
    }
}
