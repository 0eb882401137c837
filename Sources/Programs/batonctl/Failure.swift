/// Why batonctl stops, and the exit status each reason gives (documented in docs/BATONCTL.md).
enum Failure: Error {
    /// Bad command line: the message, then the usage of the command (or the overview). Exit 2.
    case usage(String, command: String? = nil)
    /// Nothing listens at the address (connection refused). Exit 3.
    case notRunning(ServerAddress)
    /// The address cannot be reached: unknown host, timeout, network unreachable. Exit 3.
    case unreachable(ServerAddress, String)
    /// batond answered with an error status; `message` is its JSON `error` text. Exit 1.
    case api(status: Int, message: String)
    /// Anything else that went wrong (unreadable token file, a malformed answer). Exit 1.
    case failed(String)

    var exitStatus: Int32 {
        switch self {
        case .usage: 2
        case .notRunning, .unreachable: 3
        case .api, .failed: 1
        }
    }

    /// What batonctl prints on standard error.
    var message: String {
        switch self {
        case .usage(let text, _): "batonctl: \(text)"
        case .notRunning(let address):
            "batond is not running at \(address.display) (connection refused). "
                + "Start it with `systemctl start baton` or `scripts/run.sh`."
        case .unreachable(let address, let why): "cannot reach batond at \(address.display): \(why)"
        case .api(let status, let text): "batond: \(text) (HTTP \(status))"
        case .failed(let text): "batonctl: \(text)"
        }
    }
}
