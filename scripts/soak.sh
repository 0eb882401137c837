#!/usr/bin/env bash
# Soak test of a release batond: 2 zones, looping music, an announcement every 10 s, an RTP call
# every 2 minutes, a config reload every 30 s; checks xruns, RSS growth, began/ended pairs and that
# the reported state matches the output files throughout. See scripts/bench/soak.py.
#
#   scripts/soak.sh [MINUTES]     (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
. scripts/bench/build-batond.sh
build_batond
bin="$batond"
echo "$(basename "$0"): release batond at commit $baton_commit; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
exec python3 scripts/bench/soak.py "$bin" "$minutes"
