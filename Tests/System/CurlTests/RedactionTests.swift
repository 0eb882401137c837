import BatonTesting
import Curl
import Testing

@Suite(.ownThread) struct RedactionTests {
    /// Credentials in a Subsonic URL (p, t, s, apiKey, user:password@) are replaced by ***; the rest stays.
    @Test(arguments: [
        ("http://h/rest/ping?u=me&t=abc123&s=x9&v=1.16.1", "http://h/rest/ping?u=me&t=***&s=***&v=1.16.1"),
        ("http://h/rest/stream?id=1&p=enc:736563726574&f=json", "http://h/rest/stream?id=1&p=***&f=json"),
        ("https://h/rest/ping?apiKey=k3y", "https://h/rest/ping?apiKey=***"),
        ("http://me:secret@h:4533/rest/ping", "http://me:***@h:4533/rest/ping"),
        ("http://h/rest/search3?query=p%3Dx&sp=1", "http://h/rest/search3?query=p%3Dx&sp=1"),
    ])
    func redactsSecrets(url: String, expected: String) {
        #expect(URLRedaction.redact(url) == expected)
    }

    /// A CurlError's URL and description are redacted when it is created.
    @Test func curlErrorsRedactTheirURL() {
        let error = CurlError(code: 7, message: "Couldn't connect to server", url: "http://h/rest/ping?p=hunter2")
        #expect(error.url == "http://h/rest/ping?p=***")
        #expect(!error.description.contains("hunter2"))
    }
}
