#!/usr/bin/env bash
# Builds Baton's fuzzers (fuzz/, a package of its own that the normal build never touches) and runs
# each for SECONDS (default 60), one after another; then prints, per fuzzer, the executions, the
# coverage libFuzzer reached (cov: edges, ft: features) and whether it crashed.
#
#   scripts/fuzz.sh [SECONDS] [FUZZER...]      e.g. scripts/fuzz.sh 120 FuzzRTP FuzzAPI
#
# Seeds are read from fuzz/corpus/<fuzzer>/ (kept small, in git); what libFuzzer finds goes to
# fuzz/.build/work/<fuzzer>/ (kept between runs, not in git). A crashing input is saved as
# fuzz/crashes/<fuzzer>-crash-<sha1> (also timeout-, oom-); replay it with
#   ASAN_OPTIONS=detect_leaks=0 fuzz/.build/release/<fuzzer> fuzz/crashes/<file>
# Exit status: 0 when no fuzzer crashed.
set -uo pipefail
cd "$(dirname "$0")/../fuzz"

seconds=${1:-60}
shift $(( $# > 0 ? 1 : 0 ))
fuzzers=("$@")
[ ${#fuzzers[@]} -eq 0 ] && fuzzers=(FuzzConfig FuzzSubsonic FuzzRTP FuzzAPI FuzzDecoders)

# -sanitize reaches every Swift module of the build (Baton's too), so the code under test is
# instrumented; -enable-testing lets the fuzzers `@testable import` the few internal entry points.
swift build -c release -j 2 -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing || exit 1

# Leak checking is off: LeakSanitizer cannot follow the Swift runtime's weak-reference side tables
# (their address is kept shifted inside the object's reference count) and reports each as a leak.
export ASAN_OPTIONS=detect_leaks=0
mkdir -p crashes .build/work
results=()
failed=0
for fuzzer in "${fuzzers[@]}"; do
  work=.build/work/$fuzzer
  log=.build/work/$fuzzer.log
  mkdir -p "$work"
  dict=()
  [ -f "dict/$fuzzer.dict" ] && dict=("-dict=dict/$fuzzer.dict")
  echo "fuzz: $fuzzer for ${seconds}s (log: fuzz/$log)"
  ".build/release/$fuzzer" "$work" "corpus/$fuzzer" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
    -artifact_prefix="crashes/$fuzzer-" -print_final_stats=1 >"$log" 2>&1
  status=$?
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  coverage=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  corpus=$(find "$work" -type f | wc -l)
  if [ "$status" -eq 0 ]; then
    verdict="no crash"
  else
    verdict="CRASHED (exit $status): $(grep -oE 'Test unit written to [^ ]*' "$log" | tail -1 | sed 's/Test unit written to /fuzz\//')"
    failed=1
  fi
  results+=("$(printf '%-13s %8ss %12s execs  %-20s corpus %5s  %s' "$fuzzer" "$seconds" "${execs:-?}" \
    "${coverage:-cov: ?}" "$corpus" "$verdict")")
done
echo
printf '%s\n' "${results[@]}"
exit "$failed"
