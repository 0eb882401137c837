"""Soak: batond for MINUTES with 2 zones, looping music, an announcement every 10 s, an RTP call every
2 minutes (ffmpeg) and a config reload (SIGHUP) every 30 s. Passes (exit 0) when:
  - no xrun and no late cycle on the paced zones;
  - RSS grows by less than 1 MiB from the end of the warm-up (1 minute, or a quarter of a short run);
  - every interruption-began has exactly one interruption-ended after it;
  - the state reported each second matches the output file: where status says a source of class X is
    heard in a zone, the file holds X's tone at that zone's audible frame (music 440 Hz, bell 1 kHz;
    a call 880 Hz or silence, as its caller sends), nothing else, and where it says nothing is
    heard, the file is silent.
Usage: soak.py BATOND MINUTES
"""
import array, http.client, json, math, os, shutil, signal, socket, struct, subprocess, sys, tempfile, time, wave

batond, minutes = sys.argv[1], float(sys.argv[2])
duration = minutes * 60
d = tempfile.mkdtemp(prefix="baton-soak-")
sounds = os.path.join(d, "sounds"); os.mkdir(sounds)

def write_wav(path, freq, seconds, amplitude, rate=48000):
    with wave.open(path, "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(amplitude * 32767 * math.sin(2 * math.pi * freq * i / rate)))
                               for i in range(int(rate * seconds))))
write_wav(os.path.join(sounds, "music.wav"), 440, 1.0, 0.3)
write_wav(os.path.join(sounds, "bell.wav"), 1000, 0.6, 0.5)

def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
api, rtp = free_port(), free_port(socket.SOCK_DGRAM)
open(os.path.join(d, "alsa.conf"), "w").write(f"""</usr/share/alsa/alsa.conf>
pcm.s_null {{ type null }}
pcm.s_kitchen {{ type file slave.pcm "s_null" file "{d}/kitchen.wav" format "wav" }}
pcm.s_patio {{ type file slave.pcm "s_null" file "{d}/patio.wav" format "wav" }}
""")
def write_config(coalesce):
    open(os.path.join(d, "baton.yaml"), "w").write(f"""api: {{listen: 127.0.0.1:{api}}}
zones:
  kitchen: {{pcm: s_kitchen, rate: 44100, channels: 2, clock: system}}
  patio: {{pcm: s_patio, rate: 48000, channels: 2, clock: system}}
alsa-config: {d}/alsa.conf
sounds: {sounds}
intercom: {{rtp: {{listen: 127.0.0.1:{rtp}, zones: [all], silence-timeout: 1s}}}}
policy:
  classes:
    music:        {{priority: 10, kind: permanent, same: replace, resume-within: 5m}}
    announcement: {{priority: 50, kind: transient, lower: interrupt, same: queue, during-higher: queue, coalesce: {coalesce}, ttl: 30s, queue-limit: 16}}
    call:         {{priority: 90, kind: transient, lower: interrupt, same: reject, during-higher: reject}}
""")
write_config("3s")
daemon = subprocess.Popen([batond, "--config", os.path.join(d, "baton.yaml")], stderr=open(os.path.join(d, "log"), "w"))

def request(method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", api, timeout=10)
    c.request(method, path, body, {"Content-Type": "application/json"} if method != "GET" else {})
    r = c.getresponse(); data = r.read(); c.close()
    return r.status, data
for _ in range(300):
    try:
        if request("GET", "/api/v1/status")[0] == 200: break
    except OSError: pass
    time.sleep(0.05)
time.sleep(0.5)
def rss_kib():
    for line in open(f"/proc/{daemon.pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])

assert request("POST", "/api/v1/music/play", '{"sound": "music", "loop": true}')[0] == 202
start = time.monotonic()
warmup = min(60.0, duration / 4)
samples, rss_after_warmup, next_bell, next_call, next_reload, reloads, call = [], None, start + 5, start + 30, start + 15, 0, None
while time.monotonic() - start < duration:
    now = time.monotonic()
    if now >= next_bell:
        request("POST", "/api/v1/announce", '{"sound": "bell"}'); next_bell += 10
    if now >= next_call:
        call = subprocess.Popen(["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-f", "lavfi", "-i",
                                 "sine=frequency=880:sample_rate=48000:duration=3", "-c:a", "libopus", "-b:a", "64k",
                                 "-f", "rtp", f"rtp://127.0.0.1:{rtp}"])
        next_call += 120
    if now >= next_reload:
        reloads += 1
        write_config("3s" if reloads % 2 == 0 else "2s")  # a policy change each time
        daemon.send_signal(signal.SIGHUP); next_reload += 30
    if rss_after_warmup is None and now - start >= warmup:
        rss_after_warmup = rss_kib()
    status = json.loads(request("GET", "/api/v1/status")[1])
    samples.append(status)
    time.sleep(max(0, 1 - (time.monotonic() - now)))
if call: call.wait()
rss_end = rss_kib()
events = json.loads(request("GET", "/api/v1/events/recent")[1])
final = json.loads(request("GET", "/api/v1/status")[1])
daemon.send_signal(signal.SIGTERM); daemon.wait(timeout=10)

problems = []
for z in final["zones"]:
    if z["xruns"] or z["lateCycles"]:
        problems.append(f"zone {z['name']}: {z['xruns']} xruns, {z['lateCycles']} late cycles")
growth = rss_end - rss_after_warmup
if growth >= 1024: problems.append(f"RSS grew by {growth} KiB after the warm-up")
open_began = {}
for e in events:
    if e["type"] == "interruption-began": open_began[e["source"]] = open_began.get(e["source"], 0) + 1
    if e["type"] == "interruption-ended":
        if open_began.get(e["source"], 0) != 1: problems.append(f"interruption-ended without one began: {e['source']} (seq {e['seq']})")
        open_began[e["source"]] = 0
unmatched = {s: n for s, n in open_began.items() if n}
if unmatched: problems.append(f"began without ended: {unmatched}")
reloaded = sum(1 for e in events if e["type"] == "reloaded")
if reloaded < reloads: problems.append(f"{reloads} SIGHUPs but {reloaded} reloaded events")

tones = {"music": 440, "announcement": 1000, "call": 880}
def channel(path):
    with wave.open(path) as w:
        a = array.array("h"); a.frombytes(w.readframes(w.getnframes())); return a[0::2], w.getframerate()
def level(x, at, n, freq, rate):
    if at < 0 or at + n > len(x): return None
    re = im = 0.0
    for i in range(n):
        h = 0.5 - 0.5 * math.cos(2 * math.pi * i / (n - 1)); v = x[at + i] / 32768 * h
        re += v * math.cos(2 * math.pi * freq * i / rate); im -= v * math.sin(2 * math.pi * freq * i / rate)
    return 2 * math.sqrt(re * re + im * im) / (n / 2)
# Frames within 60 ms of a decision are transitions (a period plus a ramp each side): not judged.
boundaries = {}
for e in events:
    for zone, frame in (e.get("zoneFrames") or {}).items(): boundaries.setdefault(zone, []).append(frame)
checked = mismatches = 0
for zone in ("kitchen", "patio"):
    x, rate = channel(os.path.join(d, f"{zone}.wav"))
    n = rate // 50  # 20 ms windows
    near = sorted(boundaries.get(zone, []))
    for s in samples:
        z = next(z for z in s["zones"] if z["name"] == zone)
        at = z["audibleFrame"] - n
        if any(abs(b - at) < rate * 0.06 or abs(b - (at + n)) < rate * 0.06 for b in near): continue
        heard = [next((src["class"] for src in s["sources"] if src["id"] == a), None) for a in z["audible"]]
        want = tones.get(heard[0]) if heard else None
        levels = {c: level(x, at, n, f, rate) for c, f in tones.items()}
        if None in levels.values(): continue
        checked += 1
        if want is None:
            ok = all(v < 0.01 for v in levels.values())
        elif heard[0] == "call":
            # A call holds the zone while its caller is silent too (the jitter buffer's start, the
            # silence timeout): nothing else may be heard; the call's tone when it sends one.
            ok = levels["music"] < 0.05 and levels["announcement"] < 0.05
        else:
            ok = levels[heard[0]] > 0.1 and all(v < 0.05 for c, v in levels.items() if c != heard[0])
        if not ok:
            mismatches += 1
            if mismatches <= 5: problems.append(f"{zone} at frame {at}: status says {heard or 'nothing'}, file has " + ", ".join(f"{c} {v:.3f}" for c, v in levels.items()))
if checked < len(samples): problems.append(f"only {checked} of {2 * len(samples)} state samples could be checked")
print(f"soak {minutes:g} min: {len(samples)} state samples, {checked} checked against the files, {mismatches} mismatches; "
      f"{sum(1 for e in events if e['type'] == 'interruption-began')} interruptions; {reloads} reloads; "
      f"RSS {rss_after_warmup} KiB after warm-up → {rss_end} KiB ({growth:+d} KiB); "
      f"xruns {sum(z['xruns'] for z in final['zones'])}, late cycles {sum(z['lateCycles'] for z in final['zones'])}")
for p in problems: print("FAIL:", p)
shutil.rmtree(d)
sys.exit(1 if problems else 0)
