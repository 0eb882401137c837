# Sourced by the scripts that run batond against a Supysonic server of their own (bench-realtime.sh,
# text-order.sh), never the shared test server's port.
#
#   free_port                      prints a TCP port free on 127.0.0.1 now
#   start_private_subsonic [LIB]   scripts/subsonic-server.sh start on a free port, with the library
#                                  LIB (its BATON_SUBSONIC_LIBRARY; default `test`) and the env file
#                                  BATON_SUBSONIC_ENV, which the caller must have exported first (its
#                                  cleanup stops that server, not the shared one); then sets
#                                  subsonic_url, subsonic_pw (the password file), subsonic_pid and
#                                  subsonic_data from it.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_private_subsonic() {
  [ -n "${BATON_SUBSONIC_ENV:-}" ] || { echo "$(basename "$0"): export BATON_SUBSONIC_ENV first" >&2; exit 2; }
  BATON_SUBSONIC_PORT="$(free_port)" BATON_SUBSONIC_LIBRARY="${1:-test}" scripts/subsonic-server.sh start
  subsonic_url="$(subsonic_env url)"; subsonic_pw="$(subsonic_env password-file)"
  subsonic_pid="$(subsonic_env pid)"; subsonic_data="$(subsonic_env data)"
}

# KEY's value in the server's env file.
subsonic_env() { sed -n "s/^$1=//p" "$BATON_SUBSONIC_ENV" | head -n 1; }
