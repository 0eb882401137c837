import OSThread
import Synchronization

/// Cover art fetched from the music server, kept on disk in `<state-dir>/covers` so that the web
/// app's images cost the server one request each. Bounded: past `limit` bytes the least recently
/// stored images are removed. Without a state directory nothing is kept. Any thread (its own lock).
package final class CoverCache: Sendable {
    package let directory: String?
    package let limit: Int
    /// The files kept and their sizes, oldest first; read from the directory at first use.
    private let index = Mutex<[(name: String, size: Int)]?>(nil)

    package init(directory: String?, limit: Int = 64 << 20) {
        self.directory = directory
        self.limit = limit
    }

    /// The file name for an id and size on `server` (its URL): only letters, digits, `-` and `_`
    /// survive from the id (a server's ids are such), with a hash of the server and the whole id so
    /// that two ids never share a file — nor the same id on two servers: after a reload to another
    /// server, its cover `al-1` was the old server's `al-1`, the wrong art.
    package static func fileName(server: String, id: String, size: Int?, type: String) -> String {
        let safe = String(
            id.unicodeScalars.filter {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_")
            }.prefix(40).map(Character.init))
        let ext = type == "image/png" ? "png" : type == "image/webp" ? "webp" : type == "image/gif" ? "gif" : "jpg"
        return "\(safe)-\((server + "\n" + id).fnv1aHex)-\(size ?? 0).\(ext)"
    }

    /// A kept image for id and size on `server`, with its content type.
    package func lookup(server: String, id: String, size: Int?) -> (bytes: [UInt8], contentType: String)? {
        guard let directory else { return nil }
        for (ext, type) in [("jpg", "image/jpeg"), ("png", "image/png"), ("webp", "image/webp"), ("gif", "image/gif")] {
            let name = Self.fileName(server: server, id: id, size: size, type: type)
            precondition(name.hasSuffix(ext))
            if case .success(let bytes?) = FileIO.read("\(directory)/\(name)", limit: 16 << 20), !bytes.isEmpty {
                return (bytes, type)
            }
        }
        return nil
    }

    /// Keeps an image of `server`'s, removing the oldest ones past the limit.
    package func store(server: String, id: String, size: Int?, bytes: [UInt8], contentType: String) {
        guard let directory, bytes.count <= limit else { return }
        guard case .success = FileIO.makeDirectory(directory) else { return }
        let name = Self.fileName(server: server, id: id, size: size, type: contentType)
        guard case .success = FileIO.writeAtomically(bytes, to: "\(directory)/\(name)", shared: true) else { return }
        index.withLock { index in
            var list =
                index
                ?? FileIO.files(in: directory).sorted { $0.modified < $1.modified }.map { ($0.name, $0.size) }
            list.removeAll { $0.name == name }
            list.append((name, bytes.count))
            var total = list.reduce(0) { $0 + $1.size }
            while total > limit, let oldest = list.first {
                FileIO.remove("\(directory)/\(oldest.name)")
                total -= oldest.size
                list.removeFirst()
            }
            index = list
        }
    }

    /// Bytes kept now.
    package var bytesKept: Int {
        guard let directory else { return 0 }
        return FileIO.files(in: directory).reduce(0) { $0 + $1.size }
    }
}
