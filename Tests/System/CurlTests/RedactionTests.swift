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

    /// In free text (a server's error page echoing the query), the values of the credential
    /// parameters become *** wherever a name begins; names that only end in one stay.
    @Test(arguments: [
        ("bad request /rest/ping?u=me&t=abc123&s=x9 here", "bad request /rest/ping?u=me&t=***&s=*** here"),
        ("<a href=\"/rest/x?p=enc:7365&amp;apiKey=k3y\">", "<a href=\"/rest/x?p=***&amp;apiKey=***\">"),
        ("t=abc; posts=2 sp=1 status=failed", "t=***; posts=2 sp=1 status=failed"),
    ])
    func redactsSecretsInText(text: String, expected: String) {
        #expect(URLRedaction.redactParameters(in: text) == expected)
    }

    /// A CurlError's URL and description are redacted when it is created.
    @Test func curlErrorsRedactTheirURL() {
        let error = CurlError(code: 7, message: "Couldn't connect to server", url: "http://h/rest/ping?p=hunter2")
        #expect(error.url == "http://h/rest/ping?p=***")
        #expect(!error.description.contains("hunter2"))
    }
}
