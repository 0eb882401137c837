import Glibc

/// What went wrong with a GPIO setting or with the GPIO chip: each case names the input or the
/// chip and line at fault.
///
/// A plain value: safe to use from any thread.
public enum GPIOError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A configuration value that cannot be used; `field` is its full path (`gpio.doorbell.edge`).
    case invalidConfiguration(field: String, reason: String)
    /// A libgpiod call failed: `subject` is the chip (`gpiochip0`) or line (`gpiochip0 line 17`),
    /// `action` what was tried (empty for opening the chip), `code` the errno.
    case system(subject: String, action: String, code: Int32)

    public var description: String {
        switch self {
        case .invalidConfiguration(let field, let reason):
            return "\(field): \(reason)"
        case .system(let subject, let action, let code):
            let text = String(cString: strerror(code))
            return action.isEmpty ? "\(subject): \(text)" : "\(subject): \(action): \(text)"
        }
    }
}
