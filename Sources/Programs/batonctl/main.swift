import Glibc

// batonctl: the command-line client of batond's control API (docs/BATONCTL.md).
// SIGPIPE keeps its default: `batonctl events --follow | head` ends when head does (sockets use
// MSG_NOSIGNAL, so a dropped connection is an error, not a signal).
exit(CLI.main(Array(CommandLine.arguments.dropFirst())))
