import BatonConfig
import FuzzSupport
import Glibc

// The configuration loader on arbitrary bytes: written to a file and read back through
// `BatonConfiguration.load(path:)`, the daemon's own entry point (so invalid UTF-8 reaches libyaml
// as it would from disk). Every input must load or throw a `ConfigError` with at least one issue.

/// The per-process scratch file the input is written to.
let scratch = "/tmp/baton-fuzz-config-\(getpid()).yaml"

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let fd = open(scratch, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fatalError("cannot write \(scratch)") }
    var written = 0
    while written < size {
        let n = write(fd, data! + written, size - written)
        guard n > 0 else { fatalError("cannot write \(scratch)") }
        written += n
    }
    close(fd)
    do {
        _ = try BatonConfiguration.load(path: scratch)
    } catch {
        precondition(!error.issues.isEmpty, "a ConfigError without issues")
        for issue in error.issues { _ = issue.description }
    }
    return 0
}

@main
struct FuzzConfigMain {
    static func main() { runLibFuzzer(fuzzConfig) }
}
