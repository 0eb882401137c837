import BatonTesting
import Curl
import Subsonic
import Testing

@Suite(.ownThread) struct UnreachableServerTests {
    /// A Subsonic client pointed at a closed port reports a transport error without the password.
    @Test func reportsAnUnreachableSubsonicServer() throws {
        let port = try FreePort.next()
        let client = SubsonicClient(
            config: SubsonicSettings(
                url: "http://127.0.0.1:\(port)", user: "u",
                password: "pa55word-secret"))
        let error = #expect(throws: SubsonicError.self) { try client.ping() }
        guard case .transport(let curlError)? = error else {
            Issue.record("expected a transport error, got \(String(describing: error))")
            return
        }
        #expect(curlError.code == CurlError.couldNotConnect)
        #expect(!"\(error!)".contains("pa55word-secret"))
        #expect(!"\(error!)".contains(MD5.hex("pa55word-secret")))
    }
}
