#!/usr/bin/env python3
"""Runs every pipeline of scripts/bench-pipelines.sh on one Ogg Opus URL, REPS times round-robin,
and prints the medians: CPU seconds per audio second (user + sys of the whole process, all its
threads, from exec to exit, measured by GNU time (wait4)) and peak RSS (ru_maxrss of the same process).

    run_pipelines.py --url URL --audio-seconds S --reps N --baton BIN --floor BIN --workdir DIR [--markdown FILE]
"""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

GAIN = 0.8
# mpv's --volume is cubic (gain = (v/100)^3): 92.83 gives 0.8.
MPV_VOLUME = round(100 * GAIN ** (1 / 3), 2)
# MPD's software mixer maps v to (e^(v/25) - 1) / (e^4 - 1): 95 gives 0.815 (94 gives 0.78).
MPD_VOLUME = 95


def pipelines(url, baton, floor, device):
    caps = "audio/x-raw,rate=44100,format=S16LE,channels=2"
    gst = ["gst-launch-1.0", "-q", "souphttpsrc", f"location={url}", "!", "oggdemux", "!", "opusdec", "!",
           "audioconvert", "!", "volume", f"volume={GAIN}", "!", "audioresample", "!", caps, "!"]
    # (name, resampler, the Baton row it is compared with, argv or a runner)
    rows = []
    for kind in ("soxr-hq", "soxr-vhq", "src-medium"):
        rows.append((f"Baton (baton-bench --pipeline)", kind, None,
                     [baton, "--pipeline", url, "--resampler", kind, "--device", device, "--volume", str(GAIN)]))
    for kind in ("soxr-hq", "soxr-vhq", "src-medium"):
        rows.append(("minimal C (opusfile → resampler → S16 → writei)", kind, kind,
                     [floor, url, kind, device, str(GAIN)]))
    rows += [
        ("GStreamer 1.22 → fakesink", "audioresample q4 (S16)", "soxr-hq",
         gst + ["fakesink", "sync=false"]),
        ("GStreamer 1.22 → alsasink", "audioresample q4 (S16)", "soxr-hq",
         gst + ["alsasink", f"device={device}", "sync=false"]),
        ("ffmpeg 5.1", "swr default", "soxr-hq",
         ["ffmpeg", "-nostdin", "-v", "error", "-i", url, "-af", f"volume={GAIN},aresample=44100",
          "-c:a", "pcm_s16le", "-f", "alsa", device]),
        ("ffmpeg 5.1", "soxr (HQ)", "soxr-hq",
         ["ffmpeg", "-nostdin", "-v", "error", "-i", url, "-af", f"volume={GAIN},aresample=44100:resampler=soxr",
          "-c:a", "pcm_s16le", "-f", "alsa", device]),
        ("mpv 0.35", "swr default", "soxr-hq",
         ["mpv", "--no-config", "--really-quiet", "--no-video", "--ao=alsa", f"--audio-device=alsa/{device}",
          "--audio-samplerate=44100", "--audio-format=s16", f"--volume={MPV_VOLUME}", url]),
        ("MPD 0.23 (+ mpc)", "soxr VHQ", "soxr-vhq", "mpd"),
    ]
    return rows


# GNU time runs each pipeline and reports the wait4() figures of its child. Not Python's own wait4:
# a child forked from Python starts with Python's resident set, and exec() keeps that as the floor of
# ru_maxrss (it records the old address space's high-water mark), so every small program would show
# Python's ≈ 16 MiB. GNU time is a small C program: its floor is ≈ 2 MiB, below every pipeline here.
TIME = ["/usr/bin/time", "-f", "%U %S %M"]


class Usage:
    def __init__(self, path):
        with open(path) as f:
            user, system, rss_kib = f.read().split()[-3:]
        self.cpu = float(user) + float(system)
        self.rss_mib = int(rss_kib) / 1024


def run_command(argv, workdir, log):
    out = os.path.join(workdir, "time.out")
    start = time.monotonic()
    with open(log, "wb") as err:
        rc = subprocess.run(TIME + ["-o", out] + argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err).returncode
    wall = time.monotonic() - start
    if rc != 0:
        sys.exit(f"run_pipelines: {' '.join(argv)} failed ({rc}); see {log}")
    return Usage(out), wall


def mpd_status(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        f = s.makefile("rwb")
        f.readline()
        f.write(b"status\n")
        f.flush()
        state = {}
        for line in f:
            line = line.decode().strip()
            if line == "OK" or line.startswith("ACK"):
                break
            k, _, v = line.partition(": ")
            state[k] = v
        f.write(b"close\n")
        f.flush()
        return state


def run_mpd(url, workdir, device, log):
    """mpd --no-daemon with an alsa output on `device` (44100:16:2, software mixer, soxr very high);
    mpc sets the volume, adds the URL and plays; the run ends when MPD reports `stop`, then MPD gets
    SIGTERM. CPU and RSS are MPD's, from exec to exit (start-up and idle included, as for the rest)."""
    d = os.path.join(workdir, "mpd")
    os.makedirs(os.path.join(d, "music"), exist_ok=True)
    os.makedirs(os.path.join(d, "playlists"), exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = os.path.join(d, "mpd.conf")
    with open(conf, "w") as f:
        f.write(f"""music_directory "{d}/music"
playlist_directory "{d}/playlists"
db_file "{d}/db"
log_file "{d}/log"
bind_to_address "127.0.0.1"
port "{port}"
auto_update "no"
zeroconf_enabled "no"
resampler {{
  plugin "soxr"
  quality "very high"
}}
input {{
  plugin "curl"
}}
audio_output {{
  type "alsa"
  name "bench"
  device "{device}"
  format "44100:16:2"
  mixer_type "software"
}}
""")
    out = os.path.join(workdir, "time.out")
    start = time.monotonic()
    with open(log, "wb") as err:
        proc = subprocess.Popen(TIME + ["-o", out, "mpd", "--no-daemon", conf], stdin=subprocess.DEVNULL,
                                stdout=err, stderr=err)
        env = dict(os.environ, MPD_HOST="127.0.0.1", MPD_PORT=str(port))
        for _ in range(500):
            try:
                mpd_status(port)
                break
            except OSError:
                time.sleep(0.01)
        for cmd in (["volume", str(MPD_VOLUME)], ["add", url], ["play"]):
            subprocess.run(["mpc", "-q"] + cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        while True:
            st = mpd_status(port)
            if st.get("state") == "stop":
                break
            time.sleep(0.02)
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            mpd = int(f.read().split()[0])
        os.kill(mpd, signal.SIGTERM)
        proc.wait()
    wall = time.monotonic() - start
    if "error" in st:
        sys.exit(f"run_pipelines: MPD: {st['error']}")
    return Usage(out), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--audio-seconds", type=float, required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--baton", required=True)
    ap.add_argument("--floor", required=True)
    ap.add_argument("--device", default="null")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--markdown")
    ap.add_argument("--only", help="run only rows whose name contains this")
    a = ap.parse_args()

    rows = pipelines(a.url, a.baton, a.floor, a.device)
    if a.only:
        rows = [r for r in rows if a.only.lower() in r[0].lower() or r[0].startswith("Baton")]
    samples = {i: [] for i in range(len(rows))}
    log = os.path.join(a.workdir, "pipeline.log")
    for rep in range(a.reps):
        for i, (name, res, _, cmd) in enumerate(rows):
            if cmd == "mpd":
                u, wall = run_mpd(a.url, a.workdir, a.device, log)
            else:
                u, wall = run_command(cmd, a.workdir, log)
            samples[i].append((u.cpu, u.rss_mib, wall))
            print(f"  rep {rep + 1}/{a.reps}  {name} [{res}]: {u.cpu:.2f} s CPU, {u.rss_mib:.1f} MiB, "
                  f"{wall:.2f} s wall", file=sys.stderr, flush=True)

    audio = a.audio_seconds
    med = {}
    for i, (name, res, _, _) in enumerate(rows):
        cpus = [s[0] for s in samples[i]]
        med[i] = (statistics.median(cpus), statistics.median(s[1] for s in samples[i]),
                  min(cpus), max(cpus))
    baton = {res: med[i] for i, (name, res, cmp, _) in enumerate(rows) if cmp is None}

    header = ("| pipeline | resampler | CPU s per audio s (min–max) | × real time | peak RSS | "
              "Baton at | Baton/peer CPU | CPU reading | Baton/peer RSS |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for i, (name, res, cmp, _) in enumerate(rows):
        cpu, rss, lo, hi = med[i]
        ratio_cpu = ratio_rss = at = reading = "—"
        if cmp is not None:
            b = baton[cmp]
            at = cmp
            ratio_cpu = f"{b[0] / cpu:.2f}×"
            ratio_rss = f"{b[1] / rss:.2f}×"
            # A difference inside the run-to-run spread is no difference.
            if b[2] <= hi and lo <= b[3]:
                reading = "tie (spreads overlap)"
            else:
                reading = "Baton below" if b[3] < lo else "Baton above"
        lines.append(f"| {name} | {res} | {cpu / audio:.5f} ({lo / audio:.5f}–{hi / audio:.5f}) | "
                     f"{audio / cpu:.0f}× | {rss:.1f} MiB | {at} | {ratio_cpu} | {reading} | {ratio_rss} |")
    table = "\n".join(lines)
    print(f"\n{audio:.0f} s of 48 kHz stereo Ogg Opus from {a.url} → gain {GAIN} → 44100 Hz S16 → ALSA {a.device}; "
          f"medians of {a.reps} runs, whole process from exec to exit (GNU time); this is baton-bench's pipeline "
          "harness, not the daemon (scripts/bench-realtime.sh measures the daemon)\n")
    print(table)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
