import AudioCore
import BatonTesting
import FLACCodec
import MP3Codec
import Media
import OpusCodec
import Testing

/// One file of each format, made once for the choosing tests (ffmpeg is the slow part).
let sampleFiles: [StreamFormat: [UInt8]] = {
    var files: [StreamFormat: [UInt8]] = [:]
    for file in oneOfEach { files[file.format] = try? file.bytes() }
    return files
}()

func sampleFile(_ format: StreamFormat) throws -> [UInt8] {
    try #require(sampleFiles[format], "ffmpeg could not make the \(format) file")
}

/// Which decoder class `decoder` is, as its format.
func formatOf(_ decoder: any AudioDecoder) -> StreamFormat? {
    switch decoder {
    case is OggOpusStreamDecoder: .oggOpus
    case is FLACStreamDecoder: .flac
    case is MP3StreamDecoder: .mp3
    case is WAVStreamDecoder: .wav
    default: nil
    }
}

/// The expected error from `StreamDecoders.make`, or nil (recording an issue) when it succeeded.
func makeError(_ contentType: String?, _ bytes: [UInt8]) -> DecodeError? {
    do {
        let decoder = try StreamDecoders.make(contentType: contentType, source: chunked(bytes), name: "stream")
        Issue.record("opened \(type(of: decoder)) for \(contentType ?? "no type")")
        return nil
    } catch {
        return error
    }
}

@Suite("Choosing the decoder", .ownThread)
struct StreamDecodersTests {
    /// With no Content-Type, or `application/octet-stream`, the first bytes choose the decoder, and the
    /// peeked bytes reach it: the whole stream decodes.
    @Test(arguments: StreamFormat.allCases, [nil, "application/octet-stream", ""])
    func sniffsTheFormat(_ format: StreamFormat, contentType: String?) throws {
        let decoder = try StreamDecoders.make(
            contentType: contentType, source: chunked(sampleFile(format)),
            name: "stream")
        #expect(formatOf(decoder) == format)
        let frames = try decodeAll(decoder).count / decoder.channels
        #expect(frames == decoder.rate * toneSeconds)
    }

    /// Each Content-Type Baton knows picks its decoder, in any case and with parameters.
    @Test(arguments: StreamDecoders.contentTypes.keys.sorted())
    func picksByContentType(_ contentType: String) throws {
        let format = try #require(StreamDecoders.contentTypes[contentType])
        for spelling in [contentType, contentType.uppercased(), " \(contentType) ; charset=binary"] {
            let decoder = try StreamDecoders.make(
                contentType: spelling, source: chunked(sampleFile(format)),
                name: "stream")
            #expect(formatOf(decoder) == format, "\(spelling)")
        }
    }

    /// A Content-Type that names a format wins over the bytes: a WAV sent as `audio/flac` goes to the
    /// FLAC decoder, which rejects it.
    @Test func contentTypeWinsOverSniffing() throws {
        let error = makeError("audio/flac", try sampleFile(.wav))
        #expect(error?.format == "FLAC")
        let mp3 = makeError("audio/mpeg", try sampleFile(.oggOpus))
        #expect(mp3?.format == "MP3")
    }

    /// A Content-Type Baton does not decode is an error naming the type and the first bytes in hex,
    /// even when the bytes are a known format.
    @Test(arguments: ["text/html; charset=utf-8", "audio/aac", "video/mp4"])
    func rejectsUnknownContentType(_ contentType: String) throws {
        let error = try #require(makeError(contentType, Array("<!DOCTYPE html>".utf8)))
        #expect(error.format == StreamDecoders.unknownFormatName)
        #expect(error.message.contains("\"\(contentType)\""))
        #expect(error.message.contains("3C 21 44 4F 43 54 59 50 45"))
        #expect(error.sourceError == nil)
    }

    /// Bytes of no known format, with no Content-Type, are an error showing them in hex; formats Baton
    /// recognises but does not decode are named.
    @Test(arguments: [
        (Array("<html><body>".utf8), "3C 68 74 6D 6C", "not a format Baton decodes"),
        ([0xFF, 0xF1, 0x50, 0x80, 0, 0, 0, 0], "FF F1 50 80", "AAC"),
        (
            Array("OggS".utf8) + [UInt8](repeating: 0, count: 22) + [1, 30] + [1] + Array("vorbis".utf8), "4F 67 67 53",
            "Ogg Vorbis"
        ),
        (Array("RF64".utf8) + [UInt8](repeating: 0, count: 12), "52 46 36 34", "RF64"),
    ])
    func rejectsUnknownBytes(_ bytes: [UInt8], hex: String, problem: String) throws {
        let error = try #require(makeError(nil, bytes))
        #expect(error.format == StreamDecoders.unknownFormatName)
        #expect(error.message.contains(hex), "\(error)")
        #expect(error.message.contains(problem), "\(error)")
    }

    /// An Ogg Content-Type names the container, not the codec (Navidrome sends Ogg Vorbis and Ogg
    /// FLAC as `audio/ogg`): Ogg of a codec Baton does not decode is named as when sniffed. It went to
    /// the Opus decoder: "not an Ogg Opus stream (-132)".
    @Test(arguments: ["audio/ogg", "application/ogg", "audio/opus"], ["Vorbis", "FLAC"])
    func namesTheCodecOfAnOggStream(_ contentType: String, codec: String) throws {
        let directory = TestDirectory.make("ogg-codec")
        let path = "\(directory)/tone.ogg"
        try ffmpeg(
            toneInput(rate: 44100, channels: 2) + ["-c:a", codec == "Vorbis" ? "libvorbis" : "flac", "-f", "ogg", path])
        let error = try #require(makeError(contentType, try readBytes(path)))
        #expect(error.format == StreamDecoders.unknownFormatName)
        #expect(error.message.hasPrefix("stream: Ogg \(codec) is not supported (first bytes: 4F 67 67 53 "), "\(error)")
        #expect(error.sourceError == nil)
    }

    /// An empty stream with no Content-Type is an error saying so.
    @Test func rejectsEmptyStream() throws {
        let error = try #require(makeError(nil, []))
        #expect(error.message.contains("empty"))
    }

    /// A source failing while the first bytes are sniffed gives an error carrying the source's error.
    @Test func reportsSourceFailureWhileSniffing() throws {
        let source = FailingByteSource(try sampleFile(.flac), failAfter: 3)
        do {
            _ = try StreamDecoders.make(contentType: nil, source: source, name: "stream")
            Issue.record("opened a decoder on a failing source")
        } catch {
            #expect(error.sourceError == source.error)
        }
    }

    /// MP3 is recognised by its frame header alone (no ID3 tag), and FLAC behind an ID3 tag is FLAC.
    @Test func looksBehindAndWithoutID3() throws {
        let directory = TestDirectory.make("codec")
        try ffmpeg(
            toneInput(rate: 44100, channels: 1) + [
                "-c:a", "libmp3lame", "-id3v2_version", "0",
                "-write_xing", "0", "\(directory)/bare.mp3",
            ])
        let bare = try readBytes("\(directory)/bare.mp3")
        #expect(bare.starts(with: [0xFF]))
        let mp3 = try StreamDecoders.make(contentType: nil, source: chunked(bare), name: "bare.mp3")
        #expect(formatOf(mp3) == .mp3)

        let tag: [UInt8] = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, 20] + [UInt8](repeating: 0, count: 20)
        let flac = try StreamDecoders.make(
            contentType: nil, source: chunked(tag + sampleFile(.flac)),
            name: "tagged.flac")
        #expect(formatOf(flac) == .flac)
        #expect(try decodeAll(flac).count == 88200 * 2)
    }

    /// What `peek` returns, `read` delivers again, then the rest; a peek past the end returns what there
    /// is, and reads then end.
    @Test func peekableSourceRedeliversPeekedBytes() throws {
        let bytes = garbage(count: 5000)
        let source = PeekableByteSource(chunked(bytes))
        #expect(try source.peek(10) == Array(bytes[..<10]))
        #expect(try source.peek(100) == Array(bytes[..<100]))
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 37)
        while true {
            let n = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
            if n == 0 { break }
            out += buffer[..<n]
            if out.count == 50 { #expect(try source.peek(20) == Array(bytes[50..<70])) }
        }
        #expect(out == bytes)

        let short = PeekableByteSource(MemoryByteSource([1, 2, 3]))
        #expect(try short.peek(64) == [1, 2, 3])
        var rest = [UInt8](repeating: 0, count: 64)
        #expect(try rest.withUnsafeMutableBytes { try short.read(into: $0) } == 3)
        #expect(try rest.withUnsafeMutableBytes { try short.read(into: $0) } == 0)
    }

    /// A file reads back byte for byte through `FileByteSource`; a missing one is an error naming it.
    @Test func fileSourceReadsTheFile() throws {
        let directory = TestDirectory.make("codec")
        let path = "\(directory)/tone.wav"
        WAVWriter.write(
            Signals.sine(frequency: 440, rate: 8000, frames: 8000, channels: 1), rate: 8000, channels: 1,
            to: path)
        let decoder = try StreamDecoders.make(contentType: nil, source: FileByteSource(path: path), name: path)
        #expect(try decodeAll(decoder).count == 8000)
        #expect(throws: ByteSourceError.self) { try FileByteSource(path: "\(directory)/missing.wav") }
        do {
            _ = try FileByteSource(path: "\(directory)/missing.wav")
        } catch {
            #expect(error.message.contains("missing.wav"))
        }
    }
}
