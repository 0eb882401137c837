#!/usr/bin/env bash
# Regenerates scripts/batond-symbol-order.txt: the code batond runs, so that the release link puts it
# together (scripts/release-flags.sh passes the file to lld as --symbol-ordering-file; every
# function is in a section of its own: -function-sections, and most of the static Swift runtime's are).
#
# Why: a page of code is resident as soon as one function on it runs, and the kernel maps the 64 KiB
# around every fault with it (fault-around). batond runs about 1 MiB of its 10 MiB of code, scattered
# over all of it, so ~7 MiB of code was resident (docs/PERFORMANCE.md, "What the resident memory is").
#
# How: the release batond runs under valgrind's callgrind (every function executed, however rarely,
# not a sample) through what a speaker does: start, the status page and API, server music from a
# Subsonic server (Supysonic, started here on a port of its own), an announcement over it, volume,
# pause and resume, a reload, the stop. The functions it ran, one symbol a line, are the file.
# A function that was renamed since is simply not found by the linker (and then lands where it
# would anyway): a stale file costs memory, never correctness. Run it after larger changes.
#
#   scripts/text-order.sh           about 2 minutes; installs what is missing (valgrind, the bench deps)
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "text-order: $*" >&2; }

scripts/install-deps.sh --bench
command -v valgrind >/dev/null || apt-get install -y -q valgrind >/dev/null
. scripts/bench/build-batond.sh
. scripts/bench/private-subsonic.sh
build_batond

work="$(mktemp -d /tmp/baton-text-order.XXXXXX)"
chmod 755 "$work"
export BATON_SUBSONIC_ENV="$work/subsonic.env"
batond_pid=""
cleanup() {
  [ -n "$batond_pid" ] && kill -9 "$batond_pid" 2>/dev/null
  scripts/subsonic-server.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
start_private_subsonic
port="$(free_port)"
api="http://127.0.0.1:$port"
echo 'pcm.order_zone { type null }' >"$work/alsa.conf"
cat >"$work/baton.yaml" <<EOF
api: {listen: 127.0.0.1:$port}
zones:
  zone1: {pcm: order_zone, rate: 44100, channels: 2, clock: system}
alsa-config: $work/alsa.conf
sounds: $PWD/config/sounds
state-dir: $work/state
resampler: {music: soxr-hq}
music:
  subsonic: {url: $subsonic_url, user: baton, password-file: $subsonic_pw, format: raw}
EOF

valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no --compress-pos=no \
  --callgrind-out-file="$work/callgrind.out" "$batond" --config "$work/baton.yaml" >"$work/batond.log" 2>&1 &
batond_pid=$!
post() { curl -fsS -X POST -H 'Content-Type: application/json' ${2:+-d "$2"} "$api$1" >/dev/null; }
for _ in $(seq 300); do curl -fs "$api/api/v1/status" >/dev/null && break; sleep 0.2; done
curl -fsS "$api/api/v1/status" >/dev/null || { tail -n 20 "$work/batond.log" >&2; say "batond did not start"; exit 1; }
curl -fsS "$api/" >/dev/null
post /api/v1/music/play '{"search": "Tone", "zones": ["zone1"]}'
sleep 10
post /api/v1/announce '{"sound": "doorbell", "zones": ["zone1"]}'
sleep 5
post /api/v1/zones/zone1/volume '{"volume": 0.5}'
post /api/v1/music/pause
sleep 2
post /api/v1/music/resume
sleep 3
curl -fsS "$api/api/v1/status" >/dev/null
kill -HUP "$batond_pid"
sleep 3
kill -INT "$batond_pid"
wait "$batond_pid" || { tail -n 20 "$work/batond.log" >&2; say "batond did not stop cleanly"; exit 1; }
batond_pid=""

# The functions callgrind saw in batond's own object, each once.
python3 - "$work/callgrind.out" "$batond" scripts/batond-symbol-order.txt <<'PY'
import os, subprocess, sys
out, binary, target = sys.argv[1:]
binary = os.path.realpath(binary)   # callgrind names the object by its real path
obj, seen, order = None, set(), []
for line in open(out, errors="replace"):
    if line.startswith("ob="):
        obj = line[3:].strip()
    elif line.startswith("fn=") and obj and os.path.realpath(obj) == binary:
        name = line[3:].strip().split("'")[0]   # callgrind marks recursion levels with 'N
        if name not in seen:
            seen.add(name)
            order.append(name)
nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
defined = {p[2] for p in (l.split() for l in nm.splitlines()) if len(p) == 3 and p[1] in "tT"}
order = [n for n in order if n in defined]
if len(order) < 1000:
    sys.exit(f"text-order: only {len(order)} functions of batond seen: {target} left as it was")
with open(target, "w") as f:
    f.write("".join(f"{n}\n" for n in order))
print(f"text-order: {len(order)} functions batond ran, written to {target}", file=sys.stderr)
PY
# The link does not see the file change: the next release build relinks without this binary.
rm -f "$(readlink -f "$batond")"
say "from commit $baton_commit; the next release build links batond in this order"
