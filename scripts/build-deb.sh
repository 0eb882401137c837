#!/usr/bin/env bash
# Builds baton_<version>_<arch>.deb: batond and batonctl (release, Swift runtime linked statically),
# the systemd unit, the default /etc/baton/baton.yaml, the sounds and the board profiles, the man
# pages (docs/man/*.md through pandoc), the Debian changelog, copyright and lintian overrides, and
# any ALSA plugin the build made (libasound_module_pcm_*.so).
#
#   scripts/build-deb.sh [--debug-binaries] [OUTPUT_DIR]      (default: dist/)
#
# --debug-binaries packages swift build's debug output instead of a release build: quick, for testing
# the packaging only (the binaries need the toolchain's Swift runtime; the version ends in +debug).
#
# Environment: BATON_VERSION (default 0.1.0~git<date>.<commit>-1), BATON_MAINTAINER, BATON_SCRATCH
# (SwiftPM scratch path, default .build), BATON_BIN_DIR (package the binaries and plugins from there
# instead of building). Needs swift, dpkg-deb, dpkg-shlibdeps and dpkg-parsechangelog (dpkg-dev) and
# pandoc: `scripts/install-deps.sh --package`. No root (the package is built with root ownership by
# dpkg-deb --root-owner-group). See docs/PACKAGING.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

debug_binaries=""
if [ "${1:-}" = "--debug-binaries" ]; then
    debug_binaries=1
    shift
fi
out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
scratch=${BATON_SCRATCH:-.build}
arch=$(dpkg --print-architecture)
if [ -n "${BATON_VERSION:-}" ]; then
    version=$BATON_VERSION
elif git rev-parse --git-dir >/dev/null 2>&1; then
    # A Debian revision (-1): the packaging is kept apart from the upstream version, so the changelog
    # is changelog.Debian.gz and a later 0.1.0-1 sorts above every snapshot.
    version="0.1.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short HEAD)-1"
else
    version="0.1.0-1"
fi
# A package of the debug build says so in its version (dpkg -l shows it).
[ -n "$debug_binaries" ] && [ -z "${BATON_VERSION:-}" ] && version="$version+debug"
upstream=${version%-*}
for tool in dpkg-deb dpkg-parsechangelog dpkg-shlibdeps pandoc gzip; do
    command -v "$tool" >/dev/null 2>&1 || { echo "baton: $tool is missing: run scripts/install-deps.sh --package" >&2; exit 1; }
done

# swift build with its progress lines filtered out; fails when the build fails (a failed build must
# not package the binary a previous build left).
quiet_build() {
    local log status=0
    log=$(mktemp "${TMPDIR:-/tmp}/baton-build.XXXXXX")
    swift build "$@" > "$log" 2>&1 || status=$?
    grep -vE '^\[[0-9]+/[0-9]+\]|^Building for|^Build of product|^Compiling|^Write |use of .mktemp. is dangerous' "$log" >&2 || true
    rm -f "$log"
    [ "$status" -eq 0 ] || echo "baton: swift build $* failed" >&2
    return "$status"
}

shlibdeps_options=()
if [ -n "$debug_binaries" ]; then
    # --debug-binaries: swift build's debug output (what the test suite already has), built here if
    # needed. These link the toolchain's Swift runtime dynamically: the package tests the packaging
    # (scripts/test-deb.sh copies the runtime into its root) but does not run on a user's system.
    for product in batond batonctl; do
        quiet_build --scratch-path "$scratch" --product "$product" || exit 1
    done
    BATON_BIN_DIR=$(swift build --scratch-path "$scratch" --show-bin-path)
fi
if [ -n "${BATON_BIN_DIR:-}" ]; then
    # Prebuilt binaries (the test suite packages its debug build this way, without a release build).
    bin=$BATON_BIN_DIR
    if grep -q 'libswiftCore\.so' <<<"$(ldd "$bin/batond" 2>/dev/null)"; then
        echo "baton: warning: $bin/batond links the Swift runtime dynamically; this package will not run without it" >&2
        shlibdeps_options=(--ignore-missing-info)
    fi
else
    echo "baton: building release binaries (static Swift runtime) in $scratch" >&2
    # The executables, and the ALSA plugin products (dynamic libraries named asound_module_pcm_*) if
    # Package.swift declares any.
    products=(batond batonctl)
    # The one release build (scripts/release-flags.sh): static Swift runtime, full RELRO (-z now).
    . scripts/release-flags.sh
    # python3 reads the package's JSON (install-deps.sh --package installs it); a failure here is
    # an error, not a package without its plugin.
    listed=$(swift package dump-package 2>/dev/null | python3 -c '
import json, sys
for p in json.load(sys.stdin).get("products", []):
    # The virtual test card (batontest) is for the tests only, never shipped.
    if p["name"].startswith("asound_module_pcm_") and p["name"] != "asound_module_pcm_batontest" and "library" in p.get("type", {}):
        print(p["name"])') || { echo "baton: cannot list the ALSA plugin products (swift package dump-package | python3)" >&2; exit 1; }
    products+=($listed)
    for product in "${products[@]}"; do
        quiet_build "${release_flags[@]}" --scratch-path "$scratch" --product "$product" || exit 1
    done
    bin=$(swift build "${release_flags[@]}" --scratch-path "$scratch" --show-bin-path)
fi
for product in batond batonctl; do
    [ -x "$bin/$product" ] || { echo "baton: $bin/$product was not built" >&2; exit 1; }
done

stage=$(mktemp -d "${TMPDIR:-/tmp}/baton-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
pkg=$stage/baton_${version}_${arch}

install -d -m 0755 "$pkg/DEBIAN"
install -D -m 0755 "$bin/batond" "$pkg/usr/bin/batond"
install -D -m 0755 "$bin/batonctl" "$pkg/usr/bin/batonctl"
# As dh_strip does: no symbols, no .comment/.note sections (compiler version strings).
strip_options=(--strip-unneeded --remove-section=.comment --remove-section=.note)
strip "${strip_options[@]}" "$pkg/usr/bin/batond" "$pkg/usr/bin/batonctl"
install -D -m 0644 packaging/baton.service "$pkg/lib/systemd/system/baton.service"
install -D -m 0644 packaging/baton.yaml "$pkg/etc/baton/baton.yaml"
install -d -m 0755 "$pkg/usr/share/baton/sounds" "$pkg/usr/share/baton/boards"
install -m 0644 config/sounds/*.wav config/sounds/*.opus "$pkg/usr/share/baton/sounds/"
install -m 0644 boards/*.yaml "$pkg/usr/share/baton/boards/"
install -d -m 0755 "$pkg/usr/share/doc/baton"
install -m 0644 README.md docs/*.md "$pkg/usr/share/doc/baton/"
install -m 0644 packaging/debian/copyright "$pkg/usr/share/doc/baton/copyright"
install -D -m 0644 packaging/debian/lintian-overrides "$pkg/usr/share/lintian/overrides/baton"

# The Debian changelog. A build whose version is not the newest entry's (a git snapshot) gets that
# entry relabelled with its version and a line naming the commit, so the installed changelog always
# describes the package it is in. A native version (no "-revision") calls it changelog.gz.
changelog=$stage/changelog
top=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
if [ "$top" = "$version" ]; then
    cp packaging/debian/changelog "$changelog"
else
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    awk -v v="$version" -v top="$top" -v c="$commit" '
        NR == 1 { sub(/\([^)]*\)/, "(" v ")"); print; next }
        NR == 2 { print; print "  * Snapshot of git commit " c ", before " top "."; next }
        { print }' packaging/debian/changelog > "$changelog"
fi
case $version in
    *-*) changelog_name=changelog.Debian.gz ;;
    *) changelog_name=changelog.gz ;;
esac
gzip -9n < "$changelog" > "$pkg/usr/share/doc/baton/$changelog_name"
chmod 0644 "$pkg/usr/share/doc/baton/$changelog_name"

# Man pages: docs/man/NAME.SECTION.md → /usr/share/man/manSECTION/NAME.SECTION.gz.
man_date=$(git log -1 --format=%cd --date=format:%Y-%m-%d 2>/dev/null || date -u +%Y-%m-%d)
for source in docs/man/*.md; do
    page=$(basename "$source" .md)
    section=${page##*.}
    install -d -m 0755 "$pkg/usr/share/man/man$section"
    pandoc --standalone --from markdown-smart --to man -M footer="baton $upstream" -M date="$man_date" "$source" \
        | gzip -9n > "$pkg/usr/share/man/man$section/$page.gz"
    chmod 0644 "$pkg/usr/share/man/man$section/$page.gz"
done

# ALSA plugins (libasound_module_pcm_NAME.so) built next to the binaries go where alsa-lib looks for
# them: /usr/lib/<multiarch triplet>/alsa-lib/. None built: nothing is added.
plugins=()
for plugin in "$bin"/libasound_module_pcm_*.so; do
    # The tests' virtual sound card is never shipped.
    [ -f "$plugin" ] && [ "$(basename "$plugin")" != libasound_module_pcm_batontest.so ] && plugins+=("$plugin")
done
if [ ${#plugins[@]} -gt 0 ]; then
    triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
    install -d -m 0755 "$pkg/usr/lib/$triplet/alsa-lib"
    for plugin in "${plugins[@]}"; do
        install -m 0644 "$plugin" "$pkg/usr/lib/$triplet/alsa-lib/"
        strip "${strip_options[@]}" "$pkg/usr/lib/$triplet/alsa-lib/$(basename "$plugin")"
    done
fi
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$pkg/DEBIAN/"
echo /etc/baton/baton.yaml > "$pkg/DEBIAN/conffiles"

# Depends: the shared libraries the binaries really link, with the versions their symbols need. No
# fixed list to fall back on: one that lagged behind the links (it lacked libmosquitto1 and
# libgpiod2) made a package that installs and whose batond then cannot start.
objects=("$pkg/usr/bin/batond" "$pkg/usr/bin/batonctl")
for plugin in ${plugins[@]+"${plugins[@]}"}; do objects+=("$pkg/usr/lib/$triplet/alsa-lib/$(basename "$plugin")"); done
shl=$stage/shlibdeps
mkdir -p "$shl/debian"
printf 'Source: baton\n\nPackage: baton\nArchitecture: any\n' > "$shl/debian/control"
if ! line=$(cd "$shl" && dpkg-shlibdeps -O ${shlibdeps_options[@]+"${shlibdeps_options[@]}"} "${objects[@]}" 2>"$shl/log"); then
    cat "$shl/log" >&2
    echo "baton: dpkg-shlibdeps failed on ${objects[*]}: the package's Depends cannot be computed" >&2
    exit 1
fi
rm -rf "$shl"
depends=${line#shlibs:Depends=}
if [ -z "$depends" ] || [ "$depends" = "$line" ]; then
    echo "baton: dpkg-shlibdeps printed no shlibs:Depends line (got: '$line')" >&2; exit 1
fi
# Packed relative relocations (DT_RELR, scripts/release-flags.sh) need glibc 2.36: a version
# requirement (GLIBC_ABI_DT_RELR) without a symbol, which dpkg-shlibdeps does not see.
for object in "${objects[@]}"; do
    readelf -V "$object" 2>/dev/null | grep -q GLIBC_ABI_DT_RELR || continue
    libc=$(grep -oE 'libc6( \(>= [^)]*\))?' <<<"$depends" | head -n 1)
    have=$(sed -nE 's/.*>= ([^)]*)\).*/\1/p' <<<"$libc")
    if [ -z "$have" ] || dpkg --compare-versions "$have" lt 2.36; then
        depends=$(sed -E 's/libc6( \(>= [^)]*\))?/libc6 (>= 2.36)/' <<<"$depends")
    fi
    break
done
# postinst creates the system user with useradd and usermod (passwd is required, not essential);
# the unit's ExecReload runs /bin/kill (procps is important, not required: a minimal system lacks it).
depends="$depends, passwd, procps"

# md5sums of every file but the conffile (dpkg keeps the conffiles' own sums), as dh_md5sums writes it.
(cd "$pkg" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | LC_ALL=C sort -z \
    | xargs -0 md5sum) > "$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/md5sums"

size=$(du -k -s --exclude=DEBIAN "$pkg" | cut -f1)
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: baton
Version: $version
Architecture: $arch
Maintainer: ${BATON_MAINTAINER:-Baton maintainers <baton@users.noreply.github.com>}
Installed-Size: $size
Depends: $depends
Recommends: alsa-utils, espeak-ng
Section: sound
Priority: optional
Description: multi-zone audio router for Raspberry Pi speakers
 Baton owns a speaker's ALSA outputs (zones) and decides by priority which
 source each zone plays: music, announcements such as a doorbell chime, calls.
 Interrupted music is told so and resumes from the sample where it was cut.
 .
 This package holds the daemon batond (a systemd service, configured in
 /etc/baton/baton.yaml), the command-line client batonctl, announcement
 sounds and board profiles for common Raspberry Pi DACs.
CONTROL

deb=$out/baton_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"
