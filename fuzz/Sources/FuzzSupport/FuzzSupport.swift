import CLibFuzzer
import Glibc

/// One fuzz input: the bytes libFuzzer made; returns 0 (libFuzzer's convention).
public typealias FuzzTest = @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32

/// Runs libFuzzer's driver on `test` with the process's command line, then exits with its status.
/// Call it from the fuzzer's `@main`.
public func runLibFuzzer(_ test: FuzzTest) -> Never {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, test))
}
