import BatonTesting
import Glibc
import Testing

/// The shipped board profiles in `boards/`, checked by the rules of docs/BOARDS.md.
@Suite(.ownThread) struct BoardProfileTests {
    static let directory = BatondProcess.repoRoot + "/boards"

    static func read(_ name: String) -> String { TextFile.read(directory + "/" + name) ?? "" }

    /// The four documented boards are there.
    @Test func theDocumentedBoardsExist() {
        let files = BoardProfile.files(in: Self.directory)
        for name in [
            "pi4-hifiberry-dacplus.yaml", "pizero2w-max98357a.yaml", "pi-headphones-bcm2835.yaml",
            "usb-dac-generic.yaml",
        ] {
            #expect(files.contains(name), "\(files)")
        }
    }

    /// Every profile has every key, a named-card PCM, rates in 8000...384000, only formats Baton writes,
    /// a config.txt line, and a buffer of at least two periods.
    @Test(arguments: BoardProfile.files(in: BoardProfileTests.directory))
    func profileIsValid(file: String) {
        let profile = BoardProfile(text: Self.read(file))
        #expect(profile.problems == [], "\(file)")
        #expect(
            file.dropLast(5).allSatisfy { $0.isLowercase || $0.isNumber || $0 == "-" }, "file names are [a-z0-9-]+.yaml"
        )
    }

    /// No two profiles share a name.
    @Test func namesAreUnique() {
        let names = BoardProfile.files(in: Self.directory).map {
            BoardProfile(text: Self.read($0)).values["name"] ?? ""
        }
        #expect(Set(names).count == names.count, "\(names)")
    }

    /// The checker itself catches each kind of mistake (so a passing profile means something).
    @Test(arguments: [
        ("formats: [S16_LE, S32_LE]", "formats: [S16_LE, S24_LE]", "formats:"),
        ("rates: [44100, 48000]", "rates: [44100, 768000]", "rates:"),
        ("buffer: 40ms", "buffer: 15ms", "shorter than 2 periods"),
        ("period: 10ms", "period: 10 ms", "period:"),
        ("dtoverlay: dtoverlay=x", "dtoverlay: overlay=x", "dtoverlay:"),
        ("pcm: \"hw:CARD=X,DEV=0\"", "pcm: hw:1,0", "should name the card"),
        ("mixer: PCM", "mixer: none", "software volume"),
        ("channels: 2", "channels: 9", "channels:"),
        ("notes: >\n  fine", "notes: >\n  fine\ncolour: red", "colour: unknown key"),
        ("name: X", "", "name: missing"),
    ])
    func checkerRejectsMistakes(good: String, bad: String, problem: String) {
        let profile = """
            name: X
            pcm: "hw:CARD=X,DEV=0"
            rates: [44100, 48000]
            formats: [S16_LE, S32_LE]
            channels: 2
            mixer: PCM
            volume: hardware
            dtoverlay: dtoverlay=x
            period: 10ms
            buffer: 40ms
            notes: >
              fine
            """
        #expect(BoardProfile(text: profile).problems == [])
        let broken = BoardProfile(text: profile.replacingFirst(good, with: bad))
        #expect(broken.problems.contains { $0.contains(problem) }, "\(broken.problems)")
    }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = firstRange(of: target) else { return self }
        var copy = self
        copy.replaceSubrange(range, with: replacement)
        return copy
    }
}
