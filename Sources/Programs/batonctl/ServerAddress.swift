/// Where batond listens, from `--url`, `BATON_URL` or the default `http://127.0.0.1:8470`.
/// Accepts `http://HOST[:PORT][/PREFIX]` or `HOST[:PORT]`; HOST is a name, IPv4 or `[IPv6]`;
/// the port defaults to HTTP's 80 in a URL (`http://speaker.local/baton`, a reverse proxy: it went
/// to 8470, past the proxy) and to batond's 8470 for a bare HOST. Only plain HTTP: batond serves
/// no TLS.
struct ServerAddress: Equatable, Sendable {
    static let defaultURL = "http://127.0.0.1:8470"

    var host: String
    var port: UInt16
    /// A path prefix before `/api/v1/...` (for a reverse proxy), without the trailing `/`.
    var prefix: String

    /// The address as the user should read it, e.g. `http://127.0.0.1:8470`, `http://speaker.local/baton`
    /// (HTTP's port 80 is not written).
    var display: String { "http://\(hostHeader)\(prefix)" }

    /// The `Host:` header value (without HTTP's port 80, as browsers and curl send it).
    var hostHeader: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port == 80 ? h : "\(h):\(port)"
    }

    init(host: String, port: UInt16, prefix: String = "") {
        self.host = host
        self.port = port
        self.prefix = prefix
    }

    init(parsing text: String) throws(Failure) {
        var rest = Substring(text)
        var port: UInt16 = 8470
        if let scheme = rest.firstRange(of: "://") {
            let name = rest[..<scheme.lowerBound].lowercased()
            guard name == "http" else {
                throw .usage(
                    "--url \(text): only http:// is supported (batond serves plain HTTP; put a TLS proxy in front for https)"
                )
            }
            rest = rest[scheme.upperBound...]
            port = 80
        }
        var prefix = ""
        if let slash = rest.firstIndex(of: "/") {
            prefix = String(rest[slash...])
            rest = rest[..<slash]
            while prefix.hasSuffix("/") { prefix.removeLast() }
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw .usage("--url \(text): missing ] after the IPv6 address")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw .usage("--url \(text): expected :PORT after the IPv6 address")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw .usage("--url \(text): no host (expected e.g. http://127.0.0.1:8470)") }
        // `fe80::1` split at its last colon became host `fe80:` and port 1, which then could not
        // be resolved: exit 3, "cannot reach", for what is a usage error.
        if host.contains(":") && !rest.hasPrefix("[") {
            throw .usage("--url \(text): put an IPv6 address in brackets (e.g. http://[::1]:8470)")
        }
        if let portText {
            guard let p = UInt16(portText), p > 0 else {
                throw .usage("--url \(text): \"\(portText)\" is not a port (1..65535)")
            }
            port = p
        }
        self.init(host: String(host), port: port, prefix: prefix)
    }
}
