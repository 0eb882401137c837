import AudioCore
import FuzzSupport
import Media

// The stream decoders on arbitrary bytes, as a music stream reaches them: `StreamDecoders.make` picks
// the decoder by Content-Type or by sniffing, then the stream is decoded to its end (at most 2 s of
// audio). Every input must decode or throw a `DecodeError`; the decoder must report at least one channel and a positive rate.
//
// Input: one selector byte (its low 3 bits: no Content-Type, or one of the four formats' types, or an
// unknown type; bit 3: deliver the bytes in network-sized pieces; its high 4 bits: how many frames
// each `read` asks for, from 1 to 4096), then the stream.

let readSizes = [4096, 1, 2, 3, 7, 64, 100, 441, 479, 480, 960, 1024, 1152, 2047, 2304, 4095]

let contentTypes: [String?] = [
    nil, "audio/ogg", "audio/flac", "audio/mpeg", "audio/wav", "application/octet-stream",
    "text/html", nil,
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDecoders(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    let selector = data[0]
    let stream = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let source = MemoryByteSource(stream, chunkSizes: selector & 8 != 0 ? 1...1500 : nil, seed: UInt64(size))
    do {
        let decoder = try StreamDecoders.make(
            contentType: contentTypes[Int(selector & 7)], source: source,
            name: "fuzz")
        precondition((1...255).contains(decoder.channels), "\(decoder.channels) channels")
        precondition(decoder.rate > 0, "\(decoder.rate) Hz")
        let room = readSizes[Int(selector >> 4)]
        var output = [Float](repeating: 0, count: room * decoder.channels)
        var frames = 0
        while frames < 2 * decoder.rate {
            let n = try output.withUnsafeMutableBufferPointer { try decoder.read(into: $0) }
            precondition(n >= 0 && n <= room, "read \(n) frames into room for \(room)")
            if n == 0 { break }
            frames += n
        }
    } catch let error as DecodeError {
        precondition(!error.message.isEmpty, "a DecodeError without a message")
    } catch {
        preconditionFailure("not a DecodeError: \(error)")
    }
    return 0
}

@main
struct FuzzDecodersMain {
    static func main() { runLibFuzzer(fuzzDecoders) }
}
