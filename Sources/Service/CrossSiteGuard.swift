import BatonConfig
import FoundationEssentials
import Glibc
import HTTPServer

/// The API's defence against other web sites, which a browser on the speaker's network (or on the
/// speaker itself) would otherwise let reach it: a page elsewhere can send a "simple" cross-site
/// POST (`text/plain`, no preflight) to `http://127.0.0.1:8470/…`, and a DNS-rebinding name can make
/// the API look same-origin to it. So every request's `Host` must be one of the API's own names,
/// and every state-changing request (any method but GET and HEAD) must be JSON
/// (`Content-Type: application/json`, which a cross-site page cannot send without a preflight
/// that the API never answers) and, when it carries an `Origin`, come from the API's own origin.
/// Refusals are 403 with `{"error": …, "rule": "host" | "content-type" | "origin"}`. Any thread.
struct CrossSiteGuard: Sendable {
    /// Lowercased host names and addresses the API answers to (no port, IPv6 without brackets), as
    /// known when the guard was made.
    let names: Set<String>
    /// The machine's names now (host name, `NAME.local`, interface addresses when listening on all
    /// of them), asked again when a `Host` is not in `names`: a speaker that got its DHCP address, or
    /// was renamed, after batond started must answer to it without a restart. Nil: `names` only.
    let machineNames: (@Sendable () -> Set<String>)?

    init(names: Set<String>, machineNames: (@Sendable () -> Set<String>)? = nil) {
        self.names = names
        self.machineNames = machineNames
    }

    /// The API's own names for `config`: the listen host, `localhost` and the loopback addresses,
    /// the machine's host name (and `NAME.local`), its interface addresses when it listens on all of
    /// them, and `allowed-hosts`. The machine's names are read again when a request names a host
    /// not among them.
    init(config: APIConfig) {
        let everyInterface = ["0.0.0.0", "::"].contains(config.listen.host)
        let machineNames: @Sendable () -> Set<String> = { Self.machineNames(everyInterface: everyInterface) }
        var names: Set<String> = ["localhost", "127.0.0.1", "::1"]
        names.insert(config.listen.host.lowercased())
        names.formUnion(machineNames())
        names.formUnion(config.allowedHosts.map { $0.lowercased() })
        self.init(names: names, machineNames: machineNames)
    }

    /// The host name and `NAME.local`, and every interface address when `everyInterface`.
    static func machineNames(everyInterface: Bool) -> Set<String> {
        var names: Set<String> = []
        var buffer = [CChar](repeating: 0, count: 256)
        if gethostname(&buffer, buffer.count - 1) == 0 {
            let host = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                .lowercased()
            if !host.isEmpty {
                names.insert(host)
                names.insert(host + ".local")
            }
        }
        if everyInterface { names.formUnion(Self.interfaceAddresses()) }
        return names
    }

    /// Every address of the machine's interfaces (getifaddrs), numeric.
    static func interfaceAddresses() -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var out: [String] = []
        var node: UnsafeMutablePointer<ifaddrs>? = first
        while let n = node {
            if let address = n.pointee.ifa_addr,
                address.pointee.sa_family == sa_family_t(AF_INET) || address.pointee.sa_family == sa_family_t(AF_INET6)
            {
                var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
                let length = socklen_t(
                    address.pointee.sa_family == sa_family_t(AF_INET)
                        ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
                if getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 {
                    var text = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    if let percent = text.firstIndex(of: "%") { text = String(text[..<percent]) }  // fe80::1%eth0
                    out.append(text.lowercased())
                }
            }
            node = n.pointee.ifa_next
        }
        return out
    }

    /// A `Host` or `Origin` authority split into host (lowercased, IPv6 without brackets, no
    /// trailing dot) and port; nil when it is not one.
    static func split(authority text: String) -> (host: String, port: String?)? {
        let t = text.lowercased()
        if t.hasPrefix("[") {
            guard let close = t.firstIndex(of: "]") else { return nil }
            let host = String(t[t.index(after: t.startIndex)..<close])
            let rest = t[t.index(after: close)...]
            if rest.isEmpty { return (host, nil) }
            guard rest.hasPrefix(":") else { return nil }
            return (host, String(rest.dropFirst()))
        }
        let parts = t.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, !parts[0].isEmpty else { return nil }
        var host = String(parts[0])
        if host.hasSuffix(".") { host.removeLast() }
        return (host, parts.count == 2 ? String(parts[1]) : nil)
    }

    /// Whether `address` is this machine's own (127.0.0.0/8, ::1, or 127.x mapped into IPv6).
    static func isLoopback(_ address: String?) -> Bool {
        guard let address else { return false }
        return address == "::1" || address.hasPrefix("127.") || address.lowercased().hasPrefix("::ffff:127.")
    }

    /// The refusal for `r`, or nil when it may go on.
    func refusal(_ r: HTTPRequest) -> HTTPResponse? {
        guard let hostHeader = r.headers["host"], let host = Self.split(authority: hostHeader) else {
            return Self.forbidden("host", "the request has no valid Host header")
        }
        if !names.contains(host.host) {
            // Asked only on a miss: a request by a known name costs no system call.
            let now = names.union(machineNames?() ?? [])
            guard now.contains(host.host) else {
                // The names (the host name, every interface's address: a VPN's, Docker's, a global
                // IPv6) are told only to a client on this machine: anyone else who reaches the port,
                // a rebinding page among them, learnt them without logging in.
                let names = Self.isLoopback(r.remoteAddress) ? " (\(now.sorted().joined(separator: ", ")))" : ""
                return Self.forbidden(
                    "host",
                    "Host \"\(hostHeader)\" is not one of this API's names\(names); "
                        + "add it to api.allowed-hosts if the speaker is reached by that name")
            }
        }
        guard r.method != "GET" && r.method != "HEAD" else { return nil }
        let type = r.headers["content-type"] ?? ""
        let media = type.split(separator: ";", maxSplits: 1).first.map(\.trimmedBlanks) ?? ""
        guard media.lowercased() == "application/json" else {
            return Self.forbidden(
                "content-type",
                "a \(r.method) must carry Content-Type: application/json (got \(type.isEmpty ? "none" : "\"\(type)\""))"
            )
        }
        if r.headers["sec-fetch-site"]?.lowercased() == "cross-site" {
            return Self.forbidden("origin", "a \(r.method) from another site is refused (Sec-Fetch-Site: cross-site)")
        }
        if let origin = r.headers["origin"] {
            // The page's own origin is http(s)://HOST[:PORT] with exactly the authority of Host (a
            // browser leaves the default port out of both).
            let own = hostHeader.lowercased()
            guard origin.lowercased() == "http://" + own || origin.lowercased() == "https://" + own else {
                return Self.forbidden(
                    "origin",
                    "a \(r.method) from origin \"\(origin)\" is refused: only this API's own page (http://\(own)) may change things"
                )
            }
        }
        return nil
    }

    static func forbidden(_ rule: String, _ message: String) -> HTTPResponse {
        let body =
            (try? JSONEncoder.baton.encode(["error": "forbidden (\(rule) rule): " + message, "rule": rule]))
            .map { Array($0) } ?? []
        return HTTPResponse(
            status: 403, headers: [(name: "Content-Type", value: "application/json")], body: .bytes(body))
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    var trimmedBlanks: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
