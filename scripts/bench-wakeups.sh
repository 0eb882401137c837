#!/usr/bin/env bash
# What a timer wake-up costs on this machine, with no audio work (issue 15, "what costs what"): a thread
# that only sleeps to CLOCK_MONOTONIC deadlines every PERIOD — as batond's output thread does on a
# `clock: system` zone — measured by its own schedstat run time, beside the same with 16 and 64 KiB
# touched per wake-up (cold caches after the sleep), SCHED_FIFO and SCHED_OTHER, at 10, 20 and 40 ms.
# The floor under every figure of docs/PERFORMANCE.md that counts wake-ups: a thread waking 100 times
# a second costs at least 100 × this. Round-robin, REPS rounds (default 3); median (min–max).
#
#   scripts/bench-wakeups.sh [SECONDS]     per case, default 10
#
# Builds its probe (scripts/bench/wakeup-cost.c, cc) each run and prints the commit it was built from.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
reps="${REPS:-3}"
dir="$(mktemp -d /tmp/baton-wakeups.XXXXXX)"
trap 'rm -rf "$dir"' EXIT
cc -O2 -Wall -o "$dir/wakeup-cost" scripts/bench/wakeup-cost.c
commit="$(git rev-parse --short HEAD)"
[ -n "$(git status --porcelain -- scripts/bench/wakeup-cost.c)" ] && commit="$commit-dirty"
echo "bench-wakeups: scripts/bench/wakeup-cost.c at $commit; $(nproc) CPUs, $(uname -r), clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown); load $(cut -d' ' -f1-3 /proc/loadavg)"
grep -q hypervisor /proc/cpuinfo && echo "bench-wakeups: a virtual machine (the CPU flags say hypervisor): a timer wake-up traps to the host"
cases=()
for period in 10000 20000 40000; do
  for fifo in 1 0; do
    for touch in 0 16384 65536; do cases+=("$period $fifo $touch"); done
  done
done
out="$dir/results"
for rep in $(seq "$reps"); do
  for c in "${cases[@]}"; do
    set -- $c
    "$dir/wakeup-cost" "$1" "$seconds" "$2" "$3" >>"$out"
  done
  echo "bench-wakeups: round $rep/$reps done" >&2
done
python3 - "$out" "$reps" "$seconds" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    period, fifo, touch, us, cpu, slices = line.split()
    rows.setdefault((int(period), int(fifo), int(touch)), []).append((float(us), float(cpu), float(slices)))
def spread(xs, f):
    return f"{f.format(statistics.median(xs))} ({f.format(min(xs))}–{f.format(max(xs))})"
print(f"\n{sys.argv[2]} rounds of {sys.argv[3]} s per case, round-robin; median (min–max)\n")
print("| period | policy | touched per wake-up | µs of CPU per wake-up | CPU s/s | wake-ups/s |")
print("|---|---|---|---|---|---|")
for (period, fifo, touch), v in sorted(rows.items()):
    print(f"| {period // 1000} ms | {'FIFO' if fifo else 'OTHER'} | {touch // 1024} KiB | "
          f"{spread([x[0] for x in v], '{:.1f}')} | {spread([x[1] for x in v], '{:.5f}')} | "
          f"{spread([x[2] for x in v], '{:.0f}')} |")
PY
echo "command: ${REPS:+REPS=$REPS }scripts/bench-wakeups.sh $seconds; load $(cut -d' ' -f1-3 /proc/loadavg) at the end; commit $commit"
