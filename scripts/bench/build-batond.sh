# Sourced by the scripts that measure batond (bench-realtime.sh, measure-latency.sh, measure-music.sh,
# soak.sh): `build_batond` always builds the release binary it then measures (nice'd, so it yields to
# others' work; an up-to-date build costs a few seconds) with the package's options
# (scripts/release-flags.sh: static Swift runtime, -z now), never reuses a stale one, sets $batond to it
# and $baton_commit to the commit it was built from, and prints that on stderr.
# The commit is `git rev-parse --short HEAD`, with `-dirty` when the files the binary is built from
# (Sources/, Package.swift, Package.resolved, scripts/release-flags.sh, scripts/batond-symbol-order.txt)
# differ from it, untracked files there included.

# `release_build DIR WHAT`: builds batond in DIR with the package's options as DIR's tree defines
# them (nice'd); on failure prints the build's tail and exits.
release_build() {
  local dir="$1" what="$2" log
  log="$(mktemp)"
  echo "$(basename "$0"): building $what, nice'd" >&2
  if ! (cd "$dir" && . scripts/release-flags.sh && nice -n 10 swift build "${release_flags[@]}" --product batond) >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    rm -f "$log"
    echo "$(basename "$0"): the release build of $what failed" >&2
    exit 1
  fi
  rm -f "$log"
}

build_batond() {
  . scripts/release-flags.sh
  release_build "$PWD" "the release batond (swift build ${release_flags[*]} --product batond)"
  batond="$PWD/.build/release/batond"
  baton_commit="$(git rev-parse --short HEAD)"
  if [ -n "$(git status --porcelain -- Sources Package.swift Package.resolved scripts/release-flags.sh scripts/batond-symbol-order.txt 2>/dev/null)" ]; then
    baton_commit="$baton_commit-dirty"
  fi
  echo "$(basename "$0"): measuring $batond, built from commit $baton_commit" >&2
}

# `build_baseline_batond REV DIR`: the same build of another revision, for a before/after in one run:
# a detached git worktree at DIR checked out at REV (kept, so its build is incremental next time),
# built there with the package's options as that revision defines them. Sets $baseline_batond and
# $baseline_commit.
build_baseline_batond() {
  local rev="$1" dir="$2"
  baseline_commit="$(git rev-parse --short "$rev^{commit}")" || { echo "$(basename "$0"): no revision $rev" >&2; exit 2; }
  if [ -d "$dir/.git" ] || [ -f "$dir/.git" ]; then
    git -C "$dir" checkout -q --detach "$baseline_commit"
  else
    mkdir -p "$(dirname "$dir")"
    git worktree prune
    git worktree add -q --detach "$dir" "$baseline_commit"
  fi
  release_build "$dir" "the release batond of $baseline_commit in $dir"
  baseline_batond="$dir/.build/release/batond"
  echo "$(basename "$0"): baseline $baseline_batond, built from commit $baseline_commit" >&2
}
