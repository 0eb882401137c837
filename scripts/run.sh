#!/usr/bin/env bash
# README command 1: installs whatever is missing, builds Baton (release) and runs the daemon on
# config/baton.yaml (or the config given as the first argument). With no sound card the default
# config's zones write WAV files into ./out, paced in real time.
#
# Demo mode: when the config has no `music:` section, a local Subsonic server (Supysonic on
# 127.0.0.1:4540, in a venv) is started with a generated album; Baton plays the album on every
# zone and rings the doorbell a few seconds later, so the whole mission can be heard without any
# hardware or music server. `BATON_DEMO=0 scripts/run.sh` turns it off.
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-config/baton.yaml}"
[ -r "$config" ] || { echo "baton: cannot read $config" >&2; exit 1; }
demo=0
if [ "${BATON_DEMO:-1}" != 0 ] && ! grep -q '^music:' "$config"; then demo=1; fi

if [ $demo = 1 ]; then scripts/install-deps.sh --demo; else scripts/install-deps.sh; fi
# The package's build (static Swift runtime, -z now): what runs here is what the .deb installs.
. scripts/release-flags.sh
swift build "${release_flags[@]}" --product batond
swift build "${release_flags[@]}" --product batonctl

api="$(sed -n 's/^  listen: *\([0-9.:]*\).*/\1/p' "$config" | head -n 1)"
api="${api:-127.0.0.1:8470}"
# The demo's generated config (.demo-NAME next to the user's); empty until it is written, so a
# failure or Ctrl-C before then never removes anything, least of all the user's own config.
demo_config=""
demo_env=/tmp/baton-demo-subsonic.env
cleanup() {
  [ -n "${batond_pid:-}" ] && kill "$batond_pid" 2>/dev/null && wait "$batond_pid" 2>/dev/null || true
  if [ $demo = 1 ]; then
    BATON_SUBSONIC_PORT=4540 BATON_SUBSONIC_ENV=$demo_env scripts/subsonic-server.sh stop >/dev/null 2>&1 || true
    if [ -n "$demo_config" ] && [ "$demo_config" != "$config" ]; then rm -f "$demo_config"; fi
  fi
}
trap cleanup EXIT
trap 'exit 0' INT TERM

if [ $demo = 1 ]; then
  echo "baton: demo mode (no music: section in $config): starting a local Subsonic server with a generated album"
  BATON_SUBSONIC_PORT=4540 BATON_SUBSONIC_ENV=$demo_env BATON_SUBSONIC_LIBRARY=demo scripts/subsonic-server.sh start
  password_file="$(sed -n 's/^password-file=//p' $demo_env)"
  # The same config plus a music section, next to it so its relative paths still resolve.
  demo_config="$(dirname "$config")/.demo-$(basename "$config")"
  cat "$config" - >"$demo_config" <<YAML

# Added by scripts/run.sh for the demo: the local Subsonic server it started.
music:
  subsonic:
    url: http://127.0.0.1:4540
    user: baton
    password-file: $password_file
    format: opus
    max-bitrate: 128
YAML
fi

ctl=".build/release/batonctl --url http://$api"
.build/release/batond --config "${demo_config:-$config}" &
batond_pid=$!
for _ in $(seq 1 100); do
  $ctl status >/dev/null 2>&1 && break
  kill -0 "$batond_pid" 2>/dev/null || { wait "$batond_pid"; exit 1; }
  sleep 0.1
done

cat <<TEXT

Baton runs on $config. In another terminal:
  web app        http://$api/
  ring the bell  .build/release/batonctl --url http://$api announce doorbell
                 (or: curl -X POST -H 'Content-Type: application/json' $api/api/v1/announce -d '{"sound": "doorbell"}')
  play music     .build/release/batonctl --url http://$api play --search "Miles Davis"   (with a music: server)
                 .build/release/batonctl --url http://$api play chime --loop               (a local sound)
  pause / resume .build/release/batonctl --url http://$api pause   (resume, next, previous, seek 1:15)
  watch events   .build/release/batonctl --url http://$api events --follow
Without a sound card the zones write out/kitchen.wav and out/patio.wav in real time;
Ctrl-C stops Baton and completes the files (then: aplay out/kitchen.wav).
TEXT

if [ $demo = 1 ]; then
  venv="${BATON_CACHE:-${HOME:-/root}/.cache/baton}/supysonic-venv"
  album="$("$venv/bin/python" scripts/subsonic/album_id.py http://127.0.0.1:4540 baton "$password_file" "Baton Demo")"
  echo
  echo "demo: playing the album \"Baton Demo\" on every zone…"
  $ctl play --album "$album"
  sleep 8
  echo "demo: ding-dong: the doorbell interrupts the music, which resumes where it was cut…"
  $ctl announce doorbell
  echo "demo: watch it in the web app, or: .build/release/batonctl --url http://$api status"
fi
wait "$batond_pid"
