import Arbiter
import BatonConfig
import ControlParts
import Testing

/// The arbiter's own default policy (its tests', docs/ARBITER.md's) is the one the daemon runs
/// when the file has no `policy:` section: they differed (music `lower: mix`, announcements
/// resumed within 30 s), and the document described the arbiter's.
@Suite struct PolicyDefaultsTests {
    @Test func theArbitersDefaultIsTheDaemons() {
        #expect(Policy(PolicyConfig.default) == Policy.default)
    }
}
