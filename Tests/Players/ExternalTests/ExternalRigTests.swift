import BatonTesting
import Glibc
import Testing

/// The rig's own API calls, which every external test relies on.
@Suite(.ownThread) struct ExternalRigTests {
    /// A curl that is missing or fails is an issue that says so (what, exit status, curl's message),
    /// not an empty answer that the caller's check then reports as a misleading mismatch.
    @Test func aMissingOrFailingCurlIsAnIssueThatSaysSo() throws {
        let rig = try ExternalRig(sources: "  x: {class: music}")
        #expect(rig.get("/api/v1/status").contains("\"zones\""))

        let missing = rig.directory + "/no-curl-here"
        rig.curl = missing
        withKnownIssue {
            _ = rig.get("/api/v1/status")
        } matching: { issue in
            let text = String(describing: issue)
            return text.contains("cannot start \(missing)") && text.contains("install curl")
        }
        rig.curl = "/usr/bin/curl"

        rig.killBatond()
        let url = "http://127.0.0.1:\(rig.port)/api/v1/announce"
        withKnownIssue {
            _ = rig.post("/api/v1/announce", #"{"sound": "bell"}"#)
        } matching: { issue in
            // 7: could not connect; curl's own message names the failure.
            let text = String(describing: issue)
            return text.contains("curl \(url) failed (exit status 7)")
                && text.contains("Failed to connect")
        }
    }
}
