import BatonTesting
import Subsonic
import Testing

@Suite(.ownThread) struct MD5Tests {
    /// MD5 matches the test suite of RFC 1321 (appendix A.5), including multi-block messages.
    @Test(arguments: [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
        (
            "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
            "57edf4a22be3c955ac49da2e2107b67a"
        ),
    ])
    func matchesRFC1321Vectors(input: String, expected: String) {
        #expect(MD5.hex(input) == expected)
    }

    /// The Subsonic API documentation's example token: md5("sesame" + "c19b2d") = 26719a1196d2a940705a59634eb18eab.
    @Test func computesTheSubsonicDocumentationToken() {
        #expect(MD5.hex("sesame" + "c19b2d") == "26719a1196d2a940705a59634eb18eab")
    }

    /// Messages whose padding crosses a block boundary (55, 56, 63, 64 bytes) hash like the reference.
    @Test(arguments: [
        (55, "ef1772b6dff9a122358552954ad0df65"),
        (56, "3b0c8ac703f828b04c6c197006d17218"),
        (63, "b06521f39153d618550606be297466d5"),
        (64, "014842d480b571495a4a0363793f7367"),
    ])
    func hashesBlockBoundaryLengths(length: Int, expected: String) {
        #expect(MD5.hex(String(repeating: "a", count: length)) == expected)
    }
}
