#!/usr/bin/env bash
# Side-by-side pipeline benchmark (issue 7 point 1) — a pipeline harness, not the daemon (for the
# whole daemon at real time see bench-realtime.sh): the same Ogg Opus stream from the same local
# HTTP server, played to the end through Baton (baton-bench --pipeline: the daemon's decode →
# resample → mix → S16 → snd_pcm_writei path, one zone, 48000 → 44100), the minimal C pipeline
# (Sources/Programs/BenchFloor/PipelineFloor.c), GStreamer, ffmpeg, mpv and MPD, all to the same ALSA PCM
# (`null`, which never blocks, so every pipeline runs as fast as it can), gain 0.8, 44100 Hz S16.
# Reports CPU seconds per audio second, × real time, peak RSS and Baton's ratio to each.
#
#   scripts/bench-pipelines.sh [SECONDS]     audio length, default 600 (20 is a quick run)
#
# Environment: REPS (runs per pipeline, default 5; medians are reported), DEVICE (ALSA PCM, default
# null), BATON_CACHE (default ~/.cache/baton: the generated stream is kept there), ONLY (run only
# the peer rows whose name contains it, plus Baton's), MARKDOWN (also write the table there).
# Installs what is missing with apt-get: gstreamer1.0-tools, -plugins-base, -plugins-good
# (souphttpsrc), gstreamer1.0-alsa (alsasink), mpv, mpd, mpc, ffmpeg; needs cc and the -dev
# packages the project builds with (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
reps="${REPS:-5}"
device="${DEVICE:-null}"
cache="${BATON_CACHE:-${HOME:-/root}/.cache/baton}/bench"
say() { echo "bench-pipelines: $*" >&2; }

# Tools.
missing=()
for pair in /usr/bin/time:time gst-launch-1.0:gstreamer1.0-tools ffmpeg:ffmpeg mpv:mpv mpd:mpd mpc:mpc cc:gcc; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
for pair in souphttpsrc:gstreamer1.0-plugins-good alsasink:gstreamer1.0-alsa audioresample:gstreamer1.0-plugins-base \
            opusdec:gstreamer1.0-plugins-base; do
    command -v gst-inspect-1.0 >/dev/null && gst-inspect-1.0 "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    say "installing ${missing[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Builds: baton-bench (release, the package's options: scripts/release-flags.sh) and the C floor as a
# standalone program (no Swift runtime in its RSS).
. scripts/release-flags.sh
swift build "${release_flags[@]}" --product baton-bench >/dev/null
baton="$PWD/.build/release/baton-bench"
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck disable=SC2046
cc -O2 -DBATON_FLOOR_MAIN -I Sources/Programs/BenchFloor/include Sources/Programs/BenchFloor/PipelineFloor.c -o "$work/floor" \
    $(pkg-config --libs opusfile opus soxr samplerate alsa) -lm

# The stream: 48 kHz stereo Ogg Opus at 150 kb/s, chords and pink noise (scripts/bench/make-stream.sh).
mkdir -p "$cache"
stream="$cache/music-${seconds}s.opus"
[ -s "$stream" ] || say "generating $stream"
scripts/bench/make-stream.sh "$seconds" "$stream"
duration=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$stream")
bitrate=$(ffprobe -v error -show_entries format=bit_rate -of csv=p=0 "$stream")
ln -s "$stream" "$work/music.opus"

# The server: 127.0.0.1, answers Range (souphttpsrc needs it).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 scripts/bench/range_server.py "$work" "$port" &
server=$!
url="http://127.0.0.1:$port/music.opus"
for _ in $(seq 100); do curl -fsI "$url" >/dev/null 2>&1 && break; sleep 0.05; done
curl -fsSI "$url" >/dev/null || { say "the stream server does not answer on $url"; exit 1; }

say "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); stream ${duration} s, $((bitrate / 1000)) kb/s; $reps runs each"
# Warm-up (page cache, GStreamer's plugin registry), not measured.
python3 scripts/bench/run_pipelines.py --url "$url" --audio-seconds "$duration" --reps 1 --baton "$baton" \
    --floor "$work/floor" --device "$device" --workdir "$work" ${ONLY:+--only "$ONLY"} >/dev/null 2>&1 \
    || say "warm-up failed (the measured run will say why)"
python3 scripts/bench/run_pipelines.py --url "$url" --audio-seconds "$duration" --reps "$reps" --baton "$baton" \
    --floor "$work/floor" --device "$device" --workdir "$work" ${ONLY:+--only "$ONLY"} ${MARKDOWN:+--markdown "$MARKDOWN"}
echo
echo "command: scripts/bench-pipelines.sh $seconds (REPS=$reps), $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD)"
echo "Baton's stages (one run, thread CPU on the streamer thread; soxr-hq):"
"$baton" --pipeline "$url" --device "$device" --stages | sed -n '/by stage/,$p'
