#!/usr/bin/env bash
# Announcement latency, measured from what the zone played (not from Baton's log). Two modes:
#
#   scripts/measure-latency.sh [N]          the file mode (default 500 per trigger path; about 8 minutes)
#   scripts/measure-latency.sh --card [N]   the virtual sound card (default 200 per condition; about 6 minutes)
#
# File mode (scripts/bench/latency.py): a release batond plays looping music on one 44.1 kHz zone
# (ALSA file PCM, paced by the system clock); N announcements are triggered over HTTP and N over MQTT
# (a persistent `mosquitto_pub -l`), one every 0.45 s. The file's growth is sampled every 2 ms to map
# frames to time; each announcement's first sample is found by onset detection. Prints p50/p99/max of
# request → first announcement sample, and of last announcement sample → first resumed music sample.
# Needs: mosquitto and mosquitto-clients (scripts/install-deps.sh --test). RENDER_AHEAD=1 gives the
# zone `buffer: 120ms, render-ahead: true` (a clocked buffer the system clock plays into the file PCM).
# Both modes stop the batond (and mosquitto) they started and remove their temp dir whatever fails
# (an assert, a timeout, Ctrl-C, SIGTERM); KEEP=1 keeps the card mode's files.
#
# Card mode (scripts/bench/card_latency.py; issue 15): a release batond with one `clock: device` zone
# on the project's virtual sound card (Tests/Support/BatonTestCard, `type batontest`: it consumes at
# its rate from CLOCK_MONOTONIC, blocks when full, and records every frame it consumed and when):
# 48 kHz S16_LE stereo, batond's default period and buffer, 10 ms / 40 ms (480 / 1920 frames; the
# card grants exactly these), pointer granule one period (the card's default, like a DMA card).
# N announcements over HTTP on 127.0.0.1 with nothing else playing, one every 1.1–1.4 s (random), so
# that the zone has stopped its PCM before each (the idle stop: half a second of silence, then drain);
# then N while a looping local music sound plays (`music/play`), one every 0.45–0.55 s. Request time
# = CLOCK_MONOTONIC right before the request is written to an already connected socket. The
# announcement is a square wave with left = −right, never 0, over mono music (left = right), so its
# first frame is the first frame of the record where left ≠ right: an exact match, no threshold (idle,
# the script also checks that frame is exactly the sound's first). Its time is the card's timing
# sidecar: the period that consumed it ends at a nanosecond instant; the frame was taken (frames after
# it in that period) / rate earlier (exact: the card consumes at its rate within a period). Prints
# p50/p99/max of request → that instant, idle and with music, and of request → the end of its period
# (what a period-granule pointer reports, up to one period later), with the target: p99 ≤ period +
# buffer + 5 ms, and where the time goes. The card mode also builds the card's plugin (release) next to
# batond. BATOND_NICE=-10 runs batond at that nice value (an experiment: its SCHED_OTHER threads).
# CARD_BUFFER_MS=120 gives the card and the zone that buffer (48 kHz, 10 ms period); RENDER_AHEAD=1
# sets `render-ahead: true` on the zone (docs/CONFIG.md): `RENDER_AHEAD=1 CARD_BUFFER_MS=120
# scripts/measure-latency.sh --card 200`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=file
if [ "${1:-}" = "--card" ]; then mode=card; shift; fi
. scripts/bench/build-batond.sh
build_batond
bin="$batond"
if [ "$mode" = card ]; then
  n="${1:-200}"
  if ! nice -n 10 swift build -c release --product asound_module_pcm_batontest >/dev/null 2>&1; then
    echo "$(basename "$0"): building the virtual card's plugin failed (swift build -c release --product asound_module_pcm_batontest)" >&2
    exit 1
  fi
  card="$PWD/.build/release/libasound_module_pcm_batontest.so"
  echo "$(basename "$0") --card: release batond at commit $baton_commit; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); N=$n per condition"
  python3 scripts/bench/card_latency.py "$bin" "$card" "$n" ${CARD_BUFFER_MS:+48000 480 $((48 * CARD_BUFFER_MS))}
  echo "$(basename "$0") --card: done $(date -u +%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
n="${1:-500}"
echo "$(basename "$0"): release batond at commit $baton_commit; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
exec python3 scripts/bench/latency.py "$bin" "$n"
