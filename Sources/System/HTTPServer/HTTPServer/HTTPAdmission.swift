/// What `HTTPServer`'s `admit` makes of a request whose head has come, before any of its body is read.
public enum HTTPAdmission: Sendable {
    /// Read its body (up to the server's `maxBodyBytes`) and hand the request to the handler.
    case proceed
    /// Read at most `bytes` of its body (never more than `maxBodyBytes`): a body declared over it
    /// is answered `tooLarge` at once, a chunked one growing over it is not stored past it and
    /// answered `tooLarge` at its end.
    case limit(bytes: Int, tooLarge: HTTPResponse)
    /// Refused: `response` is sent at once and none of the body is read (libmicrohttpd closes a
    /// connection whose body is still to come rather than read it).
    case refuse(HTTPResponse)
}
