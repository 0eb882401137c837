// Intentionally empty: the module is its header (CLibFuzzer.h).
