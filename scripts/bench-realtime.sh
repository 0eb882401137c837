#!/usr/bin/env bash
# The whole daemon at its real operating point against other players (issue 15 §1): each plays the
# same 90 s Ogg Opus stream (48 kHz stereo, 150 kb/s, chords + pink noise: scripts/bench/make-stream.sh)
# from 127.0.0.1 at real time, resampled to 44.1 kHz S16 into a paced sink:
#
#   batond     one `clock: system` zone on an ALSA `null` PCM; the stream from a real Subsonic server
#              (Supysonic, scripts/subsonic-server.sh, on its own port) with `format: raw`; soxr-hq
#   MPD        `null` output, `sync "yes"`, `format "44100:16:2"`, resampler soxr "high"
#   mpv        `--ao=null` (paced), 44100 Hz s16
#   GStreamer  souphttpsrc ! oggdemux ! opusdec ! audioconvert ! audioresample ! S16 44.1k ! fakesink sync=true
#   batond with `period: 40ms, buffer: 160ms` (the default is 10 ms / 40 ms): what the period costs
#   batond idle with 1, 2 and 4 zones (nothing playing), and batond playing to 2 zones
#
# The peers get the same file over HTTP from scripts/bench/range_server.py (it answers Range, which
# souphttpsrc needs), as bench-pipelines.sh does. CPU = utime+stime of the whole process (all its
# threads, /proc/PID/stat) over SECONDS after a WARMUP; peak RSS = VmHWM. Every case is a fresh
# process; cases run round-robin, REPS rounds; medians and min–max, ratios with ties called ties.
# For batond, per thread: CPU and wake-ups per second from /proc/PID/task/*/schedstat, each thread
# by its name (batond names its threads: monitor, out:<pcm>, stream, fetch, …; gdb backtraces only
# for an older binary whose threads are all "batond").
# Also the cold start: exec → first 200 from GET /api/v1/status.
#
#   scripts/bench-realtime.sh [SECONDS]     measured window per case, default 30 (about 7 min per round)
#
# Environment: REPS (rounds, default 3), WARMUP (seconds, default 5), COLD_RUNS (cold starts per round
# and config, default 5), ONLY (comma-separated: a case's whole name, e.g. `batond` or `MPD`, picks that
# case; another word every case whose name contains it, e.g. `idle`; these cases run only when named:
# `batond SCHED_OTHER` — batond without CAP_SYS_NICE, so its output thread is not real-time —,
# `batond with CPUs kept awake` — beside a SCHED_IDLE busy loop per CPU: what an output wake-up
# costs, and what of it is a CPU coming out of idle —, `batond buffer 50ms` — two periods per
# output wake-up —, `batond idle listening` — two idle zones with an external source, the intercom
# and MQTT (a local mosquitto) configured —, `batond paused` — the first row's music paused before the
# warm-up: a zone whose only source is paused —, `batond idle snapcast` — one Snapcast zone on a snapserver
# started for it, one snapclient, nothing playing (snapserver's and snapclient's CPU among the other
# processes) —
# `batond ahead` — the first row with `buffer: 120ms, render-ahead: true` (batond's own buffer,
# played by the system clock into the `null` PCM) —,
# `batond card` and `batond card ahead` — the stream to a `clock: device` zone on the project's
# virtual sound card, at the default 10 ms / 40 ms and with `buffer: 120ms, render-ahead: true` —,
# `batond without the PulseAudio hook` — the first row with /etc/alsa/conf.d/99-pulse.conf (the
# `pulseaudio` package's, installed here for the tests) hidden in a mount namespace of batond's own:
# its ALSA configuration as on a speaker without PulseAudio —,
# and `batond external aplay` — aplay playing the stream, decoded to 48 kHz S16, through the `baton`
# ALSA plugin: what AirPlay or Spotify cost through batond; with BASELINE, each beside its baseline
# twin), BASELINE (a git revision: its
# release batond is built too, in a worktree under BATON_CACHE, and measured as the `batond` case
# and the `batond playing to 2 zones` case beside the tree's, round-robin, for a before/after in one run),
# MARKDOWN (also write the tables to this file), BATON_CACHE (default ~/.cache/baton: the stream and
# the Supysonic venv are kept there).
# Always builds the release batond it measures (nice'd; the package's build, scripts/release-flags.sh)
# and prints its commit. Installs what is missing (scripts/install-deps.sh --bench); the first
# Supysonic start needs PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
reps="${REPS:-3}"
warmup="${WARMUP:-5}"
stream_seconds=90
cache="${BATON_CACHE:-${HOME:-/root}/.cache/baton}"
say() { echo "bench-realtime: $*" >&2; }

if [ "$(python3 -c "print(int($warmup + $seconds + 10 > $stream_seconds))")" = 1 ]; then
  say "WARMUP + SECONDS must leave 10 s of the ${stream_seconds} s stream"; exit 2
fi

scripts/install-deps.sh --bench
. scripts/bench/build-batond.sh
. scripts/bench/private-subsonic.sh
build_batond
baseline_args=()
if [ -n "${BASELINE:-}" ]; then
  build_baseline_batond "$BASELINE" "$cache/baseline"
  baseline_args=(--baseline-batond "$baseline_batond" --baseline-label "$baseline_commit")
fi

work="$(mktemp -d /tmp/baton-bench-realtime.XXXXXX)"
chmod 755 "$work"
export BATON_SUBSONIC_ENV="$work/subsonic.env"
range_server=""
cleanup() {
  [ -n "$range_server" ] && kill "$range_server" 2>/dev/null
  scripts/subsonic-server.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The stream, and a library of just that file for Supysonic.
stream="$cache/bench/music-${stream_seconds}s.opus"
[ -s "$stream" ] || say "generating $stream"
scripts/bench/make-stream.sh "$stream_seconds" "$stream"
mkdir -p "$work/library/Bench" "$work/http"
cp "$stream" "$work/library/Bench/01 Bench Music.opus"
ln -s "$stream" "$work/http/music.opus"
# What aplay plays in the external-source case, and the plugin it plays through (the tree's, also for
# a BASELINE batond: the wire protocol has not changed), built like the daemon.
ffmpeg -v error -y -i "$stream" -ar 48000 -ac 2 -c:a pcm_s16le "$work/music.wav"
(. scripts/release-flags.sh && nice -n 10 swift build "${release_flags[@]}" --product asound_module_pcm_baton >/dev/null 2>&1) \
  || { say "the release build of the baton ALSA plugin failed"; exit 1; }
plugin="$PWD/.build/release/libasound_module_pcm_baton.so"
# The project's virtual sound card (Tests/Support/BatonTestCard), for the `batond card` cases.
(. scripts/release-flags.sh && nice -n 10 swift build "${release_flags[@]}" --product asound_module_pcm_batontest >/dev/null 2>&1) \
  || { say "the release build of the virtual sound card's plugin failed"; exit 1; }
card_plugin="$PWD/.build/release/libasound_module_pcm_batontest.so"
duration=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$stream")
bitrate=$(ffprobe -v error -show_entries format=bit_rate -of csv=p=0 "$stream")

# Supysonic on a port of its own (not the shared test server's), serving that library.
start_private_subsonic "$work/library"
song_id="$(cd scripts/subsonic && python3 - "$subsonic_url" "$subsonic_pw" <<'PY'
import sys
from api import call
songs = call(sys.argv[1], "baton", sys.argv[2], "search3", query="", songCount=10, albumCount=0,
             artistCount=0).get("searchResult3", {}).get("song", [])
if len(songs) != 1 or songs[0].get("suffix") != "opus":
    sys.exit(f"expected the one Opus song in the library, got {songs}")
print(songs[0]["id"])
PY
)"

# The peers' server: 127.0.0.1, answers Range.
port="$(free_port)"
python3 scripts/bench/range_server.py "$work/http" "$port" &
range_server=$!
url="http://127.0.0.1:$port/music.opus"
for _ in $(seq 100); do curl -fsI "$url" >/dev/null 2>&1 && break; sleep 0.05; done
# Both streams into files, each fetch checked and non-empty: two failed fetches would compare equal.
curl -fsS -o "$work/peers.opus" "$url" || { say "fetching $url failed (curl exit status $?)"; exit 1; }
curl -fsS -o "$work/subsonic.opus" "$subsonic_url/rest/stream.view?u=baton&p=$(cat "$subsonic_pw")&v=1.12.0&c=bench&id=$song_id&format=raw" \
  || { say "fetching song $song_id from $subsonic_url failed (curl exit status $?)"; exit 1; }
[ -s "$work/peers.opus" ] || { say "$url served nothing"; exit 1; }
cmp -s "$work/peers.opus" "$work/subsonic.opus" || { say "the two servers do not serve the same bytes"; exit 1; }
rm -f "$work/peers.opus" "$work/subsonic.opus"

say "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); stream ${duration} s, $((bitrate / 1000)) kb/s; $reps rounds of ${warmup} + ${seconds} s"
header="commit $baton_commit (release batond: swift build ${release_flags[*]}), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -m)
peers: $(mpd --version | head -n 1); $(mpv --version | head -n 1 | cut -d' ' -f1-2); $(gst-launch-1.0 --version | sed -n 2p)
stream: ${duration} s of 48 kHz stereo Ogg Opus, $((bitrate / 1000)) kb/s; batond from Supysonic $subsonic_url (format=raw, song $song_id), the peers from $url"
echo "$header"
python3 scripts/bench/realtime.py --batond "$batond" --url "$url" --subsonic-url "$subsonic_url" \
  --subsonic-password-file "$subsonic_pw" --song-id "$song_id" --sounds "$PWD/config/sounds" \
  --workdir "$work" --reps "$reps" --seconds "$seconds" --warmup "$warmup" --cold-runs "${COLD_RUNS:-5}" \
  --server-pids "$subsonic_pid,$range_server" ${ONLY:+--only "$ONLY"} ${MARKDOWN:+--markdown "$MARKDOWN"} \
  --plugin "$plugin" --external-wav "$work/music.wav" --card-plugin "$card_plugin" \
  "${baseline_args[@]}"

# Supysonic served the file as it is: nothing was transcoded.
if [ -n "$(find "$subsonic_data/cache" -type f -path '*transcodes*' 2>/dev/null)" ]; then
  say "Supysonic transcoded something: the batond rows did not stream the raw file"; exit 1
fi
echo
echo "Supysonic transcoded nothing (format=raw: the file as it is)."
envs="${REPS:+REPS=$REPS }${WARMUP:+WARMUP=$WARMUP }${COLD_RUNS:+COLD_RUNS=$COLD_RUNS }${ONLY:+ONLY=$ONLY }${BASELINE:+BASELINE=$BASELINE }"
echo "command: ${envs}scripts/bench-realtime.sh $seconds; load $(cut -d' ' -f1-3 /proc/loadavg) at the end; commit $baton_commit"
