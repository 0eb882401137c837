#!/usr/bin/env bash
# scripts/bench-external.sh [SECONDS]: the figures of issue 13 §4 for the `baton` PCM (a benchmark,
# not a test; docs/EXTERNAL.md "Figures" has the numbers and how they were made).
#
# One zone on the virtual card (`type batontest`, 48 kHz S16 stereo, period 480, buffer 1920,
# clock: device): it consumes in real time from CLOCK_MONOTONIC and records each frame and when.
#  1. CPU per audio second: batond idle; batond playing a 44.1 kHz stereo WAV itself (music/play);
#     aplay writing the same file to baton_x, with batond's share (both from /proc/PID/stat).
#  2. Delay: baton-delay-probe writes level steps through baton_x; before each step it reads
#     snd_pcm_delay. The step should be heard DELAY frames later; the card's record and timing say
#     when it was. The error is reported in ms and in the program's periods.
# Builds what it measures first (nice'd, with scripts/release-flags.sh: batond through
# scripts/bench/build-batond.sh, then both ALSA plugins) and prints the commit they were built from.
set -euo pipefail
seconds=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/bench/build-batond.sh
build_batond
bin=$root/.build/release
build_log=$(mktemp)
for product in asound_module_pcm_baton asound_module_pcm_batontest; do
  if ! (. scripts/release-flags.sh && nice -n 10 swift build "${release_flags[@]}" --product "$product") >"$build_log" 2>&1; then
    tail -n 40 "$build_log" >&2; rm -f "$build_log"
    echo "bench-external: the release build of $product failed" >&2; exit 1
  fi
done
rm -f "$build_log"
echo "bench-external: release batond and plugins at commit $baton_commit; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
dir=$(mktemp -d /tmp/baton-bench-external.XXXXXX)
port=$((20000 + RANDOM % 30000))
hz=$(getconf CLK_TCK)
batond_pid=""
cleanup() {
  if [ -n "$batond_pid" ]; then kill "$batond_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT && echo "bench-external: files in $dir"

cc -O2 -o "$dir/probe" "$root/scripts/bench/baton-delay-probe.c" -lasound
mkdir -p "$dir/sounds"
sox -n -r 44100 -c 2 -b 16 "$dir/sounds/music.wav" synth "$seconds" sine 440 sine 660 vol 0.4
cat > "$dir/alsa.conf" <<EOC
</usr/share/alsa/alsa.conf>
pcm_type.batontest { lib "$bin/libasound_module_pcm_batontest.so" }
pcm_type.baton { lib "$bin/libasound_module_pcm_baton.so" }
pcm.card { type batontest rate 48000 format S16_LE channels 2 period 480 buffer 1920 record "$dir/card.raw" }
pcm.baton_x { type baton source "x" socket "$dir/sources.sock" }
EOC
cat > "$dir/baton.yaml" <<EOC
api: {listen: 127.0.0.1:$port}
zones:
  a: {pcm: card, rate: 48000, channels: 2, format: S16_LE, period: 10ms, buffer: 40ms, clock: device}
sounds: $dir/sounds
alsa-config: $dir/alsa.conf
external-sources:
  socket: $dir/sources.sock
  x: {class: music, when-interrupted: hold}
EOC
"$bin/batond" --config "$dir/baton.yaml" > "$dir/batond.log" 2>&1 &
batond_pid=$!
for _ in $(seq 100); do grep -q "control API on" "$dir/batond.log" && break; sleep 0.1; done
grep -q "control API on" "$dir/batond.log" \
  || { echo "bench-external: batond did not start within 10 s: $(tail -n 5 "$dir/batond.log")" >&2; exit 1; }
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
share() { awk -v t="$1" -v s="$2" -v hz="$hz" 'BEGIN { printf "%.2f %%", 100 * t / hz / s }'; }

sleep 1
c0=$(cpu "$batond_pid"); sleep 5; c1=$(cpu "$batond_pid")
echo "batond idle:                         $(share $((c1 - c0)) 5) of one core"

c0=$(cpu "$batond_pid")
curl -s -X POST -H 'Content-Type: application/json' -d '{"sound": "music"}' "http://127.0.0.1:$port/api/v1/music/play" > /dev/null
sleep $((seconds + 1))
c1=$(cpu "$batond_pid")
echo "batond playing the file itself:      $(share $((c1 - c0)) "$seconds") per audio second (incl. idle)"

c0=$(cpu "$batond_pid")
ALSA_CONFIG_PATH=$dir/alsa.conf /usr/bin/time -f "%U %S" -o "$dir/aplay.time" aplay -q -D baton_x "$dir/sounds/music.wav"
c1=$(cpu "$batond_pid")
aplay_s=$(awk '{print $1 + $2}' "$dir/aplay.time")
echo "aplay through baton_x: batond        $(share $((c1 - c0)) "$seconds") per audio second (incl. idle)"
echo "                       aplay         $(awk -v a="$aplay_s" -v s="$seconds" 'BEGIN { printf "%.2f %%", 100 * a / s }') per audio second"

sleep 1
offset=$(stat -c %s "$dir/card.raw")
before=$(grep -c " period" "$dir/card.raw.timing" || true)
ALSA_CONFIG_PATH=$dir/alsa.conf "$dir/probe" baton_x 44100 1024 4096 > "$dir/probe.out"
sleep 0.5
python3 - "$dir" "$offset" <<'EOP'
import sys, struct
d, offset = sys.argv[1], int(sys.argv[2])
raw = open(f"{d}/card.raw", "rb").read()
left = struct.unpack(f"<{len(raw)//2}h", raw)[0::2]
# (ns, cumulative frames) at the end of each period the card took
periods = [(int(a), int(b)) for a, b, c, *_ in (l.split() for l in open(f"{d}/card.raw.timing")) if c == "period"]
def heard(frame):  # the instant the card took `frame` (its period's end, less the frames after it)
    for t, f in periods:
        if f > frame: return t - (f - 1 - frame) * 1e9 / 48000
probe = [l.split() for l in open(f"{d}/probe.out")]
rate, period = int(probe[0][1]), int(probe[0][2])
errors, at, last = [], offset // 4, 0
for _, ns, delay, written, level in (p for p in probe if p[0] == "step"):
    level = int(level)
    while at < len(left) and abs(left[at] - last) < 8000: at += 1   # the step's half-way crossing
    if at >= len(left): break
    last = level
    errors.append((heard(at) - (int(ns) + int(delay) * 1e9 / rate)) / 1e6)
    at += 1   # past the crossing (it may sit exactly half-way)
print("delay error (heard - promised by snd_pcm_delay), ms:", " ".join(f"{e:+.2f}" for e in errors))
print(f"  mean {sum(errors)/len(errors):+.2f} ms, worst {max(errors, key=abs):+.2f} ms; "
      f"one program period = {period * 1000 / rate:.1f} ms ({period} frames at {rate} Hz)")
EOP
