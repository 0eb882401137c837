#!/usr/bin/env python3
"""Synthesises the announcement sounds shipped in config/sounds (run once; the outputs are committed).

doorbell.wav: a two-note "ding-dong" (E5 then C5, 659.25 Hz and 523.25 Hz) with a bell-like decay,
48 kHz mono 16-bit. chime.wav: a three-note rising chime, 44.1 kHz stereo 24-bit. chime.opus is made
from chime.wav with opusenc (opus-tools) when it is installed.
"""
import math, struct, subprocess, sys, wave, os

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "config", "sounds")

def bell(freq, t, start):
    if t < start:
        return 0.0
    u = t - start
    attack = min(1.0, u / 0.005)
    return attack * math.exp(-u * 2.2) * (math.sin(2 * math.pi * freq * u)
                                          + 0.35 * math.sin(2 * math.pi * 2 * freq * u) * math.exp(-u * 3))

def write(path, rate, channels, width, seconds, notes, level):
    n = int(rate * seconds)
    frames = bytearray()
    peak = (1 << (8 * width - 1)) - 1
    for i in range(n):
        t = i / rate
        v = sum(bell(f, t, s) for f, s in notes) * level
        # Fade the last 50 ms so the file ends in silence.
        v *= min(1.0, (seconds - t) / 0.05)
        s = max(-peak, min(peak, int(round(v * peak))))
        frames += s.to_bytes(width, "little", signed=True) * channels
    with wave.open(path, "wb") as w:
        w.setnchannels(channels); w.setsampwidth(width); w.setframerate(rate)
        w.writeframes(bytes(frames))

write(os.path.join(here, "doorbell.wav"), 48000, 1, 2, 2.0, [(659.25, 0.0), (523.25, 0.6)], 0.45)
write(os.path.join(here, "chime.wav"), 44100, 2, 3, 1.5, [(523.25, 0.0), (659.25, 0.25), (783.99, 0.5)], 0.3)
try:
    subprocess.run(["opusenc", "--quiet", "--bitrate", "96", os.path.join(here, "chime.wav"),
                    os.path.join(here, "chime.opus")], check=True)
except FileNotFoundError:
    print("opusenc not found (apt-get install opus-tools): chime.opus not made", file=sys.stderr)
