#!/usr/bin/env python3
"""The whole daemon against other players, each playing the same stream at real time into a paced
sink (scripts/bench-realtime.sh runs this; read its header first).

Every case is a fresh process. The players are started, asked to play, left WARMUP seconds, then
measured for SECONDS: CPU = utime + stime of the whole process (all its threads, /proc/PID/stat)
over the window; peak RSS = VmHWM at the end of it; per thread, the run time and the number of
times it was scheduled (`/proc/PID/task/TID/schedstat`: ns on CPU, timeslices) over the same
window. Cases run round-robin, REPS times; medians and min–max are printed.

    realtime.py --batond BIN --url URL --subsonic-url URL --subsonic-password-file F --song-id ID
                --sounds DIR --workdir DIR [--reps 3] [--seconds 30] [--warmup 5] [--cold-runs 5]
                [--markdown FILE] [--only NAME]
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
RATE = 44100
POLICIES = {0: "", 1: "FIFO", 2: "RR", 3: "BATCH", 5: "IDLE", 6: "DEADLINE"}


def say(msg):
    print(f"bench-realtime: {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# /proc readings

def stat_fields(path):
    """The fields after the command name of a /proc stat file, numbered as in proc(5) minus 3
    (so utime, field 14, is [11])."""
    with open(path) as f:
        s = f.read()
    return s[s.rindex(")") + 2:].split()


def process_ticks(pid):
    f = stat_fields(f"/proc/{pid}/stat")
    return int(f[11]) + int(f[12])


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def threads(pid):
    """tid → (comm, ns on CPU, timeslices, scheduling policy) for every live thread."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"{base}/{tid}/schedstat") as f:
                run_ns, _wait_ns, slices = (int(x) for x in f.read().split())
            policy = POLICIES.get(int(stat_fields(f"{base}/{tid}/stat")[38]), "?")
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        out[int(tid)] = (comm, run_ns, slices, policy)
    return out


def machine_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v[:8]) - idle, sum(v[:8])


def all_process_ticks():
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
            comm = s[s.index("(") + 1:s.rindex(")")]
            f = s[s.rindex(")") + 2:].split()
            out[int(d)] = (comm, int(f[11]) + int(f[12]))
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            continue
    return out


def descendants(pid):
    """pid and every process below it (for a player that forks helpers: none here do)."""
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        seen.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            pass
    return seen


# ---------------------------------------------------------------------------------------------
# Thread names: batond names its threads (`OSThread.start(name:)`: monitor, out:<pcm>, stream,
# fetch, …; libmicrohttpd names its own), and the tables use those names. A batond built before that
# has threads all called "batond": each is then labelled by its entry function, read once from a gdb
# backtrace after the measurement window.

SKIP = re.compile(r"^(\?\?|__|clone|start_thread|usleep|nanosleep|poll|sleep|pthread_|sigwait|epoll_|"
                  r"select|read|write|futex|syscall|main$|batond_main|@objc |closure #\d+ in startThread|"
                  r"thunk|reabstraction|swift_)")


def thread_roles(pid):
    try:
        out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                              "-ex", "thread apply all bt 30"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    try:  # gdb prints Swift's mangled names
        out = subprocess.run(["swift", "demangle", "--simplified"], input=out, capture_output=True, text=True,
                             timeout=60).stdout or out
    except (OSError, subprocess.TimeoutExpired):
        pass
    roles, tid, frames = {}, None, []

    def finish():
        if tid is not None:
            names = [n for n in frames if not SKIP.match(n)]
            if names:
                roles[tid] = names[-1]  # the outermost of the program's own frames: the thread's job

    for line in out.splitlines():
        m = re.match(r'^Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP (\d+)\)', line)
        if m:
            finish()
            tid, frames = int(m.group(1)), []
            continue
        m = re.match(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(.*?) \(", line)
        if m and tid is not None:
            name = re.sub(r"^((specialized|static|merged|partial apply for) )+", "", m.group(1))
            frames.append(name)
    finish()
    return roles


def label_threads(pid, tids, roles, comms):
    """tid → a stable label: role (or comm), numbered in tid order when several share it."""
    base = {}
    for tid in sorted(tids):
        name = roles.get(tid) or comms.get(tid, "?")
        if tid == pid:
            name = f"main: {name}"
        base[tid] = name
    count, labels = {}, {}
    for tid in sorted(tids):
        n = base[tid]
        total = sum(1 for v in base.values() if v == n)
        count[n] = count.get(n, 0) + 1
        labels[tid] = f"{n} #{count[n]}" if total > 1 else n
    return labels


# ---------------------------------------------------------------------------------------------
# HTTP to batond

def http_json(port, method, path, body=None, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, json.dumps(body) if body is not None else None,
                  {"Content-Type": "application/json"} if method != "GET" else {})
        r = c.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data else None)
    finally:
        c.close()


def wait_status_200(port, proc, deadline_s=15.0, poll_s=0.001):
    """Polls GET /api/v1/status; returns the monotonic time of the first 200."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"batond exited ({proc.returncode}) before its API answered")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/api/v1/status")
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                return time.monotonic()
        except OSError:
            pass
        time.sleep(poll_s)
    raise RuntimeError("batond's API did not answer 200 within 15 s")


# ---------------------------------------------------------------------------------------------
# The players

class Player:
    """A started player: pid, and what to check and stop."""
    proc = None
    batond = False

    def pid(self):
        return self.proc.pid

    def check(self, seconds):
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.proc.returncode}) during the measurement: "
                               "it did not play in real time, or failed (see its log)")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()


PULSE_HOOK = "/etc/alsa/conf.d/99-pulse.conf"
NO_PULSE_HOOK = "batond without the PulseAudio hook"


def without_pulse_hook(a):
    """A command prefix that runs batond in a mount namespace of its own with PULSE_HOOK covered by an
    empty file (needs root; `unshare` and `sh` exec, so the pid is batond's)."""
    if not os.path.exists(PULSE_HOOK):
        raise RuntimeError(f"{PULSE_HOOK} does not exist: the first row already runs without it")
    empty = os.path.join(a.workdir, "empty-alsa.conf")
    open(empty, "w").close()
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount --bind "$0" {PULSE_HOOK} && exec "$@"', empty]


class Batond(Player):
    batond = True

    def __init__(self, a, zones, play, sounds=None, period_ms=None, binary=None, prefix=(), spinners=0,
                 buffer_ms=None, external=None, sink="null", ahead=False, paused=False):
        """external: None; "idle" (listening for everything: an external source `x` with no program
        connected, the intercom's RTP port, MQTT connected to a mosquitto started for the case);
        "aplay" (aplay writes a.external_wav to `baton_x` in real time: the program's audio through
        batond's ALSA plugin, as AirPlay or Spotify would); or "snapcast" (the zones are one
        Snapcast zone on a snapserver started for the case, with one snapclient, nothing playing).
        sink: "null" (`clock: system` zones on `null` PCMs) or "card" (`clock: device` zones on the
        project's virtual sound card, `type batontest`, a.card_plugin: it consumes at its rate from
        CLOCK_MONOTONIC, no record kept; a 40 ms buffer).
        ahead: the zones get a 120 ms buffer and `render-ahead: true` (on `null`, batond's own buffer,
        played by the clock; on the card, the card's).
        paused: the music is started, then paused before the warm-up (measured: a zone whose only
        source is paused)."""
        self.a, self.zones, self.play, self.period_ms, self.buffer_ms = a, zones, play, period_ms, buffer_ms
        self.external, self.feeder, self.broker, self.snap = external, None, None, []
        self.sink, self.ahead, self.paused = sink, ahead, paused
        self.binary = binary or a.batond
        self.prefix, self.spinners, self.spinning = list(prefix), spinners, []
        self.sounds = sounds or a.sounds
        self.name = f"batond ({zones} zone{'s' if zones > 1 else ''}, {'playing' if play else 'idle'})"

    def write_config(self):
        d = os.path.join(self.a.workdir, f"batond-{self.zones}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "alsa.conf"), "w") as f:
            f.write("</usr/share/alsa/alsa.conf>\n")
            card = self.sink == "card"
            if card:
                f.write(f'pcm_type.batontest {{ lib "{self.a.card_plugin}" }}\n')
            for i in range(1, self.zones + 1):
                if card:
                    frames = RATE * (120 if self.ahead else 40) // 1000
                    f.write(f"pcm.rt_zone{i} {{ type batontest rate {RATE} format S16_LE channels 2 "
                            f"period {RATE // 100} buffer {frames} }}\n")
                else:
                    f.write(f"pcm.rt_zone{i} {{ type null }}\n")
            if self.external:
                f.write(f'pcm_type.baton {{ lib "{self.a.plugin}" }}\n'
                        f'pcm.baton_x {{ type baton source "x" socket "{d}/sources.sock" }}\n')
        self.port = free_port()
        timing = f", period: {self.period_ms}ms, buffer: {4 * self.period_ms}ms" if self.period_ms else ""
        if self.buffer_ms:
            timing = f", buffer: {self.buffer_ms}ms"
        clock = "clock: device" if self.sink == "card" else "clock: system"
        if self.ahead:
            clock += ", buffer: 120ms, render-ahead: true"
        zones = "".join(f"  zone{i}: {{pcm: rt_zone{i}, rate: {RATE}, channels: 2, {clock}{timing}}}\n"
                        for i in range(1, self.zones + 1))
        if self.external == "snapcast":
            zones = (f"  zone1:\n    snapcast: {{source: 'tcp://127.0.0.1:{self.snap_ports[3]}', "
                     f"control: 'http://127.0.0.1:{self.snap_ports[1]}', stream: upstairs, clients: [bench-pi]}}\n"
                     f"    rate: 48000\n    channels: 2\n")
        conf = os.path.join(d, "baton.yaml")
        with open(conf, "w") as f:
            f.write(f"""api: {{listen: 127.0.0.1:{self.port}}}
zones:
{zones}alsa-config: {d}/alsa.conf
sounds: {self.sounds}
resampler: {{music: soxr-hq}}
music:
  subsonic: {{url: {self.a.subsonic_url}, user: {self.a.subsonic_user}, password-file: {self.a.subsonic_password_file}, format: raw}}
""")
            if self.external:
                f.write(f"external-sources:\n  socket: {d}/sources.sock\n  x: {{class: music, when-interrupted: hold}}\n")
            if self.external == "idle":
                f.write(f"mqtt: {{broker: 'mqtt://127.0.0.1:{self.broker_port}'}}\n"
                        f"intercom:\n  rtp: {{listen: '127.0.0.1:{free_port()}', zones: [all]}}\n")
        return conf, d

    def start_snapcast(self, d):
        """snapserver (its own empty config and datadir, loopback ports, a `mode=server` TCP source
        `upstairs`, FLAC to the clients as by default) and one snapclient (`bench-pi`, playing into
        the `file` player's null sink)."""
        self.snap_ports = [free_port() for _ in range(4)]
        stream, http, tcp, source = self.snap_ports
        open(os.path.join(d, "snapserver.conf"), "w").close()
        server = subprocess.Popen(
            ["snapserver", f"--config={d}/snapserver.conf", f"--server.datadir={d}",
             "--stream.bind_to_address=127.0.0.1", f"--stream.port={stream}",
             "--http.bind_to_address=127.0.0.1", f"--http.port={http}",
             "--tcp.bind_to_address=127.0.0.1", f"--tcp.port={tcp}",
             f"--stream.source=tcp://127.0.0.1:{source}?name=upstairs&mode=server&sampleformat=48000:16:2",
             "--logging.filter=*:warning"], stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        self.snap.append(server)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", stream), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"{self.name}: snapserver did not listen on {stream}")
                time.sleep(0.05)
        self.snap.append(subprocess.Popen(
            ["snapclient", "-h", "127.0.0.1", "-p", str(stream), "--hostID", "bench-pi",
             "--player", "file:filename=null"], stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log))

    def snapcast_pids(self):
        """snapserver's and snapclient's pids (their CPU is reported beside batond's)."""
        return [p.pid for p in self.snap]

    def start(self):
        if self.external == "snapcast":
            d = os.path.join(self.a.workdir, f"batond-{self.zones}")
            os.makedirs(d, exist_ok=True)
            self.log = open(os.path.join(d, "log"), "w")
            self.start_snapcast(d)
        if self.external == "idle":
            self.broker_port = free_port()
            self.broker = subprocess.Popen(["mosquitto", "-p", str(self.broker_port)], stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        conf, d = self.write_config()
        if self.external != "snapcast":
            self.log = open(os.path.join(d, "log"), "w")
        # SCHED_IDLE busy loops: they run only when nothing else wants the CPU, so no vCPU halts.
        self.spinning = [subprocess.Popen(["chrt", "-i", "0", "sh", "-c", "while :; do :; done"])
                         for _ in range(self.spinners)]
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.prefix + [self.binary, "--config", conf], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log)
        self.ready_s = wait_status_200(self.port, self.proc) - t0
        # The API answers before the output threads have opened their PCMs; a play request then is
        # refused (503, "opening PCM"), so wait for every zone to be available first.
        self.wait_until(lambda s: all(z.get("state") == "available" for z in s["zones"]),
                        lambda s: f"zones not available after 10 s: {s['zones']}")
        if self.play:
            st, body = http_json(self.port, "POST", "/api/v1/music/play",
                                 {"songs": [self.a.song_id], "zones": [f"zone{i}" for i in range(1, self.zones + 1)]},
                                 timeout=30)
            if st != 202:
                raise RuntimeError(f"music/play answered {st}: {body}")
            if self.paused:
                self.wait_until(lambda s: any(x.get("state") == "playing" for x in s["sources"]),
                                lambda s: f"the music did not play: {s['sources']}", seconds=30)
                st, body = http_json(self.port, "POST", "/api/v1/music/pause", {})
                if st != 200:
                    raise RuntimeError(f"music/pause answered {st}: {body}")
                self.wait_until(lambda s: any(x.get("state") == "paused" for x in s["sources"]),
                                lambda s: f"the music did not pause: {s['sources']}")
        if self.external == "snapcast":
            self.wait_until(lambda s: (s["zones"][0].get("snapcast") or {}).get("connected") == ["bench-pi"],
                            lambda s: f"the snapclient is not grouped on the zone: {s['zones'][0].get('snapcast')}")
        if self.external == "idle":
            self.wait_until(lambda s: (s.get("mqtt") or {}).get("connection") == "connected",
                            lambda s: f"MQTT did not connect: {s.get('mqtt')}")
        if self.external == "aplay":
            env = dict(os.environ, ALSA_CONFIG_PATH=os.path.join(d, "alsa.conf"))
            self.feeder = subprocess.Popen(["aplay", "-q", "-D", "baton_x", self.a.external_wav], env=env,
                                           stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
            self.wait_until(lambda s: any(x.get("class") == "music" and x.get("state") == "playing"
                                          for x in s["sources"]),
                            lambda s: f"aplay's source is not playing: {s['sources']}",
                            gave_up=lambda: self.feeder.poll() is not None)

    def snapshot(self):
        st, body = http_json(self.port, "GET", "/api/v1/status")
        return body

    def wait_until(self, done, why, gave_up=lambda: False, seconds=10):
        """Polls the status every 10 ms until done(status); raises RuntimeError with why(status) after
        `seconds`, or as soon as gave_up()."""
        deadline = time.monotonic() + seconds
        while not done(self.snapshot()):
            if time.monotonic() > deadline or gave_up():
                raise RuntimeError(f"{self.name}: {why(self.snapshot())}")
            time.sleep(0.01)

    def stop(self):
        if self.feeder and self.feeder.poll() is None:
            self.feeder.terminate()
            self.feeder.wait()
        super().stop()
        if self.broker:
            self.broker.terminate()
            self.broker.wait()
        for p in reversed(self.snap):
            p.terminate()
            p.wait()
        for p in self.spinning:
            p.kill()
            p.wait()

    def begin(self):
        self.before, self.t_before = self.snapshot(), time.monotonic()
        self.snap_ticks = [process_ticks(p.pid) for p in self.snap]

    def check(self, _):
        super().check(None)
        after = self.snapshot()
        seconds = time.monotonic() - self.t_before
        stopped = 0
        for z0, z1 in zip(self.before["zones"], after["zones"]):
            played = (z1["framesPlayed"] - z0["framesPlayed"]) / RATE
            if z1.get("state", "available") != "available":
                raise RuntimeError(f"{self.name}: zone {z1['name']} is unavailable")
            if (not self.play or self.paused) and played == 0:
                stopped += 1  # an idle zone stops its PCM (DeviceSpec.stopsWhenIdle): no frames
                continue
            if abs(played - seconds) > 0.1 * seconds:
                raise RuntimeError(f"{self.name}: zone {z1['name']} played {played:.1f} s in {seconds:.1f} s")
        if self.external == "aplay":
            if self.feeder.poll() is not None:
                raise RuntimeError(f"{self.name}: aplay ended during the measurement")
            self.note = "aplay → baton_x (48 kHz S16) → the zone"
        elif self.external == "snapcast":
            server, client = ((process_ticks(p.pid) - t0) / HZ / seconds for p, t0 in zip(self.snap, self.snap_ticks))
            self.note = (f"{'stopped' if stopped else 'rendering'}; over the same time snapserver "
                         f"{server:.4f} s/s, snapclient {client:.4f} s/s")
        elif not self.play or self.paused:
            self.note = f"{stopped} of {len(after['zones'])} {'paused' if self.paused else 'idle'} zones stopped"
        if self.paused:
            src = [s for s in after["sources"] if s["class"] == "music"]
            if not src or src[0]["state"] != "paused":
                raise RuntimeError(f"{self.name}: the music is not paused: {src}")
        elif self.play:
            src0 = [s for s in self.before["sources"] if s["class"] == "music"]
            src1 = [s for s in after["sources"] if s["class"] == "music"]
            if not src0 or not src1 or src1[0]["state"] != "playing":
                raise RuntimeError(f"{self.name}: the music is not playing: {src1}")
            moved = src1[0]["positionSeconds"] - src0[0]["positionSeconds"]
            if abs(moved - seconds) > 0.1 * seconds:
                raise RuntimeError(f"{self.name}: the music moved {moved:.1f} s in {seconds:.1f} s")
            starved = sum(s.get("starvedPeriods", 0) for z in after["zones"] for s in z["sources"])
            self.note = f"track {src1[0].get('track', {}).get('title')!r}, {starved} starved periods"


class Command(Player):
    def __init__(self, name, argv, workdir):
        self.name, self.argv, self.workdir = name, argv, workdir

    def start(self):
        self.log = open(os.path.join(self.workdir, f"{self.name}.log"), "a")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)

    def begin(self):
        pass


class MPD(Player):
    name = "MPD"

    def __init__(self, a):
        self.a = a

    def mpd(self, *lines):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            f = s.makefile("rwb")
            f.readline()
            state = {}
            for cmd in lines:
                f.write(cmd.encode() + b"\n")
                f.flush()
                for line in f:
                    line = line.decode().strip()
                    if line == "OK":
                        break
                    if line.startswith("ACK"):
                        raise RuntimeError(f"MPD: {cmd}: {line}")
                    k, _, v = line.partition(": ")
                    state[k] = v
            return state

    def start(self):
        d = os.path.join(self.a.workdir, "mpd")
        for sub in ("music", "playlists"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        self.port = free_port()
        conf = os.path.join(d, "mpd.conf")
        # Each `}` on its own line: MPD's parser wants it.
        with open(conf, "w") as f:
            f.write(f"""music_directory "{d}/music"
playlist_directory "{d}/playlists"
db_file "{d}/db"
log_file "{d}/log"
bind_to_address "127.0.0.1"
port "{self.port}"
auto_update "no"
zeroconf_enabled "no"
resampler {{
  plugin "soxr"
  quality "high"
}}
input {{
  plugin "curl"
}}
audio_output {{
  type "null"
  name "bench"
  sync "yes"
  format "44100:16:2"
}}
""")
        self.log = open(os.path.join(d, "stderr"), "w")
        self.proc = subprocess.Popen(["mpd", "--no-daemon", conf], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log)
        for _ in range(1000):
            try:
                self.mpd("status")
                break
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"mpd exited ({self.proc.returncode}); see {d}/stderr")
                time.sleep(0.01)
        self.mpd("clear", f'add "{self.a.url}"', "play")

    def begin(self):
        self.before, self.t_before = self.mpd("status"), time.monotonic()

    def check(self, _):
        super().check(None)
        after = self.mpd("status")
        seconds = time.monotonic() - self.t_before
        if after.get("state") != "play" or "error" in after:
            raise RuntimeError(f"MPD is not playing: {after}")
        moved = float(after["elapsed"]) - float(self.before["elapsed"])
        if abs(moved - seconds) > 0.1 * seconds:
            raise RuntimeError(f"MPD moved {moved:.1f} s in {seconds:.1f} s")
        self.note = f"decoded {after.get('audio')}"


def peers(a):
    """name → a function making a fresh player."""
    caps = "audio/x-raw,rate=44100,format=S16LE,channels=2"
    mpv = ["mpv", "--no-config", "--really-quiet", "--no-video", "--ao=null",
           "--audio-samplerate=44100", "--audio-format=s16", a.url]
    gst = ["gst-launch-1.0", "-q", "souphttpsrc", f"location={a.url}", "!", "oggdemux", "!",
           "opusdec", "!", "audioconvert", "!", "audioresample", "!", caps, "!", "fakesink", "sync=true"]
    return [("MPD", lambda: MPD(a)),
            ("mpv", lambda: Command("mpv", mpv, a.workdir)),
            ("GStreamer", lambda: Command("GStreamer", gst, a.workdir))]


# ---------------------------------------------------------------------------------------------
# One measured run

def measure(player, a, servers):
    player.note = ""
    player.start()
    try:
        time.sleep(a.warmup)
        player.begin()  # a status request: batond answers it on a thread of its own, which ends soon after
        time.sleep(0.5)
        pid = player.pid()
        c0, th0, m0, o0 = process_ticks(pid), threads(pid), machine_ticks(), all_process_ticks()
        t0 = time.monotonic()
        time.sleep(a.seconds)
        c1, th1, m1, o1 = process_ticks(pid), threads(pid), machine_ticks(), all_process_ticks()
        t1 = time.monotonic()
        hwm = vm_hwm_kib(pid)
        wall = t1 - t0
        player.check(wall)
        ours = set(descendants(pid)) | {os.getpid()}
        others = {}
        for p, (comm, ticks) in o1.items():
            if p in ours:
                continue
            d = ticks - o0.get(p, (comm, 0))[1]
            if d > 0:
                key = f"the benchmark's servers ({comm})" if p in servers else comm
                others[key] = others.get(key, 0) + d / HZ
        busy = (m1[0] - m0[0]) / (m1[1] - m0[1]) * os.cpu_count()
        rec = {
            "cpu": (c1 - c0) / HZ / wall,
            "rss_mib": hwm / 1024,
            "wall": wall,
            "others": others,
            "busy_cores": busy,
            "note": player.note,
        }
        per = {}
        for tid, (comm, ns, slices, pol) in th1.items():
            ns0, sl0 = (th0[tid][1], th0[tid][2]) if tid in th0 else (0, 0)
            per[tid] = (comm, (ns - ns0) / 1e9 / wall, (slices - sl0) / wall, pol)
        rec["sched_cpu"] = sum(v[1] for v in per.values())
        rec["wakeups"] = sum(v[2] for v in per.values())
        rec["ended_threads"] = len(set(th0) - set(th1))
        rec["nthreads"] = len(th1)
        if player.batond:
            # batond names its threads (monitor, out:<pcm>, stream, fetch, …); gdb only for a binary
            # whose threads are still all called "batond" (one built before the names).
            comms = [v[0] for t, v in per.items() if t != pid]
            roles = thread_roles(pid) if comms.count("batond") > 1 else {}
            labels = label_threads(pid, per.keys(), roles, {t: v[0] for t, v in per.items()})
            rec["threads"] = {labels[t]: (v[1], v[2], v[3], v[0]) for t, v in per.items()}
        else:
            # A peer's threads by their own names (MPD: "io", "decoder:…", "output:…"; GStreamer:
            # its element threads), a repeated name numbered, for what costs what beside batond's.
            rec["threads"] = {}
            for t, v in sorted(per.items()):
                key, n = v[0], 2
                while key in rec["threads"]:
                    key, n = f"{v[0]} #{n}", n + 1
                rec["threads"][key] = (v[1], v[2], v[3], v[0])
        return rec
    finally:
        player.stop()


def cold_start(a, sounds):
    b = Batond(a, 1, False, sounds=sounds)
    conf, d = b.write_config()
    log = open(os.path.join(d, "cold.log"), "w")
    t0 = time.monotonic()
    proc = subprocess.Popen([a.batond, "--config", conf], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        ready = wait_status_200(b.port, proc, poll_s=0.0005)
        return (ready - t0) * 1000
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


# ---------------------------------------------------------------------------------------------
# Output

def med(xs):
    return statistics.median(xs)


def spread(xs, fmt):
    return f"{fmt.format(med(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def overlap(xs, ys):
    return min(xs) <= max(ys) and min(ys) <= max(xs)


def ratio_text(xs, ys, what):
    r = med(xs) / med(ys)
    lo, hi = min(xs) / max(ys), max(xs) / min(ys)
    tie = " — a tie: the spreads overlap" if overlap(xs, ys) else ""
    return f"{what}: {r:.2f}× (range {lo:.2f}–{hi:.2f}×){tie}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batond", required=True)
    ap.add_argument("--url", required=True, help="the stream on the Range-capable server")
    ap.add_argument("--subsonic-url", required=True)
    ap.add_argument("--subsonic-user", default="baton")
    ap.add_argument("--subsonic-password-file", required=True)
    ap.add_argument("--song-id", required=True)
    ap.add_argument("--sounds", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--cold-runs", type=int, default=5, help="cold starts per round")
    ap.add_argument("--server-pids", default="", help="the Supysonic and Range servers (comma-separated)")
    ap.add_argument("--markdown")
    ap.add_argument("--only", help="run only these cases (comma-separated): a case's whole name picks it alone, "
                    "another word every case whose name contains it")
    ap.add_argument("--baseline-batond", help="another batond binary, measured as the first row beside it")
    ap.add_argument("--baseline-label", default="baseline", help="what the baseline binary is (its commit)")
    ap.add_argument("--plugin", help="libasound_module_pcm_baton.so, for the external-source cases")
    ap.add_argument("--external-wav", help="what aplay plays to baton_x in the external-source case")
    ap.add_argument("--card-plugin", help="libasound_module_pcm_batontest.so, for the virtual-card cases")
    a = ap.parse_args()

    cases = [("batond", "one `clock: system` zone on ALSA `null`, Subsonic (Supysonic) `format: raw`, soxr-hq",
              lambda: Batond(a, 1, True)),
             ("batond, 40 ms period", "the first row with `period: 40ms, buffer: 160ms` (the default is 10 ms / 40 ms): "
              "a quarter of the output wake-ups, up to 120 ms more between a request and its first sample (a buffer: 160 against 40 ms)",
              lambda: Batond(a, 1, True, period_ms=40))]
    baseline = f"batond at {a.baseline_label}"
    if a.baseline_batond:
        cases.insert(1, (baseline, f"the first row's case with the release batond built from {a.baseline_label}",
                         lambda: Batond(a, 1, True, binary=a.baseline_batond)))
    howto = {
        "MPD": "`audio_output { type \"null\" sync \"yes\" format \"44100:16:2\" }`, resampler soxr \"high\", curl input (its opus plugin decodes to S16)",
        "mpv": "`--no-config --ao=null --audio-samplerate=44100 --audio-format=s16 URL` (swr)",
        "GStreamer": "`souphttpsrc ! oggdemux ! opusdec ! audioconvert ! audioresample ! S16 44.1k ! fakesink sync=true`",
    }
    for name, make in peers(a):
        cases.append((name, howto[name], make))
    for n in (1, 2, 4):
        cases.append((f"batond idle, {n} zone{'s' if n > 1 else ''}",
                      f"{n} `clock: system` zone{'s' if n > 1 else ''} on `null` PCMs, nothing playing",
                      (lambda n=n: Batond(a, n, False))))
    cases.append(("batond playing to 2 zones", "the first row's stream to two `clock: system` zones on `null` PCMs",
                  lambda: Batond(a, 2, True)))
    if a.baseline_batond:
        cases.append((f"{baseline} playing to 2 zones", f"the row above with the release batond built from {a.baseline_label}",
                      lambda: Batond(a, 2, True, binary=a.baseline_batond)))
    # What an output wake-up costs on this machine, run only when ONLY names them.
    optional = [("batond SCHED_OTHER", "the first row without CAP_SYS_NICE (`setpriv --inh-caps=-sys_nice "
                 "--bounding-set=-sys_nice`): the output thread runs SCHED_OTHER",
                 lambda: Batond(a, 1, True, prefix=["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice"])),
                ("batond with CPUs kept awake", "the first row beside one `chrt -i 0` busy loop per CPU (SCHED_IDLE: "
                 "they take only idle time, so no CPU halts between periods)",
                 lambda: Batond(a, 1, True, spinners=os.cpu_count())),
                ("batond buffer 50ms", "the first row with `buffer: 50ms` (the default 10 ms period): two periods per "
                 "output wake-up with 30 ms still held, up to 10 ms more between a request and its first sample",
                 lambda: Batond(a, 1, True, buffer_ms=50)),
                ("batond buffer 100ms", "the first row with `buffer: 100ms` (the default 10 ms period): five "
                 "periods per output wake-up with 50 ms still held, up to 60 ms more between a request and its "
                 "first sample",
                 lambda: Batond(a, 1, True, buffer_ms=100)),
                ("batond card", "the first row's stream to one `clock: device` zone on the project's virtual "
                 "sound card (`type batontest`, in batond's process: it consumes at its rate from CLOCK_MONOTONIC, "
                 "no record kept), the default 10 ms / 40 ms: the output waits on the card every period",
                 lambda: Batond(a, 1, True, sink="card")),
                ("batond card ahead", "the row above with `buffer: 120ms, render-ahead: true`: the card kept "
                 "full, the output woken when it holds 30 ms, what the card has not started playing taken back "
                 "when something changes (a request heard within about two periods)",
                 lambda: Batond(a, 1, True, sink="card", ahead=True)),
                ("batond ahead", "the first row (`clock: system` on `null`) with `buffer: 120ms, render-ahead: "
                 "true`: batond's own 120 ms buffer, played by the system clock into the PCM, kept full, the "
                 "output woken when it holds 30 ms, what the clock has not reached taken back when something "
                 "changes",
                 lambda: Batond(a, 1, True, ahead=True)),
                (NO_PULSE_HOOK, "the first row with PulseAudio's ALSA hook "
                 f"({PULSE_HOOK}, of the `pulseaudio` package, which the tests need here) hidden from batond "
                 "(an empty file bind-mounted over it in a mount namespace of batond's own): its ALSA "
                 "configuration as on a speaker without PulseAudio, where alsa-lib does not load "
                 "libasound_module_conf_pulse.so and the 14 libraries it maps (libpulse, libsndfile, libX11, …)",
                 lambda: Batond(a, 1, True, prefix=without_pulse_hook(a))),
                ("batond paused", "the first row's music paused (by the API) before the warm-up: one zone whose "
                 "only source is paused",
                 lambda: Batond(a, 1, True, paused=True)),
                ("batond idle listening", "the idle 2-zone row listening for everything: an external source "
                 "`x` (no program connected), the intercom's RTP port, MQTT connected to a local mosquitto",
                 lambda: Batond(a, 2, False, external="idle")),
                ("batond idle snapcast", "one Snapcast zone (a `mode=server` TCP source of a snapserver "
                 "started for the case, one snapclient grouped on it), nothing playing",
                 lambda: Batond(a, 1, False, external="snapcast")),
                ("batond external aplay", "one zone as in the first row, no music; aplay writes the stream "
                 "(decoded to 48 kHz S16 WAV) to `baton_x` in real time: a program through the `baton` ALSA "
                 "plugin, `when-interrupted: hold`",
                 lambda: Batond(a, 1, False, external="aplay"))]
    # The external rows' twins with the baseline binary, beside them when they are picked.
    twins = {}
    if a.baseline_batond:
        for row, ext, zones in (("batond idle listening", "idle", 2), ("batond external aplay", "aplay", 1),
                                ("batond idle snapcast", "snapcast", 1)):
            twins[row] = (
                f"{baseline}{row[len('batond'):]}", f"the row `{row}` with the release batond built from "
                f"{a.baseline_label}",
                (lambda ext=ext, zones=zones: Batond(a, zones, False, external=ext, binary=a.baseline_batond)))
        twins["batond paused"] = (
            f"{baseline} paused", f"the row `batond paused` with the release batond built from {a.baseline_label}",
            lambda: Batond(a, 1, True, paused=True, binary=a.baseline_batond))
    if a.only:
        keys = [k.strip().lower() for k in a.only.split(",")]
        picked = [c for c in optional if c[0].lower() in keys]
        for c in picked:
            cases.append(c)
            if c[0] in twins:
                cases.append(twins[c[0]])
                keys.append(twins[c[0]][0].lower())
        # A word that is a case's whole name picks that case alone; others pick every case containing them.
        names = {c[0].lower() for c in cases}
        cases = [c for c in cases if c[0] == baseline
                 or any(c[0].lower() == k if k in names else k in c[0].lower() for k in keys)]

    servers = set()
    for p in (int(x) for x in a.server_pids.split(",") if x):
        servers |= set(descendants(p))
    empty_sounds = os.path.join(a.workdir, "no-sounds")
    os.makedirs(empty_sounds, exist_ok=True)
    results = {name: [] for name, _, _ in cases}
    cold = {"with the bench config (config/sounds)": [], "with an empty sounds dir": []}
    for rep in range(a.reps):
        for name, _, make in cases:
            r = measure(make(), a, servers)
            results[name].append(r)
            say(f"round {rep + 1}/{a.reps}  {name}: {r['cpu']:.4f} s/s (schedstat {r['sched_cpu']:.4f}), "
                f"{r['rss_mib']:.1f} MiB, {r['wakeups']:.0f} wake-ups/s, machine busy {r['busy_cores']:.2f} cores"
                + (f"; {r['note']}" if r["note"] else ""))
        for _ in range(a.cold_runs):
            cold["with the bench config (config/sounds)"].append(cold_start(a, a.sounds))
            cold["with an empty sounds dir"].append(cold_start(a, empty_sounds))
        if a.cold_runs:  # COLD_RUNS=0: none (the median of nothing stopped the run after its first round)
            say(f"round {rep + 1}/{a.reps}  cold start: " +
                ", ".join(f"{k} {med(v):.0f} ms" for k, v in cold.items()))

    out = []
    p = out.append
    p(f"Each case: a fresh process, {a.warmup:.0f} s warm-up, then {a.seconds:.0f} s measured; {a.reps} rounds, "
      "round-robin; median (min–max).")
    p("CPU = utime+stime of the whole process over the window (/proc/PID/stat, 1/%d s ticks), per second; "
      "\"schedstat\" = the sum over its threads of /proc/PID/task/*/schedstat run time (ns), the finer figure; "
      "wake-ups = timeslices per second, all threads; peak RSS = VmHWM." % HZ)
    p("")
    p("| player | how it was run | CPU s per audio s | schedstat CPU s/s | wake-ups/s | peak RSS (MiB) | threads |")
    p("|---|---|---|---|---|---|---|")
    for name, how, _ in cases:
        rs = results[name]
        p(f"| {name} | {how} | {spread([r['cpu'] for r in rs], '{:.4f}')} | "
          f"{spread([r['sched_cpu'] for r in rs], '{:.4f}')} | {spread([r['wakeups'] for r in rs], '{:.0f}')} | "
          f"{spread([r['rss_mib'] for r in rs], '{:.1f}')} | {med([r['nthreads'] for r in rs]):.0f} |")
    p("")

    def col(name, key):
        return [r[key] for r in results.get(name, [])]

    p("Ratios (median of batond over median of the peer; the range is batond's min over the peer's max "
      "to batond's max over the peer's min):")
    if results.get("batond") and results.get(baseline):
        p(f"- {ratio_text(col('batond', 'cpu'), col(baseline, 'cpu'), f'CPU, batond / {baseline}')}")
        p(f"- {ratio_text(col('batond', 'rss_mib'), col(baseline, 'rss_mib'), f'peak RSS, batond / {baseline}')}")
    two, two_base = "batond playing to 2 zones", f"{baseline} playing to 2 zones"
    if results.get(two) and results.get(two_base):
        p(f"- {ratio_text(col(two, 'cpu'), col(two_base, 'cpu'), f'CPU, {two} / {two_base}')}")
    if results.get("batond") and results.get("MPD"):
        p(f"- {ratio_text(col('batond', 'cpu'), col('MPD', 'cpu'), 'CPU, batond / MPD')}")
    for peer in ("mpv", "GStreamer"):
        if results.get("batond") and results.get(peer):
            p(f"- {ratio_text(col('batond', 'cpu'), col(peer, 'cpu'), f'CPU, batond / {peer}')}")
    for variant, label in (("batond, 40 ms period", "batond at 40 ms"), ("batond buffer 50ms", "batond buffer 50ms"),
                           ("batond ahead", "batond ahead"), ("batond card", "batond card"),
                           ("batond card ahead", "batond card ahead")):
        if results.get(variant) and results.get("MPD"):
            p(f"- {ratio_text(col(variant, 'cpu'), col('MPD', 'cpu'), f'CPU, {label} / MPD')}")
        if results.get(variant) and results.get("batond"):
            p(f"- {ratio_text(col(variant, 'cpu'), col('batond', 'cpu'), f'CPU, {label} / batond')}")
    for row in ("batond", NO_PULSE_HOOK):
        if results.get(row) and results.get("GStreamer"):
            p(f"- {ratio_text(col(row, 'rss_mib'), col('GStreamer', 'rss_mib'), f'peak RSS, {row} / GStreamer')}")
    if results.get("batond") and results.get("MPD"):
        p(f"- {ratio_text(col('batond', 'rss_mib'), col('MPD', 'rss_mib'), 'peak RSS, batond / MPD')}")
    p("")
    if a.cold_runs:
        p("Cold start, exec → first 200 from GET /api/v1/status (1 zone, music configured; polled every 0.5 ms; "
          f"{a.cold_runs} per round, {a.reps} rounds; page cache warm):")
        for k, v in cold.items():
            p(f"- {k}: {spread(v, '{:.0f}')} ms, n={len(v)}")
        p("")

    # Targets (issue 15).
    p("Targets:")
    def verdict(ok_all, ok_none):
        return "met" if ok_all else ("not met" if ok_none else "not shown (the spread straddles it)")
    for row in ("batond", "batond ahead", "batond card", "batond card ahead"):
        if results.get(row) and results.get("MPD"):
            b, m = col(row, "cpu"), col("MPD", "cpu")
            p(f"- playing ≤ 0.7× MPD's CPU ({row}): {med(b) / med(m):.2f}× — "
              f"{verdict(max(b) / min(m) <= 0.7, min(b) / max(m) > 0.7)}")
    if results.get("batond idle, 2 zones"):
        s = col("batond idle, 2 zones", "sched_cpu")
        p(f"- idle, two zones ≤ 0.0005 s/s: {med(s):.4f} s/s (schedstat; /proc/PID/stat "
          f"{med(col('batond idle, 2 zones', 'cpu')):.4f}) — {verdict(max(s) <= 0.0005, min(s) > 0.0005)}")
    for row in ("batond", NO_PULSE_HOOK):
        if results.get(row) and results.get("GStreamer"):
            b, g = col(row, "rss_mib"), col("GStreamer", "rss_mib")
            p(f"- peak RSS ≤ 0.8× GStreamer's ({row}): {med(b) / med(g):.2f}× — "
              f"{verdict(max(b) / min(g) <= 0.8, min(b) / max(g) > 0.8)}")
    c = cold["with the bench config (config/sounds)"]
    if c:
        p(f"- cold start ≤ 200 ms: {med(c):.0f} ms — {verdict(max(c) <= 200, min(c) > 200)}")
    p("")

    # Per thread.
    for name, _, _ in cases:
        rs = [r for r in results[name] if "threads" in r]
        if not rs:
            continue
        labels = []
        for r in rs:
            for k in r["threads"]:
                if k not in labels:
                    labels.append(k)
        p(f"Per thread, {name} (schedstat over the window; median (min–max) of the rounds it appears in; "
          "threads by name (/proc/PID/task/*/comm), or, for a binary without thread names, by the outermost of "
          "their own frames in a gdb backtrace taken after the window):")
        p("")
        p("| thread | comm | policy | CPU s/s | wake-ups/s | rounds |")
        p("|---|---|---|---|---|---|")
        rows = []
        for k in labels:
            v = [r["threads"][k] for r in rs if k in r["threads"]]
            rows.append((med([x[0] for x in v]), k, v))
        for _, k, v in sorted(rows, reverse=True):
            p(f"| {k} | {v[0][3]} | {v[0][2] or 'other'} | {spread([x[0] for x in v], '{:.4f}')} | "
              f"{spread([x[1] for x in v], '{:.0f}')} | {len(v)} |")
        ended = [r["ended_threads"] for r in rs]
        if any(ended):
            p(f"\n(threads that ended during the window, not in the table: {ended})")
        p("")

    # What else ran.
    busy = {name: med([r["busy_cores"] for r in results[name]]) for name, _, _ in cases}
    p("The machine during the windows (all processes, /proc/stat; %d CPUs): busy cores, median per case: " % os.cpu_count()
      + ", ".join(f"{k} {v:.2f}" for k, v in busy.items()))
    totals = {}
    for rs in results.values():
        for r in rs:
            for k, v in r["others"].items():
                totals[k] = totals.get(k, 0) + v
    window_total = sum(r["wall"] for rs in results.values() for r in rs)
    top = sorted(totals.items(), key=lambda kv: -kv[1])[:10]
    p(f"Other processes' CPU during the {window_total:.0f} s of windows (processes alive at a window's end; "
      "short-lived ones are only in the busy cores): " + ", ".join(f"{k} {v:.1f} s" for k, v in top))
    text = "\n".join(out)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
