"""Announcement latency on the virtual sound card (`clock: device`). See scripts/measure-latency.sh --card.

The latency of each request is read from the card's own record, not from Baton: request time =
CLOCK_MONOTONIC taken right before the request is sent (on an already connected socket); first
sample = the instant the card consumed the announcement's first frame, found exactly in the record
and timed from the timing sidecar.

usage: card_latency.py BATOND CARD_LIB N [RATE PERIOD_FRAMES BUFFER_FRAMES]
RENDER_AHEAD=1: the zone has `render-ahead: true` (docs/CONFIG.md).
"""
import bisect, http.client, json, math, os, random, shutil, signal, socket, statistics, struct, subprocess, sys, tempfile, time, wave

batond, card_lib, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
RATE, PERIOD, BUFFER = (int(x) for x in sys.argv[4:7]) if len(sys.argv) >= 7 else (48000, 480, 1920)
period_ms, buffer_ms = PERIOD * 1000 / RATE, BUFFER * 1000 / RATE
target_ms = period_ms + buffer_ms + 5
render_ahead = os.environ.get("RENDER_AHEAD") == "1"
NAMES = 8          # beep0..7 in turn: no two requests for one name within the 3 s coalesce window
BEEP_S = 0.08
A = 16384          # the beep's amplitude: ±16384 survives S16 → Float (/32768) → S16 (×32767, ties to even) exactly

d = tempfile.mkdtemp(prefix="baton-card-latency-")
sounds = os.path.join(d, "sounds"); os.mkdir(sounds)

def write_wav(path, channels, frames):
    with wave.open(path, "wb") as w:
        w.setnchannels(channels); w.setsampwidth(2); w.setframerate(RATE)
        w.writeframes(b"".join(struct.pack(f"<{channels}h", *f) for f in frames))

# Music: mono, so the zone plays it with left == right in every frame (any gain, any ramp).
write_wav(os.path.join(sounds, "music.wav"), 1,
          [(int(0.3 * 32767 * math.sin(2 * math.pi * 480 * i / RATE)),) for i in range(RATE)])
# The announcement: a 1 kHz square wave, +A left and −A right (never 0), so every one of its frames
# has left != right, whatever music is mixed under it. Its first frame is exactly (+A, −A).
half = RATE // 2000
beep = [(A, -A) if (i // half) % 2 == 0 else (-A, A) for i in range(int(RATE * BEEP_S))]
for k in range(NAMES):
    write_wav(os.path.join(sounds, f"beep{k}.wav"), 2, beep)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

api_port = free_port()
record, timing = os.path.join(d, "card.raw"), os.path.join(d, "card.raw.timing")
open(os.path.join(d, "alsa.conf"), "w").write(f"""</usr/share/alsa/alsa.conf>
pcm_type.batontest {{ lib "{card_lib}" }}
pcm.card {{ type batontest rate {RATE} format S16_LE channels 2 period {PERIOD} buffer {BUFFER} record "{record}" timing "{timing}" }}
""")
open(os.path.join(d, "baton.yaml"), "w").write(f"""api: {{listen: 127.0.0.1:{api_port}}}
device: bench
zones:
  kitchen: {{pcm: card, rate: {RATE}, channels: 2, format: S16_LE, period: {period_ms:g}ms, buffer: {buffer_ms:g}ms, clock: device{', render-ahead: true' if render_ahead else ''}}}
alsa-config: {d}/alsa.conf
sounds: {sounds}
""")
# batond is stopped and the files removed in the `finally`, whatever fails (an assert, a timeout,
# Ctrl-C, SIGTERM): a batond left behind would loop the music into the card's record on its port.
daemon = None
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
try:
    log = open(os.path.join(d, "batond.log"), "w")
    # BATOND_NICE (an experiment, not the default): batond's nice value (its SCHED_OTHER threads: the
    # HTTP thread, the control plane; the SCHED_FIFO output thread is not affected).
    batond_nice = int(os.environ.get("BATOND_NICE", "0"))
    daemon = subprocess.Popen([batond, "--config", os.path.join(d, "baton.yaml")], stdout=log, stderr=log,
                              preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, batond_nice))

    def now_ns(): return time.clock_gettime_ns(time.CLOCK_MONOTONIC)

    def get(path):
        c = http.client.HTTPConnection("127.0.0.1", api_port, timeout=5); c.request("GET", path)
        r = c.getresponse(); data = r.read(); c.close(); return r.status, data

    send_gaps = []   # ns between the request time and the return of send(2): the client itself descheduled
    def post(path, body):
        """POSTs `body`; returns the CLOCK_MONOTONIC ns taken right before the request went out (one
        send(2) of the whole request, formatted beforehand, on a connected socket)."""
        request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}").encode()
        s = socket.create_connection(("127.0.0.1", api_port), timeout=5)
        t = now_ns()
        s.sendall(request)
        send_gaps.append(now_ns() - t)
        reply = b""
        while chunk := s.recv(4096): reply += chunk
        s.close()
        assert reply.startswith(b"HTTP/1.1 202"), (path, reply[:200])
        return t

    def status():
        return json.loads(get("/api/v1/status")[1])["zones"][0]

    for _ in range(200):
        try:
            if status()["state"] == "available": break
        except (OSError, ValueError, KeyError, IndexError): pass
        time.sleep(0.05)
    else:
        sys.exit(f"batond did not start: {open(os.path.join(d, 'batond.log')).read()}")

    k = 0
    def announce():
        global k
        t = post("/api/v1/announce", json.dumps({"sound": f"beep{k % NAMES}", "zones": ["kitchen"]}))
        k += 1
        return t

    # Warm-up: each sound once (the library decodes a sound at its first request and caches it).
    for _ in range(NAMES):
        announce(); time.sleep(0.3)
    time.sleep(1.5)

    rng = random.Random(15)
    idle = []   # request times, nothing else playing (the zone has stopped its PCM: checked below)
    for _ in range(n):
        t = announce(); idle.append(t)
        time.sleep(max(0, (t + rng.uniform(1.1, 1.4) * 1e9 - now_ns()) / 1e9))
    post("/api/v1/music/play", '{"sound": "music", "zones": ["kitchen"], "loop": true}')
    time.sleep(1.0)
    music = []  # request times while the looping music plays
    for _ in range(n):
        t = announce(); music.append(t)
        time.sleep(max(0, (t + rng.uniform(0.45, 0.55) * 1e9 - now_ns()) / 1e9))
    time.sleep(0.5)
    zone = status()
    daemon.send_signal(signal.SIGTERM); daemon.wait(timeout=10)

    # The sidecar: per open, the record offset (setup) and its period lines (ns, frames since open).
    opens, events, events3 = [], [], []   # opens: [record base frame, [counts], [ns]]; events: (ns, kind)
    for line in open(timing):
        ns, frames, kind, *rest = line.split()
        ns, frames = int(ns), int(frames)
        if kind == "setup":
            assert rest[:5] == [str(RATE), "2", "S16_LE", str(PERIOD), str(BUFFER)], rest
            opens.append([int(rest[5].split("=")[1]) // 4, [], []])
        elif kind == "period":
            opens[-1][1].append(opens[-1][0] + frames); opens[-1][2].append(ns)
        else:
            events.append((ns, kind)); events3.append((ns, kind, frames))
    counts = [c for o in opens for c in o[1]]    # record frame index just past each period, in time order
    ends = [t for o in opens for t in o[2]]      # the instant the card finished taking that period
    assert counts == sorted(counts) and ends == sorted(ends)

    def consumed_at(frame):
        """(exact, period end): the instant the card took `frame` of the record. The card takes a period
        at a time at the period's end (its pointer granule); within the period it consumes at its rate,
        so the frame itself was taken (frames after it) / rate earlier."""
        i = bisect.bisect_right(counts, frame)
        return ends[i] - (counts[i] - 1 - frame) * 1e9 / RATE, ends[i]

    raw = open(record, "rb").read()
    frames = struct.unpack(f"<{len(raw) // 2}h", raw)
    left, right = frames[0::2], frames[1::2]
    event_times = {kind: [t for t, k2 in events if k2 == kind] for kind in ("prepare", "start", "drained")}

    def first_after(kind, t):
        xs = event_times[kind]; i = bisect.bisect_left(xs, t)
        return xs[i] if i < len(xs) else None

    def last_before(kind, t):
        xs = event_times[kind]; i = bisect.bisect_left(xs, t)
        return xs[i - 1] if i > 0 else None

    def card_stopped(t):
        """The card had played out its buffer and stopped (drained since its last start) at `t`."""
        drained, start = last_before("drained", t), last_before("start", t)
        return drained is not None and (start is None or drained > start)

    def measure(requests):
        out, problems = [], []
        for t in requests:
            # The first period the card finished after the request; the announcement cannot be earlier.
            i = bisect.bisect_left(ends, t)
            if i >= len(ends): problems.append("no period after the request"); continue
            f = max(counts[i] - PERIOD, 1)
            while f < len(left) and left[f] == right[f]: f += 1
            if f >= len(left): problems.append("no announcement frame"); continue
            exact, end = consumed_at(f)
            if left[f - 1] != right[f - 1]: problems.append(f"frame {f}: not an onset"); continue
            if exact < t: problems.append(f"frame {f}: before its request"); continue
            out.append(dict(t=t, frame=f, ms=(exact - t) / 1e6, end_ms=(end - t) / 1e6,
                            first=(left[f], right[f]), prepare=first_after("prepare", t), start=first_after("start", t),
                            exact=exact))
        return out, problems

    def pct(xs, q): xs = sorted(xs); return xs[min(len(xs) - 1, int(q * len(xs)))]
    def summary(xs):
        if not xs: return "none"
        return f"p50 {pct(xs, 0.5):.1f} ms, p99 {pct(xs, 0.99):.1f} ms, max {max(xs):.1f} ms, min {min(xs):.1f} ms (n={len(xs)})"

    idle_m, idle_p = measure(idle)
    music_m, music_p = measure(music)
    # Idle: the zone had stopped its PCM (drained) when the request was sent; with music, it had not.
    stopped = [m for m in idle_m if card_stopped(m["t"])]
    running = [m for m in music_m if not card_stopped(m["t"])]
    exact_first = sum(m["first"] == (A, -A) for m in idle_m)

    print(f"card: {RATE} Hz S16_LE stereo, period {PERIOD} frames ({period_ms:g} ms), buffer {BUFFER} frames "
          f"({buffer_ms:g} ms), pointer granule one period{', render-ahead: true' if render_ahead else ''}; "
          f"target p99 ≤ period + buffer + 5 ms = {target_ms:g} ms")
    print(f"batond nice {batond_nice}; zone after the run: realtime {zone.get('realtime')}, xruns {zone.get('xruns')}, lateCycles {zone.get('lateCycles')}, "
          f"reopens {zone.get('reopens')}; card opens {len(opens)}, prepares {len(event_times['prepare'])}, "
          f"drains {len(event_times['drained'])}")
    print("request → the card consumed the announcement's first frame (exact: its period's end less the frames after it / rate):")
    print(f"  idle (PCM stopped):  {summary([m['ms'] for m in stopped])}")
    print(f"  music playing:       {summary([m['ms'] for m in running])}")
    print("request → end of the period that consumed it (what a period-granule pointer shows; up to one period later):")
    print(f"  idle (PCM stopped):  {summary([m['end_ms'] for m in stopped])}")
    print(f"  music playing:       {summary([m['end_ms'] for m in running])}")
    if stopped:
        print("idle, where the time goes (medians): request → prepare "
              f"{statistics.median((m['prepare'] - m['t']) / 1e6 for m in stopped):.2f} ms, prepare → start "
              f"{statistics.median((m['start'] - m['prepare']) / 1e6 for m in stopped):.2f} ms, start → first frame "
              f"{statistics.median((m['exact'] - m['start']) / 1e6 for m in stopped):.2f} ms")
    # Where the tail's time goes. Idle: request → prepare is the daemon (HTTP, admission, arbiter, slot,
    # wake-up of the output thread); prepare → start the output thread filling the empty buffer (the card
    # starts at the start threshold, a full buffer); start → the first frame, which frames of the new
    # stream came before the announcement. With music: the announcement is mixed by the first render after
    # the grant. The output thread wakes when half the buffer is free, as long as the card then still holds
    # 30 ms (at every WAKE_PERIODS-th period end, T), and renders that many periods at once; what it mixes first is heard at T + LEAD, the buffer less
    # what it renders (the card still holds that much). So latency − LEAD = request → that render, and the
    # period ends between the request and it say how long it waited: below WAKE_PERIODS, for the next
    # wake-up; WAKE_PERIODS or more, it missed one.
    def period_ends_between(a, b): return bisect.bisect_left(ends, b) - bisect.bisect_right(ends, a)
    def stream_start_frame(t):
        i = bisect.bisect_left(prepares, t)
        return prepare_frames[i] if i < len(prepares) else None
    prepares = [t for t, k2, _ in events3 if k2 == "prepare"]
    prepare_frames = [f for _, k2, f in events3 if k2 == "prepare"]
    for m in stopped:
        m["into_stream"] = m["frame"] - opens[-1][0] - (stream_start_frame(m["t"]) or 0)
    print(f"idle, request → prepare (admission and wake-up): {summary([(m['prepare'] - m['t']) / 1e6 for m in stopped])}")
    print("idle, the 5 slowest: " + "; ".join(
        f"{m['ms']:.1f} ms = request → prepare {(m['prepare'] - m['t']) / 1e6:.1f} + prepare → start "
        f"{(m['start'] - m['prepare']) / 1e6:.1f} + start → frame {(m['exact'] - m['start']) / 1e6:.1f} "
        f"(frame {m['into_stream']} of the new stream)"
        for m in sorted(stopped, key=lambda m: -m["ms"])[:5]))
    print(f"idle, the announcement was not the new stream's first frame: {sum(m['into_stream'] != 0 for m in stopped)} of {len(stopped)}")
    # DeviceOutput.wakePeriods: half the buffer, as long as the card still holds 30 ms.
    WAKE_PERIODS = max(1, min(BUFFER // 2, BUFFER - 30 * RATE // 1000) // PERIOD)
    LEAD = BUFFER - WAKE_PERIODS * PERIOD
    if running and render_ahead:
        print("music, rendering ahead: the output takes back what the card has not started playing beyond two periods "
              "and mixes the announcement in from there (no fixed lead to subtract); the 5 slowest: "
              + "; ".join(f"{m['ms']:.1f} ms" for m in sorted(running, key=lambda m: -m["ms"])[:5]))
    elif running:
        render = [m["ms"] - LEAD * 1000 / RATE for m in running]
        def waited(m): return period_ends_between(m["t"], m["exact"] - LEAD * 1e9 / RATE - 1e5)
        print(f"music: request → the render that mixed it (latency − {LEAD * 1000 / RATE:g} ms, the buffer less the "
              f"{WAKE_PERIODS} periods rendered per wake-up): {summary(render)}; period ends between the request and "
              f"that render (below {WAKE_PERIODS}: the next wake-up; {WAKE_PERIODS} or more: it missed one): " +
              ", ".join(f"{k}: {[waited(m) for m in running].count(k)}" for k in sorted({waited(m) for m in running})))
        print("music, the 5 slowest: " + "; ".join(
            f"{m['ms']:.1f} ms ({waited(m)} period ends)" for m in sorted(running, key=lambda m: -m["ms"])[:5]))
    for name, p99 in (("idle", pct([m["ms"] for m in stopped], 0.99) if stopped else None),
                      ("music", pct([m["ms"] for m in running], 0.99) if running else None)):
        if p99 is not None:
            print(f"  {name}: p99 {p99:.1f} ms against {target_ms:g} ms: {'met' if p99 <= target_ms else 'NOT met'}")
    print(f"first announcement frame exactly the sound's first frame ({A}, {-A}), idle: {exact_first} of {len(idle_m)}")
    print(f"idle requests that found the PCM running: {len(idle_m) - len(stopped)}; music requests during a PCM restart: "
          f"{len(music_m) - len(running)}")
    print(f"client: request time → its send(2) returned: max {max(send_gaps) / 1e6:.2f} ms, "
          f"over 1 ms {sum(g > 1_000_000 for g in send_gaps)} of {len(send_gaps)}")
    print(f"not measured: idle {len(idle_p)} {sorted(set(idle_p))[:3]}, music {len(music_p)} {sorted(set(music_p))[:3]}")
    if os.environ.get("KEEP"):
        print(f"files kept in {d}")
finally:
    if daemon is not None and daemon.poll() is None:
        daemon.terminate()
        try: daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill(); daemon.wait()
    if not os.environ.get("KEEP"):
        shutil.rmtree(d, ignore_errors=True)
