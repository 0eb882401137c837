import Testing

@testable import Subsonic

/// `SubsonicSettings.serverIdentity`: the URLs of one server written in different ways compare
/// equal; other servers do not.
@Suite struct ServerIdentityTests {
    @Test func oneServerWrittenInDifferentWays() {
        let same = [
            "http://nas:4533", "http://nas:4533/", "http://nas:4533//", "HTTP://NAS:4533", "http://Nas:4533/",
        ]
        #expect(Set(same.map { SubsonicSettings.serverIdentity(url: $0) }) == ["http://nas:4533"])
        #expect(SubsonicSettings.serverIdentity(url: "http://nas:80/music/") == "http://nas/music")
        #expect(SubsonicSettings.serverIdentity(url: "https://NAS:443") == "https://nas")
        #expect(SubsonicSettings.serverIdentity(url: "http://[::1]:80/") == "http://[::1]")
        #expect(SubsonicSettings.serverIdentity(url: "http://u@NAS:4533/x") == "http://u@nas:4533/x")
    }

    @Test func otherServersStayApart() {
        let urls = [
            "http://nas:4533", "https://nas:4533", "http://nas:4534", "http://nas", "http://nas:4533/Music",
            "http://nas:4533/music", "https://nas:80", "http://nas:443",
        ]
        #expect(Set(urls.map { SubsonicSettings.serverIdentity(url: $0) }).count == urls.count)
    }
}
