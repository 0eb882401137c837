#!/usr/bin/env bash
# Soak test of a release batond: 2 zones, looping music, an announcement every 10 s, an RTP call
# every 2 minutes, a config reload every 30 s; checks xruns, RSS growth, began/ended pairs and that
# the reported state matches the output files throughout. See scripts/bench/soak.py.
#
#   scripts/soak.sh [MINUTES]     (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
bin="${BATOND:-.build/release/batond}"
[ -x "$bin" ] || swift build -c release --product batond >/dev/null
exec python3 scripts/bench/soak.py "$bin" "$minutes"
