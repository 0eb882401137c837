import AudioCore
import BatonTesting
import FLACCodec
import Glibc
import MP3Codec
import Media
import OpusCodec
import Testing

/// Decodes `source` with the format's decoder to the end; returns the frames, or the error.
func outcome(_ format: StreamFormat, _ source: any ByteSource) -> Result<Int, DecodeError> {
    Result { () throws(DecodeError) in
        let d = try decoder(format, source)
        return try decodeAll(d).count / d.channels
    }
}

@Suite("Bad input", .ownThread)
struct BadInputTests {
    /// Random bytes are rejected by every decoder with its own format name, as bad data (no
    /// `sourceError`).
    @Test(arguments: StreamFormat.allCases)
    func rejectsGarbage(_ format: StreamFormat) {
        let result = outcome(format, chunked(garbage(count: 65536)))
        guard case .failure(let error) = result else {
            Issue.record("garbage decoded to \(result)")
            return
        }
        #expect(error.format == format.rawValue)
        #expect(error.sourceError == nil)
        #expect(error.message.hasPrefix("test.\(format): "))
    }

    /// An empty stream is an error of the chosen format, not an empty success.
    @Test(arguments: StreamFormat.allCases)
    func rejectsEmptyStream(_ format: StreamFormat) {
        let result = outcome(format, MemoryByteSource([]))
        guard case .failure(let error) = result else {
            Issue.record("an empty stream decoded to \(result)")
            return
        }
        #expect(error.format == format.rawValue)
        #expect(error.sourceError == nil)
    }

    /// A stream cut anywhere ends cleanly: a cut in the header throws at once; a cut in the audio
    /// gives fewer frames, and WAV and FLAC (which know their length) then throw "truncated". Never a
    /// crash, never a hang.
    @Test(arguments: oneOfEach)
    func truncatedStreamsEndCleanly(_ file: Encoded) throws {
        let bytes = try file.bytes()
        let full = try outcome(file.format, MemoryByteSource(bytes)).get()
        for cut in [1, 3, 4, 11, 12, 30, 43, 44, 100, 500, 2000, bytes.count / 2, bytes.count - 1] {
            switch outcome(file.format, chunked(Array(bytes.prefix(cut)))) {
            case .failure(let error):
                #expect(error.format == file.format.rawValue, "cut at \(cut)")
                #expect(error.sourceError == nil, "cut at \(cut)")
            case .success(let frames):
                #expect(cut >= 100, "a cut at \(cut) bytes must fail in the header, not decode \(frames) frames")
                #expect(frames < full, "cut at \(cut)")
                #expect(file.format != .wav && file.format != .flac, "cut at \(cut): no truncation error")
            }
        }
    }

    /// A source that fails (a dropped connection) before, during or after the header gives a
    /// `DecodeError` carrying the source's error, so the player can tell it from bad data.
    @Test(arguments: oneOfEach)
    func reportsSourceFailure(_ file: Encoded) throws {
        let bytes = try file.bytes()
        for failAfter in [0, 10, bytes.count / 2] {
            let source = FailingByteSource(bytes, failAfter: failAfter)
            guard case .failure(let error) = outcome(file.format, source) else {
                Issue.record("a failing source decoded without error (fail after \(failAfter))")
                continue
            }
            #expect(error.sourceError == source.error, "fail after \(failAfter): \(error)")
            #expect(error.format == file.format.rawValue)
            #expect(error.message.contains("connection reset by peer"))
        }
    }

    /// An endless stream of zero bytes (no audio ever) makes each decoder give up after its byte
    /// budget (16 MiB) instead of reading forever.
    @Test(.timeLimit(.minutes(1)), arguments: StreamFormat.allCases)
    func givesUpOnEndlessNonAudio(_ format: StreamFormat) {
        let source = EndlessByteSource(byte: 0)
        guard case .failure(let error) = outcome(format, source) else {
            Issue.record("an endless stream of zeros ended")
            return
        }
        #expect(error.format == format.rawValue)
        #expect(source.delivered <= 17 << 20, "read \(source.delivered) bytes")
    }

    /// A WAV header of endless `fmt ` chunks is given up after the header budget too: only the
    /// chunks other than `fmt ` were counted, and `init` read for ever.
    @Test(.timeLimit(.minutes(1))) func givesUpOnEndlessFormatChunks() {
        let fmt: [UInt8] = Array("fmt ".utf8) + [16, 0, 0, 0, 1, 0, 2, 0, 0x80, 0xbb, 0, 0, 0, 0xee, 2, 0, 4, 0, 16, 0]
        let source = EndlessByteSource(prefix: Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WAVE".utf8), repeating: fmt)
        guard case .failure(let error) = outcome(.wav, source) else {
            Issue.record("an endless run of fmt chunks ended")
            return
        }
        #expect(error.message == "test.WAV: no data chunk in the first 16 MiB", "\(error)")
        #expect(source.delivered <= 17 << 20, "read \(source.delivered) bytes")
    }

    /// A missing Ogg page mid-stream is an `OP_HOLE`: counted, stepped over, and decoding goes on to
    /// the end with that page's audio (and at most 80 ms after it) missing.
    @Test func stepsOverOggHoles() throws {
        let path = TestDirectory.make("codec") + "/tone.opus"
        // 20 ms pages (ffmpeg's default is one a second), so one page is one packet.
        try ffmpeg(toneInput(rate: 48000, channels: 2) + ["-c:a", "libopus", "-page_duration", "20000", path])
        let bytes = try readBytes(path)
        let pages = oggPageOffsets(bytes)
        try #require(pages.count > 6)
        let victim = pages.count / 2
        let damaged = Array(bytes[..<pages[victim]] + bytes[pages[victim + 1]...])
        let opus = try OggOpusStreamDecoder(source: chunked(damaged), name: "holey.opus")
        let frames = try decodeAll(opus).count / 2
        #expect(opus.holes == 1)
        // Said where it was: the page's place in the 2 s tone, to within two pages and what
        // opusfile drops after the gap.
        let damage = try #require(opus.damage)
        let page = Double(victim - 2) * 0.02  // the two header pages carry no audio
        #expect(
            damage.count == 1 && abs(Double(damage.firstAtFrame) / 48_000 - page) < 0.12, "\(damage), page at \(page) s"
        )
        #expect("\(damage)".hasPrefix("1 gap (a lost or corrupt Ogg page) stepped over, "), "\(damage)")
        // The lost 20 ms packet, and up to 80 ms more that opusfile drops while the decoder settles
        // after the gap (measured: 100 ms in all).
        #expect(frames < 96000 && frames >= 96000 - 5 * 960, "decoded \(frames) frames")
    }

    /// Once an Ogg Opus stream's `read` has thrown, every later `read` throws the same error, as the
    /// other decoders' do: after a short chained link with another channel count, a later read
    /// returned 0, the end of a whole stream.
    @Test func anOggOpusErrorIsFinal() throws {
        let directory = TestDirectory.make("opus-final")
        var joined: [UInt8] = []
        for (k, (channels, seconds)) in [(2, "1"), (1, "0.01")].enumerated() {
            let tone = ["0.5*sin(2*PI*440*t)", "0.5*sin(2*PI*1000*t)"].prefix(channels).joined(separator: "|")
            try ffmpeg([
                "-f", "lavfi", "-i", "aevalsrc=\(tone):s=48000:d=\(seconds)", "-c:a", "libopus",
                "-serial_offset", "\(k + 1)", "\(directory)/\(k).opus",
            ])
            joined += try readBytes("\(directory)/\(k).opus")
        }
        let opus = try OggOpusStreamDecoder(source: chunked(joined), name: "chain.opus")
        let error = try #require(throws: DecodeError.self) { _ = try decodeAll(opus) }
        #expect(error.message == "chain.opus: a chained link changes the channel count from 2 to 1 (not supported)")
        var block = [Float](repeating: 0, count: 2_000)
        for k in 1...5 {
            #expect(throws: error, "read \(k) after the error") {
                try block.withUnsafeMutableBufferPointer { buffer throws(DecodeError) in try opus.read(into: buffer) }
            }
        }
    }

    /// An Ogg Opus sound says its damage as a WAV sound does (`DecodedPCM.damage`, which the
    /// announcer reports): a lost page is a gap stepped over, a file cut inside a page or at a page
    /// boundary (no end-of-stream page) is truncated, and a whole file says nothing. All three
    /// played silently as if whole.
    @Test func anOpusSoundSaysItsDamage() throws {
        let directory = TestDirectory.make("opus-sound")
        try ffmpeg(
            toneInput(rate: 48000, channels: 2) + [
                "-c:a", "libopus", "-page_duration", "20000", "\(directory)/tone.opus",
            ])
        let bytes = try readBytes("\(directory)/tone.opus")
        let pages = oggPageOffsets(bytes)
        try #require(pages.count > 6)
        #expect(try OggOpusFile.decode(bytes, name: "whole.opus").damage == nil)
        let victim = pages.count / 2
        let holey = try OggOpusFile.decode(
            Array(bytes[..<pages[victim]] + bytes[pages[victim + 1]...]), name: "holey.opus")
        let gap = try #require(holey.damage)
        #expect(gap.hasPrefix("1 gap (a lost or corrupt Ogg page) stepped over, "), "\(gap)")
        for (what, end) in [("inside a page", pages[victim] + 30), ("at a page boundary", pages[victim])] {
            let cut = try OggOpusFile.decode(Array(bytes[..<end]), name: "cut.opus")
            let damage = try #require(cut.damage, "cut \(what): no damage said")
            #expect(damage.hasPrefix("truncated: "), "cut \(what): \(damage)")
            #expect(cut.frames < 60_000, "cut \(what): \(cut.frames) frames")
        }
        // Said by the sound library, as a cut WAV is.
        try ffmpeg(
            toneInput(rate: 48000, channels: 2) + [
                "-c:a", "libopus", "-page_duration", "20000", "\(directory)/cut.opus",
            ])
        let cutPages = oggPageOffsets(try readBytes("\(directory)/cut.opus"))
        #expect(truncate("\(directory)/cut.opus", off_t(cutPages[cutPages.count / 2] + 30)) == 0)
        let library = SoundLibrary(directory: directory)
        _ = try library.samples("cut", rate: 48_000, channels: 2)
        #expect(library.damage(of: "cut")?.hasPrefix("truncated: ") == true, "\(library.damage(of: "cut") ?? "nil")")
    }

    /// Junk in the middle of an MP3 stream is skipped by libmpg123 (it finds the next frame header)
    /// and said: where, and how many bytes were skipped. A header it finds in the junk that gives
    /// another rate or channel count (false ones: here 16 and 48 kHz mono) is junk too, not a change
    /// of format (which stopped the track). Junk after the last frame (where APE and Lyrics tags go) is not damage: no audio
    /// follows it.
    @Test func saysJunkBetweenMP3Frames() throws {
        let bytes = try Encoded(format: .mp3, sample: "", rate: 44100, channels: 2).bytes()
        let junk = [UInt8](repeating: 0x41, count: 1_000)
        let middle = bytes.count / 2
        let mp3 = try MP3StreamDecoder(
            source: chunked(Array(bytes[..<middle] + junk + bytes[middle...])), name: "junk.mp3")
        let frames = try decodeAll(mp3).count / 2
        let damage = try #require(mp3.damage)
        print("MP3 junk: \(damage)")
        // The frame the junk landed in takes its first bytes as its own; the false headers found
        // after them took a few real frames with them before libmpg123 found the stream again (a
        // 192 kb/s frame is 627 bytes): the bytes skipped are the junk and those frames (less any
        // false frame of the stream's own format, decoded), and the audio is short by those
        // frames (1 152 each), within three.
        #expect(damage.count <= 3 && abs(damage.firstAtFrame - 44_100) < 2 * 1152, "\(damage)")
        let said = "\(damage)"
        let skipped = said.split(separator: "; ").last.flatMap { Int($0.prefix { $0.isNumber }) } ?? 0
        #expect(said.contains(" of non-audio bytes skipped (lost sync; "), "\(said)")
        #expect(skipped > 1_000 - 2 * 627 && skipped < 1_000 + 8 * 627, "\(said)")
        let lost = Double(skipped - 1_000) / 627 * 1152
        #expect(abs(Double(88_200 - frames) - lost) <= 3 * 1152, "decoded \(frames) frames, \(skipped) bytes skipped")

        let tagged = try MP3StreamDecoder(source: chunked(bytes + junk), name: "tagged.mp3")
        _ = try decodeAll(tagged)
        #expect(tagged.damage == nil)
    }

    /// More than 1 KiB of junk in the middle of an MP3 (libmpg123's resync limit, kept: a longer
    /// search plays false frames found in random junk) ends the track with an error once the decoder
    /// has looked past it and seen MPEG frames follow: junk in the middle is said, never skipped in
    /// silence, and never taken for the end of the stream.
    @Test(arguments: [1_500, 4_096])
    func moreThanAKiBOfJunkInTheMiddleOfAnMP3IsAnError(bytes junkBytes: Int) throws {
        let bytes = try Encoded(format: .mp3, sample: "", rate: 44100, channels: 2).bytes()
        let middle = bytes.count / 2
        let junk = [UInt8](repeating: 0, count: junkBytes)
        let mp3 = try MP3StreamDecoder(
            source: chunked(Array(bytes[..<middle] + junk + bytes[middle...])), name: "j.mp3")
        let message = "j.mp3: decoding failed (Failed to find valid MPEG data within limit on resync. (code 28))"
        #expect(throws: DecodeError(format: "MP3", message: message)) { _ = try decodeAll(mp3) }
    }

    /// Two MP3s joined with less than 1 KiB of junk between (a stitched segment): the second plays
    /// after the first, though the first's LAME/Info tag says the stream ended there (a frame found
    /// behind junk past that length is taken only when two more follow it), and the junk is said.
    /// All of both is there, as libmpg123 gives it alone (the second's encoder delay and padding,
    /// and its Info frame as silence, are not trimmed: 91 008 frames).
    @Test func anMP3JoinedBehindJunkPlaysOn() throws {
        let bytes = try Encoded(format: .mp3, sample: "", rate: 44100, channels: 2).bytes()
        let joined = bytes + [UInt8](repeating: 0, count: 500) + bytes
        let mp3 = try MP3StreamDecoder(source: chunked(joined), name: "joined.mp3")
        #expect(try decodeAll(mp3).count / 2 == 88_200 + 91_008)
        // The 500 bytes and the second file's ID3v2 tag (45 bytes: behind junk, it is not seen as
        // a tag between frames).
        #expect(mp3.damage.map { "\($0)" } == "1 stretch of non-audio bytes skipped (lost sync; 545 bytes), 2.0 s in")
    }

    /// An APEv2 tag after the last MP3 frame, larger than libmpg123's default resync limit (1 KiB:
    /// a tag with cover art is tens of KiB), ends the stream cleanly at its full length and is not
    /// damage. It made a finished track fail ("decoding failed (Failed to find valid MPEG data
    /// within limit on resync.…)").
    @Test func aLargeAPETagAfterTheLastMP3FrameIsNotDamage() throws {
        let bytes = try Encoded(format: .mp3, sample: "", rate: 44100, channels: 2).bytes()
        let tag = Array("APETAGEX".utf8) + [UInt8](repeating: 0, count: 2_000)
        let mp3 = try MP3StreamDecoder(source: chunked(bytes + tag), name: "ape.mp3")
        #expect(try decodeAll(mp3).count / 2 == 88_200)
        #expect(mp3.damage == nil, "\(mp3.damage.map { "\($0)" } ?? "")")
    }

    /// The same, and random bytes after the end, read in large blocks (a stream's prebuffered ring
    /// gives up to 16 KiB at once): libmpg123 gives up on the junk in the call that gives the last
    /// frame's samples, and those are played — they were dropped, the stream's last 601 frames.
    @Test(arguments: [-1, 0, 1, 2])
    func theLastMP3FrameBeforeJunkIsPlayedWhenReadWhole(seed: Int) throws {
        let bytes = try Encoded(format: .mp3, sample: "", rate: 44100, channels: 2).bytes()
        let junk =
            seed < 0
            ? Array("APETAGEX".utf8) + [UInt8](repeating: 0, count: 2_000) : garbage(count: 100_000, seed: UInt64(seed))
        let mp3 = try MP3StreamDecoder(source: MemoryByteSource(bytes + junk), name: "whole.mp3")
        #expect(try decodeAll(mp3).count / 2 == 88_200)
        #expect(mp3.damage == nil, "\(mp3.damage.map { "\($0)" } ?? "")")
    }

    /// Random bytes after the last MP3 frame (a damaged end, another file's bytes glued on) are not
    /// played: the stream ends cleanly at its full length, no sample out of range. With libmpg123's
    /// search for the next frame unlimited, it found false frame headers in them and decoded those:
    /// noise at the stream's own rate (a sample of 3.9), or the track failed ("the stream changes
    /// from 44100 Hz to 8000 Hz (not supported)").
    @Test(arguments: 0..<8)
    func randomBytesAfterTheLastMP3FrameAreNotPlayed(seed: Int) throws {
        let bytes = try Encoded(format: .mp3, sample: "", rate: 44100, channels: 2).bytes()
        let junk = garbage(count: 100_000, seed: UInt64(seed))
        let mp3 = try MP3StreamDecoder(source: chunked(bytes + junk), name: "random.mp3")
        let samples = try decodeAll(mp3)
        #expect(samples.count / 2 == 88_200)
        let peak = samples.map { abs($0) }.max() ?? 0
        #expect(peak <= 1, "peak \(peak)")
        #expect(mp3.damage == nil, "\(mp3.damage.map { "\($0)" } ?? "")")
    }

    /// Endless junk after an MP3's audio (a server that streams zeros), read on to see whether any
    /// audio follows once libmpg123 gives up on it, is given up after the decoder's own 16 MiB budget.
    @Test(.timeLimit(.minutes(1))) func givesUpOnEndlessJunkAfterMP3Audio() throws {
        let bytes = try Encoded(format: .mp3, sample: "", rate: 44100, channels: 2).bytes()
        let source = EndlessByteSource(prefix: bytes, repeating: [0])
        let mp3 = try MP3StreamDecoder(source: source, name: "endless.mp3")
        #expect(throws: DecodeError(format: "MP3", message: "endless.mp3: no MPEG audio in 16 MiB of the stream")) {
            _ = try decodeAll(mp3)
        }
        #expect(source.delivered <= bytes.count + 17 << 20, "read \(source.delivered) bytes")
    }

    /// An ID3v2 tag between MP3 frames (two files joined: a podcast's stitched-in segment) is
    /// metadata libmpg123 skips, not damage.
    @Test func anID3TagBetweenMP3FramesIsNotDamage() throws {
        let directory = TestDirectory.make("codec")
        try ffmpeg(toneInput(rate: 44100, channels: 2) + ["-c:a", "libmp3lame", "-b:a", "192k", "\(directory)/a.mp3"])
        try ffmpeg(
            toneInput(rate: 44100, channels: 2) + [
                "-c:a", "libmp3lame", "-b:a", "192k", "-write_xing", "0", "-metadata", "title=Second",
                "\(directory)/b.mp3",
            ])
        let b = try readBytes("\(directory)/b.mp3")
        #expect(b.starts(with: Array("ID3".utf8)))
        let joined = try MP3StreamDecoder(source: chunked(try readBytes("\(directory)/a.mp3") + b), name: "joined.mp3")
        let frames = try decodeAll(joined).count / 2
        #expect(joined.damage == nil, "\(joined.damage.map { "\($0)" } ?? "")")
        #expect(frames >= 88_200 - 1152, "decoded \(frames) frames")
    }

    /// An MP3 that switches from mono to stereo frames and back (three files joined, as a server's
    /// `raw` stream of a badly cut track or a radio encoder gives) decodes to its end at full length,
    /// undamaged, the mono parts on both channels. With mono output allowed too, the switch was a
    /// change of format: a second of the stereo part dropped as junk, then the track failed ("changes
    /// from 44100 Hz, 1 channels to 44100 Hz, 2 channels").
    @Test func anMP3SwitchingBetweenMonoAndStereoDecodesToTheEnd() throws {
        let directory = TestDirectory.make("codec")
        var joined: [UInt8] = []
        for (k, channels) in [1, 2, 1].enumerated() {
            try ffmpeg(
                toneInput(rate: 44100, channels: channels) + [
                    "-c:a", "libmp3lame", "-b:a", "128k", "-write_xing", "0", "-id3v2_version", "0",
                    "\(directory)/\(k).mp3",
                ])
            joined += try readBytes("\(directory)/\(k).mp3")
        }
        let mp3 = try MP3StreamDecoder(source: chunked(joined), name: "switching.mp3")
        #expect(mp3.channels == 2)
        let samples = try decodeAll(mp3)
        #expect(mp3.damage == nil, "\(mp3.damage.map { "\($0)" } ?? "")")
        // Three 2 s parts (without gapless trimming each keeps its encoder delay and padding).
        #expect(samples.count / 2 >= 3 * 88_200, "decoded \(samples.count / 2) frames")
        // The first part is mono on both channels; the middle one has 1 kHz on the right only.
        let left = Signals.channel(samples, 0, of: 2)
        let right = Signals.channel(samples, 1, of: 2)
        #expect(left[20_000..<60_000] == right[20_000..<60_000])
        let middle = (3 * 88_200 / 2 - 20_000)..<(3 * 88_200 / 2 + 20_000)
        #expect(Signals.windowedToneLevel(right[middle], frequency: 1000, rate: 44100) > 0.4)
        #expect(Signals.windowedToneLevel(left[middle], frequency: 1000, rate: 44100) < 0.01)
    }

    /// An MP3 whose rate changes (two files joined, 44.1 then 48 kHz) is refused after a second of
    /// the other rate, saying so.
    @Test func anMP3WhoseRateChangesIsRefused() throws {
        let directory = TestDirectory.make("codec")
        var joined: [UInt8] = []
        for (k, rate) in [44100, 48000].enumerated() {
            try ffmpeg(
                toneInput(rate: rate, channels: 2) + [
                    "-c:a", "libmp3lame", "-b:a", "128k", "-write_xing", "0", "-id3v2_version", "0",
                    "\(directory)/\(k).mp3",
                ])
            joined += try readBytes("\(directory)/\(k).mp3")
        }
        let mp3 = try MP3StreamDecoder(source: chunked(joined), name: "joined.mp3")
        #expect(mp3.rate == 44100)
        do {
            _ = try decodeAll(mp3)
            Issue.record("decoded to the end")
        } catch {
            #expect("\(error)".contains("changes from 44100 Hz to 48000 Hz (not supported)"), "\(error)")
        }
    }

    /// A FLAC whose metadata before the audio is larger than the 16 MiB budget for finding audio
    /// (cover art: here two 9 MiB blocks after STREAMINFO) decodes whole; it was refused, "no FLAC
    /// audio in 16 MiB of the stream". Metadata past its own budget (64 MiB) is refused saying so.
    @Test(arguments: [2, 8])
    func aFLACWithLargeMetadataDecodes(blocks: Int) throws {
        var bytes = try Encoded(format: .flac, sample: "s16", rate: 44100, channels: 2).bytes()
        try #require(bytes.starts(with: Array("fLaC".utf8)) && bytes[4] & 0x7F == 0)  // STREAMINFO first
        let last = bytes[4] & 0x80
        bytes[4] &= 0x7F
        let size = 9 << 20
        var inserted: [UInt8] = []
        for k in 0..<blocks {
            // A PADDING block (type 1) of 9 MiB, the last flag on the last one if STREAMINFO had it.
            inserted += [
                (k == blocks - 1 ? last : 0) | 1, UInt8(size >> 16), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF),
            ]
            inserted += [UInt8](repeating: 0, count: size)
        }
        bytes.insert(contentsOf: inserted, at: 8 + 34)
        let result = outcome(.flac, MemoryByteSource(bytes))
        if blocks == 2 {
            #expect((try? result.get()) == 88_200, "\(result)")
        } else {
            guard case .failure(let error) = result else {
                Issue.record("decoded past 72 MiB of metadata")
                return
            }
            #expect("\(error)".contains("more than 64 MiB of metadata before the audio"), "\(error)")
        }
    }

    /// Two FLAC files joined (`cat a.flac b.flac`, as a server's `raw` stream of a badly cut track
    /// may be), the second at another rate: refused where the rate changes, saying so. libFLAC
    /// takes each frame's own rate: the 48 kHz part played 8 % slow, said as one corrupt frame.
    @Test func aFLACStreamWhoseRateChangesIsRefused() throws {
        let first = try Encoded(format: .flac, sample: "s16", rate: 44_100, channels: 2).bytes()
        let second = try Encoded(format: .flac, sample: "s16", rate: 48_000, channels: 2).bytes()
        let flac = try FLACStreamDecoder(source: chunked(first + second), name: "joined.flac")
        #expect(flac.rate == 44_100)
        do {
            _ = try decodeAll(flac)
            Issue.record("decoded to the end")
        } catch {
            #expect("\(error)".contains("a frame is 48000 Hz, the stream 44100 Hz (not supported)"), "\(error)")
        }
    }

    /// A FLAC frame with damaged bytes is reported (lost sync or CRC mismatch) and counted; libFLAC
    /// puts silence in its place and the rest decodes, to the full length.
    @Test func skipsCorruptFLACFrames() throws {
        var bytes = try Encoded(format: .flac, sample: "s16", rate: 44100, channels: 2).bytes()
        for i in (bytes.count / 2)..<(bytes.count / 2 + 64) { bytes[i] ^= 0x5A }
        let flac = try FLACStreamDecoder(source: chunked(bytes), name: "damaged.flac")
        let samples = try decodeAll(flac)
        #expect(flac.corruptFrames >= 1)
        // The damage is in the middle of the 2 s: said about 1 s in (a FLAC frame is 4096 frames).
        let damage = try #require(flac.damage)
        #expect(damage.count == flac.corruptFrames && abs(damage.firstAtFrame - 44_100) < 2 * 4096, "\(damage)")
        #expect(samples.count == 88200 * 2)
    }

    /// One flipped bit anywhere in a FLAC's audio is a corrupt frame, stepped over: the stream
    /// decodes to its full length and says the damage. A flip that made libFLAC find a false frame
    /// header it cannot parse (UNPARSEABLE_STREAM, which it resynchronises after, as after a lost
    /// sync) stopped the stream: "the stream uses FLAC features this decoder cannot parse".
    @Test func oneFlippedBitInAFLACIsSteppedOver() throws {
        let bytes = try Encoded(format: .flac, sample: "s16", rate: 44100, channels: 2).bytes()
        for offset in stride(from: bytes.count / 4, to: 3 * bytes.count / 4, by: 1009) {
            var damaged = bytes
            damaged[offset] ^= 0x10
            let flac = try FLACStreamDecoder(source: MemoryByteSource(damaged), name: "flipped.flac")
            let frames = Result { () throws(DecodeError) in try decodeAll(flac, blockFrames: 4096).count / 2 }
            #expect((try? frames.get()) == 88_200, "bit 4 of byte \(offset) flipped: \(frames)")
            #expect(flac.damage != nil, "bit 4 of byte \(offset) flipped: no damage said")
        }
    }

    /// Frame headers libFLAC cannot parse (a reserved block size, their CRC-8 right) after the
    /// first frame are corrupt frames while there are at most 16 in a row, and the stream decodes to
    /// its length; more in a row are a stream it cannot parse, refused.
    @Test(arguments: [8, 17])
    func unparseableFLACFramesInARow(count: Int) throws {
        var bytes = try Encoded(format: .flac, sample: "s16", rate: 44100, channels: 2).bytes()
        let headers = flacFrameHeaders(bytes)
        try #require(headers.count > count + 1)
        for (start, length) in headers[1...count] {
            bytes[start + 2] &= 0x0F  // block size code 0: reserved
            bytes[start + length] = crc8(bytes[start..<(start + length)])
        }
        let flac = try FLACStreamDecoder(source: chunked(bytes), name: "reserved.flac")
        let frames = Result { () throws(DecodeError) in try decodeAll(flac, blockFrames: 4096).count / 2 }
        if count <= 16 {
            #expect((try? frames.get()) == 88_200, "\(frames)")
            #expect(flac.corruptFrames == count)
        } else {
            #expect(
                throws: DecodeError(
                    format: "FLAC", message: "reserved.flac: the stream uses FLAC features this decoder cannot parse")
            ) { try frames.get() }
        }
    }

    /// An ID3v1 tag after a FLAC's last frame (128 bytes, "TAG"; some taggers add one) is no damage:
    /// no audio follows it. It was said as a corrupt frame ("1 corrupt frame skipped (lost sync or
    /// a bad CRC), 2.0 s in"), which a server's track reported as "damaged audio".
    @Test(arguments: [true, false])
    func anID3v1TagAfterAFLACIsNotDamage(withTotal: Bool) throws {
        var bytes = try Encoded(format: .flac, sample: "s16", rate: 44100, channels: 2).bytes()
        // STREAMINFO's total sample count zeroed (36 bits: the low half of the block's byte 13 and
        // bytes 14–17; the block starts at byte 8), as an encoder writing to a pipe leaves it.
        if !withTotal {
            try #require(bytes.starts(with: Array("fLaC".utf8)) && bytes[4] & 0x7F == 0)
            bytes[8 + 13] &= 0xF0
            for i in (8 + 14)..<(8 + 18) { bytes[i] = 0 }
        }
        let tag = Array("TAG".utf8) + [UInt8](repeating: 0x20, count: 125)
        let flac = try FLACStreamDecoder(source: chunked(bytes + tag), name: "tagged.flac")
        #expect(flac.totalFrames == (withTotal ? 88_200 : nil))
        #expect(try decodeAll(flac).count / 2 == 88_200)
        #expect(flac.damage == nil, "\(flac.damage.map { "\($0)" } ?? "")")
    }
}

/// Cover art past the 16 MiB budget for finding audio (a 20 MiB ID3v2 tag in front of an MP3, an
/// OpusTags packet of 20 MiB) decodes whole, as a FLAC's does: they were refused, "no MPEG audio
/// frame in the first 16 MiB", "no Opus audio in the first 16 MiB of the stream".
@Suite(.ownThread) struct LargeTagTests {
    static let artBytes = 20 << 20

    /// The Ogg page checksum (CRC-32, polynomial 0x04C11DB7, not reflected, initial 0), by table:
    /// 20 MiB a bit at a time is slow in a debug build.
    static let crcTable: [UInt32] = (0..<256).map { (n: Int) -> UInt32 in
        var crc = UInt32(n) << 24
        for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04C1_1DB7 : crc << 1 }
        return crc
    }

    static func crc(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0
        for byte in bytes { crc = (crc << 8) ^ crcTable[Int((crc >> 24) ^ UInt32(byte))] }
        return crc
    }

    @Test func anMP3WithA20MiBTagDecodes() throws {
        let mp3 = try Encoded(format: .mp3, sample: "", rate: 44100, channels: 2).bytes()
        let plain = try decodeAll(MP3StreamDecoder(source: MemoryByteSource(mp3), name: "plain.mp3"))
        // The MP3 ffmpeg made, with its own ID3v2 tag (if any) left behind the new one: an ID3v2.4
        // tag of one APIC frame (sync-safe sizes, no unsynchronisation).
        func syncsafe(_ n: Int) -> [UInt8] { (0..<4).map { UInt8(n >> (7 * (3 - $0)) & 0x7F) } }
        let picture = Array("\u{0}image/jpeg\u{0}\u{3}\u{0}".utf8) + [UInt8](repeating: 0x55, count: Self.artBytes)
        let frame = Array("APIC".utf8) + syncsafe(picture.count) + [0, 0] + picture
        let tagged = Array("ID3".utf8) + [4, 0, 0] + syncsafe(frame.count) + frame + mp3
        let decoder = try MP3StreamDecoder(source: chunked(tagged), name: "art.mp3")
        let samples = try decodeAll(decoder, blockFrames: 4096)
        #expect(samples.count == plain.count && samples == plain)
        #expect(decoder.damage == nil)
    }

    /// A leading ID3v2 tag over the 64 MiB budget is refused as soon as its ten-byte header is
    /// read: it was refused only after 64 + 16 MiB were fed, all of which libmpg123 keeps (80 MiB
    /// pinned by one stream), and a stream shorter than that ended as "no MPEG audio frame in the
    /// stream's N bytes" instead.
    @Test func anMP3TagOverTheBudgetIsRefusedAtItsHeader() throws {
        let declared = 250 << 20
        let size = (0..<4).map { UInt8(declared >> (7 * (3 - $0)) & 0x7F) }
        let stream = Array("ID3".utf8) + [4, 0, 0] + size + [UInt8](repeating: 0x55, count: 4096)
        let source = MemoryByteSource(stream, chunkSizes: 10...10)
        #expect(
            throws: DecodeError(
                format: "MP3", message: "huge.mp3: an ID3v2 tag of 250 MiB in front of the audio (more than 64 MiB)")
        ) {
            _ = try MP3StreamDecoder(source: source, name: "huge.mp3")
        }
        #expect(stream.count - source.remaining == 10, "read \(stream.count - source.remaining) bytes")
    }

    /// `opus` (ffmpeg's: OpusHead alone on the first page, OpusTags alone on the second) with its
    /// OpusTags replaced by one of a vendor and one comment of `artBytes` bytes, over as many pages
    /// as it takes; the audio pages as they were, numbered on.
    static func withLargeTags(_ opus: [UInt8], artBytes: Int = artBytes) throws -> [UInt8] {
        let pages = oggPageOffsets(opus) + [opus.count]
        try #require(
            pages.count > 3 && opus[(pages[1] + 27 + Int(opus[pages[1] + 26]))...].starts(with: Array("OpusTags".utf8)))
        let serial = Array(opus[14..<18])
        var out = Array(opus[pages[0]..<pages[1]])
        var sequence = 1
        /// One page of `lacing` segments over `body`, numbered next; its CRC made.
        func page(_ type: UInt8, granule: UInt64, lacing: [UInt8], body: ArraySlice<UInt8>) {
            var p = Array("OggS".utf8) + [0, type] + (0..<8).map { UInt8(truncatingIfNeeded: granule >> (8 * $0)) }
            p += serial + (0..<4).map { UInt8(truncatingIfNeeded: sequence >> (8 * $0)) } + [0, 0, 0, 0]
            p += [UInt8(lacing.count)] + lacing + body
            let crc = Self.crc(p)
            p.replaceSubrange(22..<26, with: (0..<4).map { UInt8(truncatingIfNeeded: crc >> (8 * $0)) })
            out += p
            sequence += 1
        }
        func le32(_ n: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: n >> (8 * $0)) } }
        let comment = Array("COMMENT=".utf8) + [UInt8](repeating: 0x61, count: artBytes)
        let tags = Array("OpusTags".utf8) + le32(5) + Array("baton".utf8) + le32(1) + le32(comment.count) + comment
        var lacing = [UInt8](repeating: 255, count: tags.count / 255) + [UInt8(tags.count % 255)]
        var at = 0
        var first = true
        while !lacing.isEmpty {
            let these = Array(lacing.prefix(255))
            lacing.removeFirst(these.count)
            let length = these.reduce(0) { $0 + Int($1) }
            // A page no packet ends on has granule -1; the one the tags end on, 0.
            page(first ? 0 : 1, granule: lacing.isEmpty ? 0 : .max, lacing: these, body: tags[at..<(at + length)])
            at += length
            first = false
        }
        for k in 2..<(pages.count - 1) {
            let p = opus[pages[k]..<pages[k + 1]]
            let segments = Int(p[p.startIndex + 26])
            let granule = (0..<8).reduce(UInt64(0)) { $0 | UInt64(p[p.startIndex + 6 + $1]) << (8 * $1) }
            page(
                p[p.startIndex + 5], granule: granule,
                lacing: Array(p[(p.startIndex + 27)..<(p.startIndex + 27 + segments)]),
                body: p[(p.startIndex + 27 + segments)...])
        }
        return out
    }

    @Test func anOggOpusWithA20MiBTagPacketDecodes() throws {
        let opus = try Encoded(format: .oggOpus, sample: "", rate: 48000, channels: 2).bytes()
        let plain = try decodeAll(OggOpusStreamDecoder(source: MemoryByteSource(opus), name: "plain.opus"))
        let out = try Self.withLargeTags(opus)
        let decoder = try OggOpusStreamDecoder(source: chunked(out), name: "art.opus")
        let samples = try decodeAll(decoder, blockFrames: 4096)
        #expect(samples.count == plain.count && samples == plain)
        #expect(decoder.damage == nil)
    }

    /// A chained link whose headers run past the 16 MiB budget (a second album's cover art) stops
    /// the stream saying where, not "in the first 16 MiB of the stream" (the budget is per read):
    /// after the first link's 2 s.
    @Test func aChainedLinkOverTheBudgetSaysWhere() throws {
        let first = try Encoded(format: .oggOpus, sample: "", rate: 48000, channels: 2).bytes()
        let path = TestDirectory.make("opus-chain") + "/second.opus"
        try ffmpeg(toneInput(rate: 48000, channels: 2) + ["-c:a", "libopus", "-serial_offset", "7", path])
        let second = try Self.withLargeTags(try readBytes(path), artBytes: 17 << 20)
        let decoder = try OggOpusStreamDecoder(source: chunked(first + second), name: "chain.opus")
        #expect(
            throws: DecodeError(
                format: "Ogg Opus", message: "chain.opus: no Opus audio in 16 MiB of the stream, 2.0 s in")
        ) {
            _ = try decodeAll(decoder, blockFrames: 4096)
        }
    }
}

/// Where each of the first 128 frame headers of a fixed-block-size FLAC stream starts, and its
/// length before the CRC-8: a frame sync (0xFFF8) with the next frame number (one UTF-8 byte) and a
/// right CRC-8 (so a false sync in the audio is not taken).
func flacFrameHeaders(_ bytes: [UInt8]) -> [(start: Int, length: Int)] {
    var headers: [(start: Int, length: Int)] = []
    var at = 0
    while at + 16 < bytes.count, headers.count < 128 {
        defer { at += 1 }
        guard bytes[at] == 0xFF, bytes[at + 1] == 0xF8, Int(bytes[at + 4]) == headers.count else { continue }
        let blockSize = bytes[at + 2] >> 4
        let rate = bytes[at + 2] & 0x0F
        let length = 5 + (blockSize == 6 ? 1 : blockSize == 7 ? 2 : 0) + (rate == 12 ? 1 : rate >= 13 ? 2 : 0)
        if crc8(bytes[at..<(at + length)]) == bytes[at + length] { headers.append((at, length)) }
    }
    return headers
}

/// FLAC's header CRC-8 (polynomial 0x07, initial 0).
func crc8(_ bytes: ArraySlice<UInt8>) -> UInt8 {
    var crc: UInt8 = 0
    for byte in bytes {
        crc ^= byte
        for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x07 : crc << 1 }
    }
    return crc
}

/// The byte offsets of each "OggS" page in an Ogg stream, read from the page headers.
func oggPageOffsets(_ bytes: [UInt8]) -> [Int] {
    var offsets: [Int] = []
    var at = 0
    while at + 27 <= bytes.count, bytes[at..<(at + 4)].elementsEqual("OggS".utf8) {
        offsets.append(at)
        let segments = Int(bytes[at + 26])
        guard at + 27 + segments <= bytes.count else { break }
        at += 27 + segments + bytes[(at + 27)..<(at + 27 + segments)].reduce(0) { $0 + Int($1) }
    }
    return offsets
}

/// Float WAV samples that are not numbers — NaN, infinities, a float64 beyond Float's range — are
/// silence, and the stream decoder tells how many and where (damage). They went through as they
/// were: the S32 conversion trapped on a NaN (the daemon died), and one NaN into the resampler
/// silences the rest of the track.
@Suite(.ownThread) struct NonFiniteWAVTests {
    /// A mono 8 kHz float WAV of `samples`, 32- or 64-bit.
    static func floatWAV(_ samples: [Double], bits: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        func le(_ v: Int, _ width: Int) { for k in 0..<width { bytes.append(UInt8((v >> (8 * k)) & 0xFF)) } }
        let data = samples.count * bits / 8
        bytes += Array("RIFF".utf8)
        le(36 + data, 4)
        bytes += Array("WAVEfmt ".utf8)
        le(16, 4)
        le(3, 2)
        le(1, 2)
        le(8000, 4)
        le(8000 * bits / 8, 4)
        le(bits / 8, 2)
        le(bits, 2)
        bytes += Array("data".utf8)
        le(data, 4)
        for s in samples {
            if bits == 32 { le(Int(Float(s).bitPattern), 4) } else { le(Int(truncatingIfNeeded: s.bitPattern), 8) }
        }
        return bytes
    }

    static let samples: [Double] = [0.25, .nan, 0.5, .infinity, -.infinity, 1e300, -0.125]

    @Test(arguments: [32, 64])
    func areSilenceAndSaid(bits: Int) throws {
        let bytes = Self.floatWAV(Self.samples, bits: bits)
        let decoder = try WAVStreamDecoder(source: MemoryByteSource(bytes), name: "nan.wav")
        #expect(try decodeAll(decoder) == [0.25, 0, 0.5, 0, 0, 0, -0.125])
        #expect(
            decoder.damage?.description
                == "4 samples that are not numbers (NaN or infinite) played as silence, the first 0.0 s in")
        #expect(decoder.damage?.firstAtFrame == 1)
        // A sound file says it in the same words (it was silenced without a word).
        let pcm = try WAVFile.decode(bytes, name: "nan.wav")
        #expect(pcm.samples == [0.25, 0, 0.5, 0, 0, 0, -0.125])
        #expect(pcm.damage == decoder.damage?.description)
    }

    /// A sound whose every sample is NaN or infinite is refused, naming the file: it passed as a
    /// sound of 3 frames, the request answered `playing` and the music was interrupted for silence.
    @Test(arguments: [32, 64])
    func aSoundOfNothingButThemIsRefused(bits: Int) throws {
        let bytes = Self.floatWAV([.nan, .infinity, -.nan], bits: bits)
        #expect(
            throws: MediaError(
                file: "nan.wav", problem: "none of its 3 samples is a number (all NaN or infinite): nothing to play")
        ) {
            try WAVFile.decode(bytes, name: "nan.wav")
        }
    }
}

/// What sox and espeak-ng write to a pipe (they cannot seek back to fill in the sizes): a data
/// size of 0x7FFFF000 (RIFF 0x7FFFF024). It runs until the stream ends, as 0xFFFFFFFF does: it
/// played to its end, then was said to be "the stream ended after N of its 1073739776 frames
/// (truncated)" (a URL announcement's `stream-error`).
@Suite(.ownThread) struct PipedWAVTests {
    @Test(arguments: ["espeak-ng --stdout 'the doorbell rang'", "sox -n -b 16 -t wav - synth 0.5 sine 440"])
    func aPipedWAVRunsToItsEnd(command: String) throws {
        let path = TestDirectory.make("piped-wav") + "/piped.wav"
        let run = Subprocess.run("/bin/sh", ["-c", "\(command) 2>/dev/null | cat > \(path)"])
        try #require(run.status == 0, "\(command): \(run.output)")
        let bytes = try readBytes(path)
        // The placeholder is there (the writer's, not made up here); the samples after 44 bytes.
        try #require(bytes.count > 44 && bytes[40..<44].elementsEqual([0x00, 0xF0, 0xFF, 0x7F]), "\(bytes.prefix(44))")
        let decoder = try WAVStreamDecoder(source: chunked(bytes), name: "piped.wav")
        #expect(decoder.totalFrames == nil)
        let samples = try decodeAll(decoder)
        #expect(samples.count == (bytes.count - 44) / 2)
        let pcm = try WAVFile.decode(bytes, name: "piped.wav")
        #expect(pcm.samples == samples)
        #expect(pcm.damage == nil)
    }
}

/// A WAV whose block align does not match its channels and sample size (24-bit audio in 32-bit
/// words saying 24) is refused with the reason by both decoders: its samples were read packed, and
/// played as noise.
@Suite(.ownThread) struct WAVBlockAlignTests {
    @Test func aBlockAlignThatDoesNotMatchIsRefused() throws {
        var bytes = NonFiniteWAVTests.floatWAV([0.25, 0.5, -0.125, 0], bits: 32)
        bytes[32] = 8  // a mono 32-bit frame is 4 bytes
        let problem = "block align 8 does not match 1 channels of 32-bit samples"
        #expect(throws: MediaError(file: "a.wav", problem: problem)) { try WAVFile.decode(bytes, name: "a.wav") }
        #expect(throws: DecodeError.self) { try WAVStreamDecoder(source: MemoryByteSource(bytes), name: "a.wav") }
    }
}

/// A WAV whose data chunk is empty, with a LIST chunk after it, and the RIFF size right (an editor
/// that saved no audio): no audio, said — not the LIST chunk's bytes played as samples. A data
/// size of 0 is "to the end" only when the RIFF size is not known either (a pipe's writer).
@Suite struct EmptyDataChunkTests {
    static func wav(riffSize: UInt32?) -> [UInt8] {
        func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        let fmt = Array("fmt ".utf8) + le32(16) + le16(1) + le16(1) + le32(8_000) + le32(16_000) + le16(2) + le16(16)
        let data = Array("data".utf8) + le32(0)
        let text = Array("INFOISFT".utf8) + le32(64) + [UInt8](repeating: 0x41, count: 64)
        let list = Array("LIST".utf8) + le32(UInt32(text.count)) + text
        let body = Array("WAVE".utf8) + fmt + data + list
        return Array("RIFF".utf8) + le32(riffSize ?? UInt32(body.count)) + body
    }

    @Test func anEmptyDataChunkIsNoAudio() throws {
        let known = Self.wav(riffSize: nil)
        #expect(try WAVFile.decode(known, name: "empty.wav").frames == 0)
        let stream = try WAVStreamDecoder(source: MemoryByteSource(known), name: "empty.wav")
        #expect(try decodeAll(stream).isEmpty)
        // A pipe's writer knows neither size: the rest of the stream is the audio.
        let piped = Self.wav(riffSize: 0)
        #expect(try WAVFile.decode(piped, name: "piped.wav").frames > 0)
    }
}

/// A sound longer than ten minutes is refused before it is converted for a zone: an hour of 8 kHz
/// mono passes the file's limits (a few MB) and became 1.4 GB as 48 kHz stereo floats, per zone.
@Suite(.ownThread) struct SoundMemoryLimitTests {
    @Test func aSoundTooLongInTheZonesFormatIsRefused() throws {
        let directory = TestDirectory.make("sound-limit")
        WAVWriter.write(
            [Float](repeating: 0.1, count: 8_000 * 601), rate: 8_000, channels: 1, to: directory + "/long.wav")
        let library = SoundLibrary(directory: directory)
        #expect(throws: MediaError.self) { try library.samples("long", rate: 48_000, channels: 2) }
        do {
            _ = try library.samples("long", rate: 48_000, channels: 2)
        } catch {
            #expect(error.problem == "601 s long: at most 600 s is held in memory, per zone", "\(error)")
        }
    }

    /// A sound within the ten minutes, but that would take far more than ten minutes of 48 kHz
    /// stereo in its zone's format (two minutes of 8 kHz mono for a 384 kHz 8-channel zone: 0.4 G
    /// samples, 1.5 GB): refused with the time that zone can hold. It was converted, and the daemon
    /// could be killed for the memory, on a Pi.
    @Test func aSoundTooLargeInAWideZonesFormatIsRefused() throws {
        let directory = TestDirectory.make("sound-limit-wide")
        WAVWriter.write(
            [Float](repeating: 0.1, count: 8_000 * 120), rate: 8_000, channels: 1, to: directory + "/two.wav")
        let library = SoundLibrary(directory: directory)
        do {
            _ = try library.samples("two", rate: 384_000, channels: 8)
            Issue.record("converted")
        } catch {
            #expect(
                error.problem
                    == "120 s long: in this zone's format (384000 Hz, 8 channels) at most 18 s is held in memory",
                "\(error)")
        }
        // The same sound in a 48 kHz stereo zone: two minutes, as it always was.
        #expect(try library.samples("two", rate: 48_000, channels: 2).count == 120 * 48_000 * 2)
    }

    /// The converted sounds kept stay within the cache's budget: the least recently asked for is
    /// let go of (converted again, the same samples, at its next use), one larger than the budget
    /// is not kept at all, and a damaged file is still said when its samples are not kept.
    @Test func theCacheStaysWithinItsBudget() throws {
        let directory = TestDirectory.make("sound-cache")
        for (name, seconds) in [("a", 1), ("b", 1), ("c", 1), ("big", 4)] {
            WAVWriter.write(
                Signals.sine(frequency: 440, rate: 48_000, frames: 48_000 * seconds, channels: 1, amplitude: 0.5),
                rate: 48_000, channels: 1, to: "\(directory)/\(name).wav")
        }
        let second = 48_000 * 2 * MemoryLayout<Float>.stride  // a second in a 48 kHz stereo zone
        let library = SoundLibrary(directory: directory, cacheBudget: 2 * second + second / 2)
        func identity(_ samples: [Float]) -> UnsafePointer<Float>? { samples.withUnsafeBufferPointer(\.baseAddress) }
        let a = try library.samples("a", rate: 48_000, channels: 2)
        let b = try library.samples("b", rate: 48_000, channels: 2)
        #expect(library.cachedBytes == 2 * second)
        #expect(identity(try library.samples("a", rate: 48_000, channels: 2)) == identity(a), "kept")
        _ = try library.samples("c", rate: 48_000, channels: 2)  // "b" was asked for least recently
        #expect(library.cachedBytes == 2 * second)
        #expect(identity(try library.samples("a", rate: 48_000, channels: 2)) == identity(a), "kept")
        let again = try library.samples("b", rate: 48_000, channels: 2)
        #expect(identity(again) != identity(b) && again == b, "let go of, then converted again")
        let big = try library.samples("big", rate: 48_000, channels: 2)
        #expect(big.count == 4 * 48_000 * 2)
        #expect(library.cachedBytes == 2 * second, "larger than the budget: not kept")
        // A WAV cut short: what it holds plays, and it is said, kept or not.
        #expect(truncate("\(directory)/big.wav", 44 + 2 * 48_000 * 2) == 0)  // its header and 2 of its 4 s
        _ = try library.samples("big", rate: 48_000, channels: 2)
        #expect(library.damage(of: "big")?.contains("truncated") == true, "\(library.damage(of: "big") ?? "nil")")
        #expect(library.cachedBytes <= library.cacheBudget)
    }
}

/// A WAV sound longer, or of more channels, than the limit is refused before it is decoded: a
/// 64 MiB 8-bit 8 kHz file is two hours, 256 MiB of samples before the resampler.
@Suite(.ownThread) struct WAVFileLimitTests {
    @Test func aSoundPastTheLimitIsRefused() throws {
        let second = NonFiniteWAVTests.floatWAV([Double](repeating: 0.5, count: 8000), bits: 32)
        #expect(try WAVFile.decode(second, name: "s.wav", limit: (samples: 8000, channels: 1)).frames == 8000)
        let more = NonFiniteWAVTests.floatWAV([Double](repeating: 0.5, count: 8001), bits: 32)
        #expect(throws: MediaError(file: "m.wav", problem: "more than 8000 samples (frames × channels)")) {
            try WAVFile.decode(more, name: "m.wav", limit: (samples: 8000, channels: 1))
        }
        #expect(throws: MediaError(file: "s.wav", problem: "1 channels, more than 0")) {
            try WAVFile.decode(second, name: "s.wav", limit: (samples: 8000, channels: 0))
        }
    }
}
