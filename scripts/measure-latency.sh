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
. scripts/bench/build-batond.sh
build_batond
bin="$batond"
echo "$(basename "$0"): release batond at commit $baton_commit; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
exec python3 scripts/bench/latency.py "$bin" "$n"
