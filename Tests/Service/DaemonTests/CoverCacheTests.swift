import BatonTesting
import OSThread
import Testing

@testable import BatonDaemon
@testable import ControlParts

/// The disk cache of cover art: bounded, oldest out first, and safe whatever the server's ids are.
@Suite(.ownThread) struct CoverCacheTests {
    /// Past the byte limit the least recently stored images are removed; what is kept is found again
    /// with its content type; nothing is kept without a directory.
    @Test func keepsImagesWithinItsBound() throws {
        let dir = TestDirectory.make("covers") + "/covers"
        let cache = CoverCache(directory: dir, limit: 100)
        let image = { (byte: UInt8) in [UInt8](repeating: byte, count: 40) }
        cache.store(server: "http://a", id: "al-1", size: 160, bytes: image(1), contentType: "image/jpeg")
        cache.store(server: "http://a", id: "al-2", size: 160, bytes: image(2), contentType: "image/png")
        #expect(cache.lookup(server: "http://a", id: "al-1", size: 160)?.bytes == image(1))
        #expect(cache.lookup(server: "http://a", id: "al-2", size: 160)?.contentType == "image/png")
        #expect(cache.lookup(server: "http://a", id: "al-1", size: 300) == nil, "another size is another image")
        cache.store(server: "http://a", id: "al-3", size: 160, bytes: image(3), contentType: "image/jpeg")
        #expect(cache.lookup(server: "http://a", id: "al-1", size: 160) == nil, "the oldest went")
        #expect(cache.lookup(server: "http://a", id: "al-3", size: 160)?.bytes == image(3))
        #expect(cache.bytesKept <= 100)
        #expect(FileIO.files(in: dir).count == 2)
        cache.store(
            server: "http://a", id: "huge", size: nil, bytes: [UInt8](repeating: 0, count: 101),
            contentType: "image/jpeg")
        #expect(
            cache.lookup(server: "http://a", id: "huge", size: nil) == nil, "an image over the whole bound is not kept")

        let none = CoverCache(directory: nil)
        none.store(server: "http://a", id: "al-1", size: nil, bytes: image(1), contentType: "image/jpeg")
        #expect(none.lookup(server: "http://a", id: "al-1", size: nil) == nil)
    }

    /// An id with slashes, dots or anything else becomes a plain file name inside the directory, and
    /// two ids that clean to the same letters still get different files.
    @Test(arguments: ["../../etc/passwd", "a/b", "..", "al 1", "ål-1", "al-1\u{1}x"])
    func namesFilesSafely(id: String) {
        let name = CoverCache.fileName(server: "http://a", id: id, size: 80, type: "image/jpeg")
        #expect(!name.contains("/") && !name.hasPrefix(".") && !name.contains("\u{1}"), "\(name)")
        #expect(name != CoverCache.fileName(server: "http://a", id: id + "x", size: 80, type: "image/jpeg"))
    }
}
