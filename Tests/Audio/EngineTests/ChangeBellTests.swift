import BatonTesting
import Testing

@testable import Engine

/// The control plane's changes that belong together ring the output's bell once, when the last hold
/// is released; a change with no hold rings at once.
@Suite(.ownThread) struct ChangeBellTests {
    @Test func heldPostsRingOnceOnRelease() {
        let bell = ChangeBell()
        bell.post()
        #expect(bell.fd.waitForPost(milliseconds: 0), "no hold: at once")
        bell.hold()
        bell.hold()
        bell.post()
        bell.post()
        #expect(!bell.fd.waitForPost(milliseconds: 0), "held")
        bell.release()
        #expect(!bell.fd.waitForPost(milliseconds: 0), "still held once")
        bell.release()
        #expect(bell.fd.waitForPost(milliseconds: 0), "the last release rings")
        #expect(!bell.fd.waitForPost(milliseconds: 0), "once")
        bell.hold()
        bell.release()
        #expect(!bell.fd.waitForPost(milliseconds: 0), "nothing posted: no ring")
    }
}
