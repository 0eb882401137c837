#!/usr/bin/env bash
# The benchmarks' music stream: SECONDS of 48 kHz stereo Ogg Opus at 150 kb/s; chords with vibrato,
# tremolo and steps, and pink noise decorrelated between the channels (so the encoder and decoder
# work as on music). Tagged (artist "Baton Bench", album "Bench", title "Bench Music Ns") so a
# Subsonic server can index it. Written atomically to OUT; kept if OUT exists.
#
#   scripts/bench/make-stream.sh SECONDS OUT
set -euo pipefail
seconds="$1" out="$2"
[ -s "$out" ] && exit 0
mkdir -p "$(dirname "$out")"
left='0.22*sin(2*PI*220*t)*(0.6+0.4*sin(2*PI*0.5*t))+0.12*sin(2*PI*330*t+2*sin(2*PI*5*t))+0.08*sin(2*PI*(440+110*floor(mod(t\,4)))*t)'
right='0.22*sin(2*PI*277.2*t)+0.12*sin(2*PI*415.3*t)*(0.5+0.5*sin(2*PI*0.3*t))+0.08*sin(2*PI*(554.4+55*floor(mod(t\,3)))*t)'
ffmpeg -nostdin -v error -y -filter_complex \
    "aevalsrc=exprs='$left|$right':s=48000:d=$seconds[t];anoisesrc=c=pink:a=0.07:r=48000:seed=1:d=$seconds[nl];anoisesrc=c=pink:a=0.07:r=48000:seed=2:d=$seconds[nr];[nl][nr]join=inputs=2:channel_layout=stereo[n];[t][n]amix=inputs=2:normalize=0" \
    -c:a libopus -b:a 150k -ar 48000 \
    -metadata artist="Baton Bench" -metadata album_artist="Baton Bench" -metadata album=Bench \
    -metadata title="Bench Music ${seconds}s" -metadata track=1 "$out.tmp.opus"
mv "$out.tmp.opus" "$out"
