/// Why an HTTP transfer failed: libcurl's result code and text, and the URL with its secrets hidden.
///
/// An HTTP error status (404, 500) is not a `CurlError`: the transfer worked and the caller reads the
/// status. The URL in ``url`` and ``description`` never shows the values of the query parameters that
/// carry credentials (see ``URLRedaction``).
///
/// A plain value: safe to use from any thread.
public struct CurlError: Error, Sendable, Equatable, CustomStringConvertible {
    /// libcurl's result code (a `CURLcode`), e.g. 7 for "couldn't connect", 18 for a transfer closed
    /// with bytes remaining, 28 for a timeout.
    public var code: Int32
    /// libcurl's text for ``code`` (`curl_easy_strerror`), e.g. "Couldn't connect to server".
    public var message: String
    /// libcurl's detailed text for this transfer when it gave one ("Failed to connect to 127.0.0.1
    /// port 9: Connection refused"), or our own reason for cancelled and stalled transfers.
    public var detail: String
    /// The URL of the transfer, with credentials replaced by `***`.
    public var url: String
    /// Whether the caller stopped the transfer (`onData` returned `false`).
    public var cancelled: Bool
    /// Whether the transfer was stopped because it exceeded a size limit (``HTTPClient/fetch(url:headers:maxBodyBytes:timeout:)``).
    public var tooLarge: Bool

    /// Creates an error; `url` is redacted here.
    public init(
        code: Int32, message: String, detail: String = "", url: String, cancelled: Bool = false,
        tooLarge: Bool = false
    ) {
        self.code = code
        self.message = message
        self.detail = detail
        self.url = URLRedaction.redact(url)
        self.cancelled = cancelled
        self.tooLarge = tooLarge
    }

    /// libcurl's code for "couldn't connect" (nothing listens, or the host refused).
    public static let couldNotConnect: Int32 = 7
    /// libcurl's code for "transfer closed with outstanding read data remaining" (the server went away
    /// mid-body): resume with a `Range` request.
    public static let partialFile: Int32 = 18
    /// libcurl's code for a write callback that took fewer bytes than offered (how a cancel shows).
    public static let writeError: Int32 = 23
    /// libcurl's code for a timeout (connect, total, or low-speed limit).
    public static let timedOut: Int32 = 28
    /// libcurl's code for a progress callback that stopped the transfer (how a stall shows).
    public static let abortedByCallback: Int32 = 42

    /// Whether the server or the network is at fault (could not connect, timed out, stalled, closed
    /// early, a TLS handshake cut short (35), an HTTP/2 connection or stream reset (16, 92: what an
    /// nginx that timed out a paused stream sends)): the case where a retry, or a `Range` resume,
    /// makes sense.
    public var isTransient: Bool {
        !cancelled && !tooLarge
            && [5, 6, 7, 16, Self.partialFile, Self.timedOut, 35, Self.abortedByCallback, 52, 55, 56, 92]
                .contains(code)
    }

    /// `curl error 7 (Couldn't connect to server: Failed to connect …) for http://host/rest/ping?p=***`.
    public var description: String {
        let what = cancelled ? "cancelled" : tooLarge ? "response too large" : "curl error \(code)"
        let text = detail.isEmpty || detail == message ? message : "\(message): \(detail)"
        return "\(what) (\(text)) for \(url)"
    }
}
