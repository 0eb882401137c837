#!/usr/bin/env bash
# Installs the baton .deb into a fresh Debian 12 root and checks it the way a user would meet it:
# apt resolves its Depends from the mirror, the maintainer scripts run, batond --check accepts the
# shipped /etc/baton/baton.yaml, batonctl answers, purge cleans up; and lintian passes with no error
# or warning beyond the commented overrides in packaging/debian/lintian-overrides.
#
#   scripts/test-deb.sh [DEB]
#   scripts/test-deb.sh --debug-binaries
#   scripts/test-deb.sh --mirror DIR    (prints the bookworm mirror the apt sources under DIR give)
#
# Without DEB it builds one with scripts/build-deb.sh: the release build (unless BATON_BIN_DIR names
# prebuilt binaries), or with --debug-binaries the debug build, which tests the packaging in seconds
# instead of minutes but not the static release link (see docs/PACKAGING.md). Root only (debootstrap,
# chroot). Installs what it needs with scripts/install-deps.sh --package-test. The mirror is the one
# this machine's apt sources use for bookworm. Environment: BATON_DEBOOTSTRAP_CACHE (downloaded .debs
# and the debootstrapped root kept for the next run, default /var/cache/baton-test-deb),
# BATON_ROOT_CACHE_DAYS (how long that root is reused, default 7; 0: debootstrap every time),
# BATON_KEEP_ROOT=1 (leave the root for a look). Prints one line per check and `N passed, N failed`; exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# bookworm_mirror DIR: the URI the apt sources under DIR (/etc/apt) give for bookworm, one-line or
# deb822 format; Debian's own (deb.debian.org, then another …/debian that is not the Raspberry Pi
# archive) before the rest. Raspberry Pi OS lists both deb.debian.org and archive.raspberrypi.com for
# bookworm: both URIs went to debootstrap as one, with a newline in it.
bookworm_mirror() {
    local dir=$1 f
    {
        for f in "$dir"/sources.list "$dir"/sources.list.d/*.list; do
            [ -f "$f" ] && sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && $3 == "bookworm" { print $2 }'
        done
        for f in "$dir"/sources.list.d/*.sources; do
            [ -f "$f" ] && awk 'BEGIN { RS = ""; FS = "\n" } {
                uri = ""; suite = 0; deb = 0; enabled = 1
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/) { split($i, a, " "); uri = a[2] }
                    if ($i ~ /^Suites:/ && ($i " ") ~ / bookworm /) suite = 1
                    if ($i ~ /^Types:/ && ($i " ") ~ / deb /) deb = 1
                    if ($i ~ /^Enabled: *no/) enabled = 0
                }
                if (suite && deb && enabled && uri != "") print uri }' "$f"
        done
    } | awk '{ rank = 2; if ($0 ~ /deb\.debian\.org/) rank = 0; else if ($0 ~ /\/debian\/?$/ && $0 !~ /raspberrypi/) rank = 1
               print rank, NR, $0 }' | sort -n -k1,1 -k2,2 | head -1 | cut -d' ' -f3-
}
# `scripts/test-deb.sh --mirror DIR` prints the mirror chosen from DIR's sources (for the tests).
if [ "${1:-}" = "--mirror" ]; then
    bookworm_mirror "${2:-/etc/apt}"
    exit
fi

[ "$(id -u)" -eq 0 ] || { echo "baton: test-deb.sh needs root (debootstrap, chroot)" >&2; exit 1; }
scripts/install-deps.sh --package-test || exit 1

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS  $1"; }
fail() { failed=$((failed + 1)); echo "FAIL  $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/      /'; }
# check NAME COMMAND...: passes when COMMAND exits 0; shows its output when it does not.
check() {
    local name=$1 out
    shift
    if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$out"; fi
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}

work=$(mktemp -d "${TMPDIR:-/tmp}/baton-test-deb.XXXXXX")
root=$work/root
proc_mounted=""
cleanup() {
    [ -n "$proc_mounted" ] && umount "$root/proc" 2>/dev/null
    if [ "${BATON_KEEP_ROOT:-}" = 1 ]; then
        echo "baton: the root is kept in $root" >&2
    else
        # rm -rf only when nothing is mounted below (a killed debootstrap may leave its /proc, /sys).
        if grep -q " $work/" /proc/mounts; then
            echo "baton: something is still mounted below $work; not deleting it" >&2
        else
            rm -rf "$work"
        fi
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The package.
build_options=()
deb=${1:-}
if [ "$deb" = "--debug-binaries" ]; then
    build_options=(--debug-binaries)
    deb=""
fi
if [ -z "$deb" ]; then
    deb=$(scripts/build-deb.sh ${build_options[@]+"${build_options[@]}"} "$work/dist") || { fail "build-deb.sh builds the package"; finish; }
    pass "build-deb.sh builds $(basename "$deb")"
fi
[ -f "$deb" ] || { fail "the package $deb exists"; finish; }
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")

# A package of the debug build (BATON_BIN_DIR=.build/debug): its binaries link the toolchain's Swift
# runtime (libswiftCore.so and others under the toolchain, found through a RUNPATH), which a user's
# system does not have. Such a package checks the packaging, not the release link: the runtime is
# copied into the root at the same paths, and lintian's error about that RUNPATH is expected.
mkdir -p "$work/peek"
dpkg-deb -x "$deb" "$work/peek"
swift_runtime=$(ldd "$work/peek/usr/bin/batond" "$work/peek/usr/bin/batonctl" 2>/dev/null \
    | awk '$1 ~ /^libswiftCore\.so/ && $3 ~ /^\// { print $3 }' | head -1)
toolchain_libs=${swift_runtime%/*}
[ -n "$swift_runtime" ] && echo "NOTE  a debug-build package: batond links $swift_runtime; not a package to ship"

# lintian, on the host (it reads the package's own overrides). Errors and warnings fail the check;
# overridden tags are listed so a reader sees what was excused (each is explained in the file).
lint=$(lintian --display-info --show-overrides "$deb" 2>&1 | grep -v '^running with root privileges')
problems=$(printf '%s\n' "$lint" | grep -E '^[EW]: ' || true)
if [ -n "$swift_runtime" ]; then
    expected="custom-library-search-path RUNPATH $toolchain_libs "
    printf '%s\n' "$problems" | grep -F "$expected" | sed 's/^/NOTE  expected for a debug build: /'
    problems=$(printf '%s\n' "$problems" | grep -vF "$expected" | grep . || true)
fi
if [ -z "$problems" ]; then
    pass "lintian: no error or warning ($(printf '%s\n' "$lint" | grep -c '^O: ') overridden, $(printf '%s\n' "$lint" | grep -c '^I: ') info)"
else
    fail "lintian: no error or warning" "$problems"
fi
printf '%s\n' "$lint" | grep -E '^[OI]: ' | sed 's/^/      /'

mirror=$(bookworm_mirror /etc/apt)
[ -n "$mirror" ] || { fail "a bookworm mirror in /etc/apt/sources.list*"; finish; }

# A fresh Debian 12 root: minbase is what every Debian system has (Priority: required). debootstrap's
# result is kept as a tar file in the cache for BATON_ROOT_CACHE_DAYS (default 7; 0: always
# debootstrap) and unpacked anew for each run, so every run still starts from an untouched root.
cache=${BATON_DEBOOTSTRAP_CACHE:-/var/cache/baton-test-deb}
days=${BATON_ROOT_CACHE_DAYS:-7}
mkdir -p "$cache"
base=$cache/bookworm-minbase-$(printf '%s' "$mirror" | md5sum | cut -c1-8).tar
started=$(date +%s)
if [ "$days" -gt 0 ] && [ -f "$base" ] && [ -n "$(find "$base" -mtime "-$days")" ]; then
    mkdir -p "$root"
    if tar -C "$root" --numeric-owner -xpf "$base"; then
        pass "a fresh Debian 12 root: the minbase debootstrap of $(date -r "$base" +%F) unpacked ($(( $(date +%s) - started )) s)"
    else
        fail "unpacking $base"
        finish
    fi
elif debootstrap --variant=minbase --cache-dir="$cache" bookworm "$root" "$mirror" > "$work/debootstrap.log" 2>&1; then
    pass "debootstrap --variant=minbase bookworm ($(( $(date +%s) - started )) s)"
    if [ "$days" -gt 0 ]; then
        tar -C "$root" --numeric-owner -cf "$base.new" . && mv "$base.new" "$base" || rm -f "$base.new"
    fi
else
    fail "debootstrap --variant=minbase bookworm" "$(tail -20 "$work/debootstrap.log")"
    finish
fi
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
# apt inside the root resolves names with the host's resolver configuration.
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# Install it as a user would: apt-get install ./baton_*.deb, Depends from the mirror.
cp "$deb" "$root/tmp/"
name=$(basename "$deb")
if in_root apt-get update -qq > "$work/apt.log" 2>&1 \
    && in_root apt-get install -y -q --no-install-recommends "/tmp/$name" >> "$work/apt.log" 2>&1; then
    pass "apt-get install ./$name (Depends from the mirror)"
else
    fail "apt-get install ./$name" "$(tail -25 "$work/apt.log")"
    finish
fi
if [ -n "$swift_runtime" ]; then
    # Whatever the binaries link that the installed root lacks: the toolchain's runtime libraries.
    for lib in $(ldd "$work/peek/usr/bin/batond" "$work/peek/usr/bin/batonctl" | awk '$3 ~ /^\// { print $3 }' | sort -u); do
        [ -e "$root$lib" ] || install -D -m 0644 "$lib" "$root$lib"
    done
fi
check "dpkg says baton is installed" sh -c "chroot '$root' dpkg-query -W -f='\${Status}' baton | grep -qx 'install ok installed'"
check "batond and batonctl find every library (ldd)" sh -c "! chroot '$root' ldd /usr/bin/batond /usr/bin/batonctl | grep 'not found'"

# The Swift runtime reads the program's arguments from /proc/self/cmdline: without /proc both
# binaries see none (batond would check config/baton.yaml, batonctl would ask for a command). A real
# system always has /proc; the root gets it only for these runs.
mount -t proc proc "$root/proc" && proc_mounted=1
out=$(in_root batond --config /etc/baton/baton.yaml --check 2>&1)
if [ $? -eq 0 ] && [ "$out" = "/etc/baton/baton.yaml: ok (1 zones)" ]; then pass "batond --check accepts /etc/baton/baton.yaml"; else fail "batond --check accepts /etc/baton/baton.yaml" "$out"; fi
help=$(in_root batonctl --help 2>&1)
if [ $? -eq 0 ] && grep -q '^usage: batonctl' <<<"$help"; then pass "batonctl --help"; else fail "batonctl --help" "$help"; fi
out=$(in_root batonctl status 2>&1)
status=$?
if [ $status -eq 3 ] && grep -q "batond is not running" <<<"$out"; then pass "batonctl status without batond: exit 3, says so"; else fail "batonctl status without batond: exit 3 (got $status)" "$out"; fi

# What postinst did.
check "postinst created the system user baton in group audio" sh -c "chroot '$root' id -nG baton | grep -qw audio && chroot '$root' getent passwd baton | grep -q ':/var/lib/baton:/usr/sbin/nologin\$'"
check "/var/lib/baton belongs to baton" sh -c "[ \"\$(chroot '$root' stat -c %U:%G /var/lib/baton)\" = baton:baton ]"
check "baton.service is enabled (deb-systemd-helper)" test -L "$root/etc/systemd/system/multi-user.target.wants/baton.service"
check "/etc/baton/baton.yaml is a conffile" sh -c "chroot '$root' dpkg-query -W -f='\${Conffiles}' baton | grep -q '/etc/baton/baton.yaml'"

# The documentation Debian users expect.
for page in man1/batonctl.1 man5/baton.yaml.5 man8/batond.8; do
    check "man page /usr/share/man/$page.gz" sh -c "gzip -t '$root/usr/share/man/$page.gz' && zcat '$root/usr/share/man/$page.gz' | grep -q '^\\.SH NAME'"
done
check "changelog and copyright in /usr/share/doc/baton" sh -c "gzip -t $root/usr/share/doc/baton/changelog*.gz && grep -q '^License: Expat' '$root/usr/share/doc/baton/copyright'"
# The man pages describe what the binaries take: every batonctl command, every batond option.
# Here-strings, not `printf | grep -q`: under pipefail, grep -q leaving at its first match makes
# printf's next 4 KiB write die of SIGPIPE and the check fail (11 in 2000 here; CI saw it).
man1=$(zcat "$root/usr/share/man/man1/batonctl.1.gz")
commands=$(printf '%s\n' "$help" | awk '/^commands:/ { on = 1; next } /^$/ { on = 0 } on { print $1 }')
missing=""
for command in $commands; do
    grep -qF "\\f[B]$command\\f[R]" <<<"$man1" || missing="$missing $command"
done
if [ -z "$commands" ]; then fail "batonctl(1) describes every command of batonctl --help" "no commands in: $help"
elif [ -z "$missing" ]; then pass "batonctl(1) describes every command of batonctl --help ($(echo $commands | wc -w))"
else fail "batonctl(1) describes every command" "missing:$missing"; fi
man8=$(zcat "$root/usr/share/man/man8/batond.8.gz")
usage=$(in_root batond --help 2>&1)
options=$(printf '%s\n' "$usage" | grep '^usage: batond' | grep -o -- '--[a-z-]*' | sort -u)
missing=""
for option in $options; do
    grep -qF -- "\\f[B]$option\\f[R]" <<<"$man8" || missing="$missing $option"
done
if [ -z "$options" ]; then fail "batond(8) describes every option of batond --help" "no options in: $usage"
elif [ -z "$missing" ]; then pass "batond(8) describes every option of batond --help ($(echo $options))"
else fail "batond(8) describes every option" "missing:$missing"; fi
umount "$root/proc" && proc_mounted=""

# Purge: the unit's enablement, the state directory and the conffile go; the user stays.
if in_root apt-get purge -y -q baton > "$work/purge.log" 2>&1; then pass "apt-get purge baton"; else fail "apt-get purge baton" "$(tail -15 "$work/purge.log")"; fi
check "purge removed the enablement, /var/lib/baton and /etc/baton" sh -c "[ ! -e '$root/etc/systemd/system/multi-user.target.wants/baton.service' ] && [ ! -e '$root/var/lib/baton' ] && [ ! -e '$root/etc/baton' ]"

# Installed again where an administrator made the group baton before the user (the API token
# file's group): postinst's useradd --user-group refused, and the package was left unconfigured.
if in_root userdel baton > "$work/again.log" 2>&1 && in_root groupadd --system baton >> "$work/again.log" 2>&1 \
    && in_root apt-get install -y -q --no-install-recommends "/tmp/$name" >> "$work/again.log" 2>&1; then
    check "installed again with a group baton made first: the user is in it" sh -c "[ \"\$(chroot '$root' id -gn baton)\" = baton ]"
else
    fail "installed again with a group baton made first" "$(tail -15 "$work/again.log")"
fi

finish
