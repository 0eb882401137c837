// libFuzzer's driver, linked in by `-sanitize=fuzzer`.
//
// Why this exists: SwiftPM links every Linux executable with `--defsym main=<Target>_main` (so tests can
// import executables), which leaves libFuzzer's own `main` unused and fails to link a target that has no
// `<Target>_main`. So each fuzzer has a Swift `@main` that hands its test function to libFuzzer's driver.
#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer with the command line `argc`/`argv` on `test`; returns the process exit status.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*test)(const uint8_t *data, size_t size));
