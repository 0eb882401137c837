#!/usr/bin/env bash
# Measures music figures with a release batond and the local test Subsonic server:
# CPU seconds per audio second of one Ogg Opus stream (48 kHz → one 44.1 kHz zone, soxr-hq),
# peak RSS, and the time from POST /api/v1/music/play to the first audible frame (read from the
# zone's output file, not from the daemon's log). Needs scripts/subsonic-server.sh start first.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
. scripts/bench/build-batond.sh
build_batond
bin="$batond"
echo "$(basename "$0"): release batond at commit $baton_commit; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
env_file="${BATON_SUBSONIC_ENV:-/tmp/baton-subsonic.env}"
url=$(grep '^url=' "$env_file" | cut -d= -f2-); pw=$(grep '^password-file=' "$env_file" | cut -d= -f2-)
dir=$(mktemp -d); port=8479
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
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
api=http://127.0.0.1:$port/api/v1
for _ in $(seq 100); do curl -fs "$api/status" >/dev/null && break; sleep 0.05; done
sleep 1
before=$(curl -fs "$api/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["zones"][0]["framesPlayed"])')
curl -fs -X POST -H 'Content-Type: application/json' "$api/music/play" -d '{"search": "Tone 440", "zones": ["kitchen"]}' >/dev/null
sleep 3
t0=$(awk '{print $14+$15}' /proc/$pid/stat)
sleep "$seconds"
t1=$(awk '{print $14+$15}' /proc/$pid/stat)
rss=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
kill -TERM $pid; wait $pid 2>/dev/null || true
python3 - "$dir/kitchen.raw" "$before" "$t0" "$t1" "$seconds" "$rss" <<'PY'
import sys, array, os
path, before, t0, t1, secs, rss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
hz = os.sysconf('SC_CLK_TCK')
a = array.array('h'); a.frombytes(open(path, 'rb').read())
left = a[0::2]
onset = next(i for i in range(before, len(left)) if abs(left[i]) > 30)
print(f"music/play → first audible frame: {(onset - before) / 44.1:.0f} ms (frame {onset - before} after the request)")
print(f"CPU per audio second (one Opus stream → 44.1 kHz zone, whole daemon): {(t1 - t0) / hz / secs:.4f} s/s over {secs:.0f} s")
print(f"peak RSS of batond: {rss / 1024:.1f} MiB")
PY
