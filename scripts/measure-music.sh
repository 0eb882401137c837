#!/usr/bin/env bash
# Measures music figures with a release batond and the local test Subsonic server:
# CPU seconds per audio second of one Ogg Opus stream (48 kHz → one 44.1 kHz zone, soxr-hq),
# peak RSS, and the time from POST /api/v1/music/play to the first audible frame (read from the
# zone's output file, not from the daemon's log). Needs scripts/subsonic-server.sh start first.
#
#   scripts/measure-music.sh [SECONDS [RUNS]]   SECONDS measured per run (1–60, default 20),
#                                               RUNS fresh daemons (1–9, default 3): median, min–max
#
# Each run starts batond on a free port, plays "Long Tone 330" (72 s, served as Opus), waits 3 s,
# then measures SECONDS. The CPU time is divided by the music the zone actually played in that window
# (audible frames in its output file between the two framesPlayed readings), not by SECONDS: time
# after the music ended would be counted as idle audio otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
me="$(basename "$0")"
seconds="${1:-20}"
runs="${2:-3}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ] || [ "$seconds" -gt 60 ]; then
  echo "$me: SECONDS must be 1–60 (the track lasts 72 s, measuring starts 3 s in), got '$seconds'" >&2; exit 2
fi
if ! [[ "$runs" =~ ^[1-9]$ ]]; then echo "$me: RUNS must be 1–9, got '$runs'" >&2; exit 2; fi
env_file="${BATON_SUBSONIC_ENV:-/tmp/baton-subsonic.env}"
[ -r "$env_file" ] || { echo "$me: no Subsonic server env file $env_file: run scripts/subsonic-server.sh start first" >&2; exit 1; }
url=$(sed -n 's/^url=//p' "$env_file"); pw=$(sed -n 's/^password-file=//p' "$env_file")
if [ -z "$url" ] || [ ! -r "$pw" ]; then echo "$me: $env_file names no url or no readable password-file" >&2; exit 1; fi
command -v curl >/dev/null || { echo "$me: curl is missing: run scripts/install-deps.sh --bench" >&2; exit 1; }
. scripts/bench/build-batond.sh
build_batond
bin="$batond"
echo "$me: release batond at commit $baton_commit; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $runs × $seconds s"

dir=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

# `status_frames`: the zone's framesPlayed now.
status_frames() {
  curl -fsS "$api/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["zones"][0]["framesPlayed"])'
}
# `sample`: batond's CPU ticks (user + system), the zone's framesPlayed and the monotonic clock (ms),
# read a few ms apart in one process so that the CPU, frame and wall-clock windows match.
sample() {
  python3 - "$pid" "$api/status" <<'PY'
import json, sys, time, urllib.request
pid, url = sys.argv[1], sys.argv[2]
fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
ticks = int(fields[11]) + int(fields[12])
with urllib.request.urlopen(url, timeout=5) as r:
    frames = json.load(r)["zones"][0]["framesPlayed"]
print(ticks, frames, int(time.monotonic() * 1000))
PY
}

for run in $(seq 1 "$runs"); do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -f "$dir/kitchen.raw"
  cat > "$dir/alsa.conf" <<ALSA
</usr/share/alsa/alsa.conf>
pcm.m_null { type null }
pcm.m_kitchen { type file slave.pcm "m_null" file "$dir/kitchen.raw" format "raw" }
ALSA
  cat > "$dir/baton.yaml" <<YAML
api: {listen: 127.0.0.1:$port}
zones:
  kitchen: {pcm: m_kitchen, rate: 44100, channels: 2, clock: system}
alsa-config: $dir/alsa.conf
sounds: $PWD/config/sounds
music:
  subsonic: {url: $url, user: baton, password-file: $pw, format: opus, max-bitrate: 128}
YAML
  "$bin" --config "$dir/baton.yaml" 2>"$dir/log" &
  pid=$!
  api=http://127.0.0.1:$port/api/v1
  for _ in $(seq 100); do curl -fs "$api/status" >/dev/null && break; sleep 0.05; done
  kill -0 "$pid" 2>/dev/null || { echo "$me: batond exited at start: $(tail -n 5 "$dir/log")" >&2; exit 1; }
  sleep 1
  before=$(status_frames)
  curl -fsS -X POST -H 'Content-Type: application/json' "$api/music/play" \
    -d '{"search": "Long Tone 330", "zones": ["kitchen"]}' >/dev/null \
    || { echo "$me: music/play of \"Long Tone 330\" failed (is $env_file the test library?)" >&2; exit 1; }
  sleep 3
  read -r t0 f0 w0 < <(sample)
  sleep "$seconds"
  read -r t1 f1 w1 < <(sample)
  rss=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  python3 - "$dir/kitchen.raw" "$before" "$f0" "$f1" "$t0" "$t1" "$w0" "$w1" "$rss" >>"$dir/runs" <<'PY' || exit 1
import sys, array, os
path = sys.argv[1]
before, f0, f1, t0, t1, w0, w1, rss = (int(x) for x in sys.argv[2:])
hz = os.sysconf('SC_CLK_TCK')
a = array.array('h'); a.frombytes(open(path, 'rb').read())
left = a[0::2]
def audible(i): return abs(left[i]) > 30
onset = next((i for i in range(before, len(left)) if audible(i)), None)
if onset is None:
    sys.exit(f"measure-music.sh: no audible frame in {path} after the request: did the music play?")
end = min(f1, len(left))
first = next((i for i in range(f0, end) if audible(i)), None)
last = next((i for i in range(end - 1, f0 - 1, -1) if audible(i)), None)
if first is None:
    sys.exit(f"measure-music.sh: no music in the measured window (frames {f0}–{f1}): did the track stall?")
audio = (last - first + 1) / 44100
# The zone stops rendering some time after the music ends: the wall clock, not framesPlayed, is the window.
window = (w1 - w0) / 1000
if audio < 0.9 * window:
    sys.exit(f"measure-music.sh: the music covered only {audio:.1f} s of the {window:.1f} s window: the track ended or stalled")
# onset ms, CPU s per audio s, audio s, peak RSS MiB, window s
print(f"{(onset - before) / 44.1:.0f} {(t1 - t0) / hz / audio:.5f} {audio:.2f} {rss / 1024:.1f} {window:.2f}")
PY
  read -r onset cpu audio rss_mib window < <(tail -n 1 "$dir/runs")
  echo "run $run: first audible frame $onset ms after music/play; $cpu CPU s per audio s over $audio s of music (window $window s); peak RSS $rss_mib MiB"
done

python3 - "$dir/runs" "$seconds" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def col(i): return [float(r[i]) for r in rows]
def fig(v, fmt): return f"{fmt.format(statistics.median(v))} (min–max {fmt.format(min(v))}–{fmt.format(max(v))}, {len(v)} runs)"
print(f"music/play → first audible frame: {fig(col(0), '{:.0f}')} ms")
print(f"CPU per audio second (one Opus stream → 44.1 kHz zone, whole daemon, {sys.argv[2]} s each): {fig(col(1), '{:.4f}')} s/s")
print(f"peak RSS of batond: {fig(col(3), '{:.1f}')} MiB")
PY
