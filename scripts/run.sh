#!/usr/bin/env bash
# Installs whatever is missing, builds Baton (release) and runs the daemon on config/baton.yaml
# (or the config given as the first argument). With no sound card, the default config's zones
# write WAV files into ./out, paced in real time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release --product batond
config="${1:-config/baton.yaml}"
cat <<EOF

Baton is starting on $config. In another terminal:
  status page    http://127.0.0.1:8470/
  ring the bell  curl -X POST localhost:8470/api/v1/announce -d '{"sound": "doorbell"}'
  play music     curl -X POST localhost:8470/api/v1/music/play -d '{"sound": "chime", "loop": true}'
  watch events   curl -N localhost:8470/api/v1/events
Without a sound card the zones write out/kitchen.wav and out/patio.wav in real time;
Ctrl-C stops Baton and completes the files (then: aplay out/kitchen.wav).

EOF
exec .build/release/batond --config "$config"
