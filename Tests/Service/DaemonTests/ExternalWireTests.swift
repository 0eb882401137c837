import BatonTesting
import Testing

@testable import Players

/// The wire protocol's messages as batond writes them.
@Suite(.ownThread) struct ExternalWireTests {
    /// An ERROR longer than the plugin reads (its 1024-byte input, with the header) is cut at a
    /// character, ending "…": it was sent whole, and the plugin took batond for a peer that is not
    /// batond, the sentence lost. A short one goes as it is.
    @Test func anErrorIsCutToWhatThePluginReads() throws {
        let long = "unknown source \"x\"; the sources are " + String(repeating: "é-source, ", count: 200)
        let message = ExternalWire.error(long)
        let payload = Array(message.dropFirst(8))
        #expect(ExternalWire.u32(message[...], at: 4) == UInt32(payload.count))
        #expect(payload.count <= ExternalWire.maxErrorPayload && payload.count + 8 <= 1024)
        let text = try #require(String(validating: payload, as: UTF8.self), "whole characters")
        #expect(text.hasSuffix("…") && long.hasPrefix(text.dropLast()))
        #expect(Array(ExternalWire.error("no such source").dropFirst(8)) == Array("no such source".utf8))
    }
}
