import AudioCore
import Glibc

/// The bytes of a local file, as a `ByteSource` (local music, tests).
///
/// Thread: one reader at a time.
public final class FileByteSource: ByteSource {
    public let path: String
    private let fd: Int32

    /// Opens `path` for reading.
    /// The corresponding C function is `open`.
    public init(path: String) throws(ByteSourceError) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ByteSourceError(message: "\(path): \(String(cString: strerror(errno)))") }
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    /// Reads the next bytes of the file; 0 at its end. Retries when a signal interrupts the read.
    /// The corresponding C function is `read`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError) -> Int {
        guard buffer.count > 0 else { return 0 }
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw ByteSourceError(message: "\(path): \(String(cString: strerror(errno)))")
        }
    }
}

/// Bytes held in memory, as a `ByteSource`; optionally delivered a few at a time, in sizes drawn
/// from `chunkSizes` (repeatably, from `seed`), as a network stream delivers them.
///
/// Thread: one reader at a time.
public final class MemoryByteSource: ByteSource {
    private let bytes: [UInt8]
    private let chunkSizes: ClosedRange<Int>?
    private var position = 0
    private var random: UInt64

    /// `chunkSizes`: nil delivers as much as each read asks for; a range (e.g. `1...1000`) delivers at
    /// most a size drawn from it per read.
    public init(_ bytes: [UInt8], chunkSizes: ClosedRange<Int>? = nil, seed: UInt64 = 1) {
        precondition(chunkSizes.map { $0.lowerBound > 0 } ?? true, "chunk sizes must be positive")
        self.bytes = bytes
        self.chunkSizes = chunkSizes
        self.random = seed
    }

    /// Bytes not yet read.
    public var remaining: Int { bytes.count - position }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError) -> Int {
        var count = min(buffer.count, remaining)
        if let chunkSizes {
            count = min(count, chunkSizes.lowerBound + Int(nextRandom() % UInt64(chunkSizes.count)))
        }
        guard count > 0 else { return 0 }
        bytes.withUnsafeBytes { all in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: all[position..<(position + count)]))
        }
        position += count
        return count
    }

    /// SplitMix64: small, fast, and the same sequence for the same seed on every machine.
    private func nextRandom() -> UInt64 {
        random &+= 0x9E37_79B9_7F4A_7C15
        var z = random
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
