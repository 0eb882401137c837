#!/usr/bin/env bash
# Announcement latency, measured from the zone's output file (not from Baton's log): a release
# batond plays looping music on one 44.1 kHz zone (ALSA file PCM, paced by the system clock); N
# announcements are triggered over HTTP and N over MQTT (a persistent `mosquitto_pub -l`), one every
# 0.45 s. The file's growth is sampled every 2 ms to map frames to time; each announcement's first
# sample is found by onset detection. Prints p50/p99/max of request → first announcement sample,
# and of last announcement sample → first resumed music sample.
#
#   scripts/measure-latency.sh [N]      (default 500 per trigger path; about 8 minutes)
#
# Needs: mosquitto and mosquitto-clients (scripts/install-deps.sh --test).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-500}"
bin="${BATOND:-.build/release/batond}"
[ -x "$bin" ] || swift build -c release --product batond >/dev/null
exec python3 scripts/bench/latency.py "$bin" "$n"
