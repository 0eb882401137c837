"""Announcement latency from the output file. See scripts/measure-latency.sh."""
import array, http.client, math, os, shutil, signal, socket, statistics, struct, subprocess, sys, tempfile, threading, time, wave

batond, n = sys.argv[1], int(sys.argv[2])
RATE = 44100
d = tempfile.mkdtemp(prefix="baton-latency-")
sounds = os.path.join(d, "sounds"); os.mkdir(sounds)

def write_wav(path, freq, seconds, amplitude):
    frames = int(RATE * seconds)
    with wave.open(path, "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(RATE)
        w.writeframes(b"".join(struct.pack("<h", int(amplitude * 32767 * math.sin(2 * math.pi * freq * i / RATE))) for i in range(frames)))

write_wav(os.path.join(sounds, "music.wav"), 441, 1.0, 0.3)          # 441 Hz: a whole number of periods per second
for k in range(8):                                                     # 8 names: no two within the 3 s coalesce window
    write_wav(os.path.join(sounds, f"beep{k}.wav"), 3000, 0.08, 0.5)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

api_port, mqtt_port = free_port(), free_port()
# RENDER_AHEAD=1: the zone renders ahead into a 120 ms clocked buffer (docs/CONFIG.md).
AHEAD = ", buffer: 120ms, render-ahead: true" if os.environ.get("RENDER_AHEAD") == "1" else ""
out = os.path.join(d, "kitchen.wav")
open(os.path.join(d, "alsa.conf"), "w").write(f"""</usr/share/alsa/alsa.conf>
pcm.l_null {{ type null }}
pcm.l_kitchen {{ type file slave.pcm "l_null" file "{out}" format "wav" }}
""")
open(os.path.join(d, "mosquitto.conf"), "w").write(f"listener {mqtt_port} 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n")
open(os.path.join(d, "baton.yaml"), "w").write(f"""api: {{listen: 127.0.0.1:{api_port}}}
device: bench
zones:
  kitchen: {{pcm: l_kitchen, rate: {RATE}, channels: 2, clock: system{AHEAD}}}
alsa-config: {d}/alsa.conf
sounds: {sounds}
mqtt: {{broker: "mqtt://127.0.0.1:{mqtt_port}", discovery: false}}
""")
# Everything started below is stopped in the `finally`, whatever fails (an assert, a timeout, Ctrl-C,
# SIGTERM): a batond left behind would loop the music into a WAV (~630 MB an hour) on its ports.
started = []      # processes, in start order
stop = threading.Event()
watcher = None
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

def stop_all():
    stop.set()
    if watcher is not None: watcher.join()
    for proc in reversed(started):
        if proc.poll() is not None: continue
        proc.terminate()
        try: proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill(); proc.wait()

try:
    broker = subprocess.Popen(["/usr/sbin/mosquitto", "-c", os.path.join(d, "mosquitto.conf")], stderr=subprocess.DEVNULL)
    started.append(broker)
    time.sleep(0.3)
    daemon = subprocess.Popen([batond, "--config", os.path.join(d, "baton.yaml")], stderr=open(os.path.join(d, "log"), "w"))
    started.append(daemon)

    def post(path, body):
        c = http.client.HTTPConnection("127.0.0.1", api_port, timeout=5)
        c.request("POST", path, body, {"Content-Type": "application/json"})
        r = c.getresponse(); data = r.read(); c.close()
        return r.status, data

    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", api_port, timeout=1); c.request("GET", "/api/v1/status")
            if c.getresponse().status == 200: break
        except OSError: pass
        time.sleep(0.05)
    time.sleep(1.5)  # MQTT connects, the zone runs

    growth = []
    def watch():
        while not stop.is_set():
            try: growth.append((time.monotonic(), os.stat(out).st_size))
            except FileNotFoundError: pass
            time.sleep(0.002)
    watcher = threading.Thread(target=watch); watcher.start()

    status, _ = post("/api/v1/music/play", '{"sound": "music", "zones": ["kitchen"], "loop": true}')
    assert status == 202, status
    time.sleep(1.0)
    pub = subprocess.Popen(["/usr/bin/mosquitto_pub", "-h", "127.0.0.1", "-p", str(mqtt_port), "-t", "baton/bench/announce", "-l", "-q", "1"],
                           stdin=subprocess.PIPE, text=True)
    started.append(pub)
    time.sleep(0.5)
    triggers = []  # (path, monotonic time of the request)
    for i in range(2 * n):
        via = "http" if i % 2 == 0 else "mqtt"
        body = f'{{"sound": "beep{i % 8}", "zones": ["kitchen"]}}'
        t = time.monotonic()
        if via == "http":
            status, data = post("/api/v1/announce", body)
            assert status == 202, (status, data)
        else:
            pub.stdin.write(body + "\n"); pub.stdin.flush()
        triggers.append((via, t))
        time.sleep(max(0, t + 0.45 - time.monotonic()))
    time.sleep(0.5)
    pub.stdin.close(); pub.wait()
    stop.set(); watcher.join()
    daemon.send_signal(signal.SIGTERM); daemon.wait(timeout=10)
    broker.terminate(); broker.wait()

    # frames(t): a least-squares line through the file's growth (the zone is paced: it is linear).
    pts = [(t, (size - 44) // 4) for t, size in growth if size > 44]
    mt = statistics.fmean(t for t, _ in pts); mf = statistics.fmean(f for _, f in pts)
    slope = sum((t - mt) * (f - mf) for t, f in pts) / sum((t - mt) ** 2 for t, _ in pts)
    def frame_at(t): return mf + (t - mt) * slope
    residual = max(abs(f - frame_at(t)) for t, f in pts)

    with wave.open(out) as w:
        raw = w.readframes(w.getnframes())
    a = array.array("h"); a.frombytes(raw); left = a[0::2]
    # The beep's 3 kHz has a sample-to-sample step ~11x the music's: a step over 0.1 FS marks it.
    steep = 0.1 * 32768
    def beep_onset(start):
        for i in range(max(1, start), len(left)):
            if abs(left[i] - left[i - 1]) > steep: return i
        return None
    lat = {"http": [], "mqtt": []}; gaps = []; missed = 0
    for via, t in triggers:
        f0 = int(frame_at(t))
        on = beep_onset(f0)
        if on is None or on - f0 > RATE: missed += 1; continue
        lat[via].append((on - f0) / RATE * 1000)
        # The last beep sample: the last steep step within 100 ms; then the first non-zero music sample.
        last = on
        for i in range(on, min(on + int(0.1 * RATE), len(left))):
            if abs(left[i] - left[i - 1]) > steep: last = i
        first = next((i for i in range(last + 1, min(last + RATE, len(left))) if left[i] != 0 and abs(left[i] - left[i - 1]) <= steep), None)
        if first is not None: gaps.append((first - last) / RATE * 1000)

    def summary(xs):
        xs = sorted(xs)
        if not xs: return "none"
        p = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]
        return f"p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms, max {xs[-1]:.1f} ms (n={len(xs)})"
    print(f"frame↔time fit: {slope:.1f} frames/s (zone rate {RATE}), worst residual {residual / RATE * 1000:.1f} ms")
    print(f"HTTP announce → first announcement sample: {summary(lat['http'])}")
    print(f"MQTT announce → first announcement sample: {summary(lat['mqtt'])}")
    print(f"last announcement sample → first resumed music sample: {summary(gaps)}")
    print(f"missed (no onset found within 1 s): {missed}")
finally:
    stop_all()
    shutil.rmtree(d, ignore_errors=True)
