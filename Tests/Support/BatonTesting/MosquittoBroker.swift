import Glibc

/// A real mosquitto broker on 127.0.0.1, started from a generated config for one test (or suite),
/// with helpers that drive the independent command-line peers `mosquitto_pub` and `mosquitto_sub`.
///
/// Thread: one test at a time. Stopped and its directory removed on deinit.
public final class MosquittoBroker: @unchecked Sendable {
    // @unchecked: `process` changes only in start/stop/kill, which a test calls from one thread.
    public static let brokerPath = "/usr/sbin/mosquitto"
    public static let publisherPath = "/usr/bin/mosquitto_pub"
    public static let subscriberPath = "/usr/bin/mosquitto_sub"
    public static let passwdPath = "/usr/bin/mosquitto_passwd"

    /// Why the broker could not be started: the message says how to fix it.
    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The TCP port on 127.0.0.1; the same across restarts.
    public let port: Int
    /// The temporary directory holding `mosquitto.conf`, the password file and `broker.log`.
    public let directory: String
    private var process: BackgroundProcess?

    /// `mqtt://127.0.0.1:<port>`.
    public var url: String { "\(caFile == nil ? "mqtt" : "mqtts")://127.0.0.1:\(port)" }
    /// With TLS: the CA certificate that signed the broker's (for the client's `ca-file`).
    public private(set) var caFile: String?
    /// The broker's log (connections, wills, errors), for failure messages.
    public var log: String { process?.output ?? "" }
    /// Whether the broker process is running.
    public var isRunning: Bool { process != nil }

    /// Writes a config and starts the broker on `port` (a free one when nil), anonymous access
    /// allowed when `users` is empty, else only those users with those passwords (a password file
    /// made with `mosquitto_passwd -b`). Returns once the port accepts connections.
    /// With `tls`, the listener speaks TLS only, with a certificate for 127.0.0.1 signed by a CA made
    /// on the spot with openssl (``caFile``). `refusing`: topic filters whose subscriptions the
    /// broker refuses (SUBACK 0x80), through mosquitto's dynamic security plugin (an `acl_file`
    /// denies delivery, not the subscription), anonymous clients allowed everything else. `acl`:
    /// the lines of an `acl_file` (`user NAME`, then `topic read|write|readwrite|deny TOPIC`):
    /// a publication it does not allow is dropped, and the publisher, on MQTT 3.1.1, told nothing.
    public init(
        port: Int? = nil, users: [String: String] = [:], tls: Bool = false, refusing: [String] = [],
        acl: String? = nil
    ) throws {
        for path in [Self.brokerPath, Self.publisherPath, Self.subscriberPath, Self.passwdPath]
        where access(path, X_OK) != 0 {
            throw StartError(
                description: "\(path) is missing: run `scripts/install-deps.sh --test` "
                    + "(packages mosquitto and mosquitto-clients)")
        }
        guard let made = mkdtemp(strdup("/tmp/baton-mosquitto-XXXXXX")) else {
            throw StartError(description: "mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        directory = String(cString: made)
        free(made)
        self.port = try port ?? FreePort.next()
        var config = [
            "listener \(self.port) 127.0.0.1",
            "persistence false",
            // As root, mosquitto would switch to the `mosquitto` user, which cannot read our files.
            "user root",
            "log_dest stderr",
            "log_type error", "log_type warning", "log_type notice", "log_type information",
            "connection_messages true",
        ]
        if tls {
            let d = directory
            let steps: [[String]] = [
                [
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Baton test CA",
                    "-keyout", "\(d)/ca.key", "-out", "\(d)/ca.crt",
                ],
                [
                    "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "\(d)/server.key",
                    "-out", "\(d)/server.csr",
                ],
                [
                    "x509", "-req", "-in", "\(d)/server.csr", "-CA", "\(d)/ca.crt", "-CAkey", "\(d)/ca.key",
                    "-CAcreateserial",
                    "-days", "2", "-extfile", "\(d)/san.cnf", "-out", "\(d)/server.crt",
                ],
            ]
            guard writeText(d + "/san.cnf", "subjectAltName=IP:127.0.0.1\n") else {
                throw StartError(description: "cannot write san.cnf")
            }
            for arguments in steps {
                let result = Subprocess.run("/usr/bin/openssl", arguments)
                guard result.status == 0 else {
                    throw StartError(description: "openssl \(arguments[0]) failed: \(result.output)")
                }
            }
            config += ["cafile \(d)/ca.crt", "certfile \(d)/server.crt", "keyfile \(d)/server.key"]
            caFile = d + "/ca.crt"
        }
        if users.isEmpty {
            config.append("allow_anonymous true")
        } else {
            let passwordFile = directory + "/passwords"
            for (index, (user, password)) in users.sorted(by: { $0.key < $1.key }).enumerated() {
                let arguments = (index == 0 ? ["-c"] : []) + ["-b", passwordFile, user, password]
                let result = Subprocess.run(Self.passwdPath, arguments)
                guard result.status == 0 else {
                    throw StartError(description: "mosquitto_passwd failed (\(result.status)): \(result.output)")
                }
            }
            config += ["allow_anonymous false", "password_file \(passwordFile)"]
        }
        if !refusing.isEmpty {
            let listing = Subprocess.run("/usr/bin/dpkg", ["-L", "mosquitto"]).output
            guard
                let plugin = listing.split(separator: "\n").first(where: {
                    $0.hasSuffix("/mosquitto_dynamic_security.so")
                })
            else {
                throw StartError(description: "the mosquitto package has no mosquitto_dynamic_security.so")
            }
            let acls = refusing.map {
                #"{"acltype": "subscribeLiteral", "topic": "\#($0)", "priority": 1, "allow": false}"#
            }
            let json = """
                {"defaultACLAccess": {"publishClientSend": true, "publishClientReceive": true, "subscribe": true,
                 "unsubscribe": true}, "clients": [], "anonymousGroup": "anonymous",
                 "groups": [{"groupname": "anonymous", "roles": [{"rolename": "refusing"}]}],
                 "roles": [{"rolename": "refusing", "acls": [\(acls.joined(separator: ", "))]}]}
                """
            guard writeText(directory + "/dynsec.json", json + "\n") else {
                throw StartError(description: "cannot write \(directory)/dynsec.json")
            }
            config += ["plugin \(plugin)", "plugin_opt_config_file \(directory)/dynsec.json"]
        }
        if let acl {
            guard writeText(directory + "/acl", acl + "\n") else {
                throw StartError(description: "cannot write \(directory)/acl")
            }
            config.append("acl_file \(directory)/acl")
        }
        guard writeText(directory + "/mosquitto.conf", config.joined(separator: "\n") + "\n") else {
            throw StartError(description: "cannot write \(directory)/mosquitto.conf")
        }
        try start()
    }

    deinit {
        process?.stop()
        if let entries = opendir(directory) {
            while let entry = readdir(entries) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) {
                    String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name != "." && name != ".." { unlink(directory + "/" + name) }
            }
            closedir(entries)
        }
        rmdir(directory)
    }

    /// Starts the broker (again) on the same port; returns once the port accepts connections.
    public func start() throws {
        guard process == nil else { return }
        let process = try BackgroundProcess(
            Self.brokerPath, ["-c", directory + "/mosquitto.conf"],
            outputPath: directory + "/broker.log")
        self.process = process
        let port = self.port
        let listening = waitUntil(seconds: 10) { process.wait(seconds: 0) != nil || Self.accepts(port: port) }
        guard listening, process.wait(seconds: 0) == nil else {
            let log = process.output
            self.process = nil
            throw StartError(description: "mosquitto did not start on 127.0.0.1:\(port): \(log)")
        }
    }

    /// Stops the broker with SIGTERM (it closes every connection; clients publish no will).
    public func stop() {
        process?.stop(signal: SIGTERM)
        process = nil
    }

    /// Kills the broker with SIGKILL, as a crash or power loss would.
    public func kill() {
        process?.stop(signal: SIGKILL)
        process = nil
    }

    /// Freezes the broker (SIGSTOP: it keeps its connections and reads nothing) or lets it go on
    /// (`frozen: false`, SIGCONT), as a hung or swapped-out broker would.
    public func freeze(_ frozen: Bool = true) {
        if let pid = process?.pid { Glibc.kill(pid, frozen ? SIGSTOP : SIGCONT) }
    }

    /// Publishes with `mosquitto_pub` (a separate client) and returns once it has been sent.
    /// - Throws: ``StartError`` with the tool's output when it fails.
    public func publish(
        topic: String, message: String, qos: Int = 1, retain: Bool = false,
        user: (name: String, password: String)? = nil
    ) throws {
        var arguments = ["-h", "127.0.0.1", "-p", "\(port)", "-t", topic, "-m", message, "-q", "\(qos)"]
        if let caFile { arguments += ["--cafile", caFile] }
        if retain { arguments.append("-r") }
        if let user { arguments += ["-u", user.name, "-P", user.password] }
        let result = Subprocess.run(Self.publisherPath, arguments, seconds: 10)
        guard result.status == 0 else {
            throw StartError(description: "mosquitto_pub -t \(topic) failed (\(result.status)): \(result.output)")
        }
    }

    /// Starts `mosquitto_sub` on `topic`, exiting after `count` messages or `seconds`, and returns
    /// once its subscription is acknowledged (so nothing published afterwards can be missed).
    public func subscribe(
        topic: String, count: Int = 1, seconds: Int = 10,
        user: (name: String, password: String)? = nil
    ) throws -> MosquittoSubscription {
        var arguments = [
            "-d", "-h", "127.0.0.1", "-p", "\(port)", "-t", topic, "-C", "\(count)", "-W", "\(seconds)",
            "-F", "%t %p",
        ]
        if let caFile { arguments += ["--cafile", caFile] }
        if let user { arguments += ["-u", user.name, "-P", user.password] }
        // stdbuf: mosquitto_sub's stdout is a file, fully buffered; its lines must show as they come.
        let process = try BackgroundProcess(
            "/usr/bin/stdbuf", ["-oL", Self.subscriberPath] + arguments,
            outputPath: directory + "/sub-\(UInt32.random(in: 0...UInt32.max)).log")
        guard waitUntil(seconds: 10, { process.output.contains("Subscribed (mid") || process.wait(seconds: 0) != nil }),
            process.output.contains("Subscribed (mid")
        else {
            throw StartError(description: "mosquitto_sub -t \(topic) did not subscribe: \(process.output)")
        }
        return MosquittoSubscription(process: process)
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    public static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// A running `mosquitto_sub` (see ``MosquittoBroker/subscribe(topic:count:seconds:user:)``).
public final class MosquittoSubscription: Sendable {
    let process: BackgroundProcess

    init(process: BackgroundProcess) {
        self.process = process
    }

    /// Ends it before its count or timeout.
    public func stop() { _ = process.stop() }

    /// Waits up to `seconds` until a message received so far contains `text`; whether one did.
    public func waitFor(_ text: String, seconds: Double = 10) -> Bool {
        waitUntil(seconds: seconds, every: 0.01) {
            process.output.split(separator: "\n").contains {
                !$0.hasPrefix("Client ") && !$0.hasPrefix("Subscribed (mid") && $0.contains(text)
            }
        }
    }

    /// Waits for it to exit (after its count of messages, or its timeout) and returns the messages
    /// received as `topic payload` lines, without the debug lines.
    public func messages(seconds: Double = 15) -> [String] {
        process.wait(seconds: seconds)
        return process.output.split(separator: "\n").map(String.init).filter {
            !$0.hasPrefix("Client ") && !$0.hasPrefix("Subscribed (mid")
        }
    }
}

/// Writes `text` to `path`; returns whether it worked.
private func writeText(_ path: String, _ text: String) -> Bool {
    guard let file = fopen(path, "wb") else { return false }
    defer { fclose(file) }
    let bytes = Array(text.utf8)
    return fwrite(bytes, 1, bytes.count, file) == bytes.count
}
