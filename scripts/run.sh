#!/usr/bin/env bash
# Installs whatever is missing, builds Baton (release) and runs the daemon on config/baton.yaml
# (or the config given as the first argument). With no sound card, the default config's zones
# write WAV files into ./out, paced in real time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release --product batond 2>&1 | grep -v '^\[' || true
exec .build/release/batond --config "${1:-config/baton.yaml}"
