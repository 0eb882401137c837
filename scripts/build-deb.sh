#!/usr/bin/env bash
# Builds baton_<version>_<arch>.deb: batond and batonctl (release, Swift runtime linked statically),
# the systemd unit, the default /etc/baton/baton.yaml, the sounds and the board profiles.
#
#   scripts/build-deb.sh [OUTPUT_DIR]      (default: dist/)
#
# Environment: BATON_VERSION (default 0.1.0~git<date>.<commit>), BATON_MAINTAINER, BATON_SCRATCH (SwiftPM scratch
# path, default .build), BATON_BIN_DIR (package batond and batonctl from there instead of building). Needs swift, dpkg-deb and dpkg-shlibdeps (dpkg-dev); no root (the package
# is built with root ownership by dpkg-deb --root-owner-group). See docs/PACKAGING.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
scratch=${BATON_SCRATCH:-.build}
arch=$(dpkg --print-architecture)
if [ -n "${BATON_VERSION:-}" ]; then
    version=$BATON_VERSION
elif git rev-parse --git-dir >/dev/null 2>&1; then
    version="0.1.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short HEAD)"
else
    version="0.1.0"
fi

shlibdeps_options=()
if [ -n "${BATON_BIN_DIR:-}" ]; then
    # Prebuilt binaries (the test suite packages its debug build this way, without a release build).
    bin=$BATON_BIN_DIR
    if ldd "$bin/batond" 2>/dev/null | grep -q 'libswiftCore\.so'; then
        echo "baton: warning: $bin/batond links the Swift runtime dynamically; this package will not run without it" >&2
        shlibdeps_options=(--ignore-missing-info)
    fi
else
    echo "baton: building release binaries (static Swift runtime) in $scratch" >&2
    for product in batond batonctl; do
        swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product "$product" 2>&1 \
            | grep -vE '^\[[0-9]+/[0-9]+\]|^Building for|^Build of product|^Compiling|^Write |use of .mktemp. is dangerous' >&2 || true
    done
    bin=$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)
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
strip --strip-unneeded "$pkg/usr/bin/batond" "$pkg/usr/bin/batonctl"
install -D -m 0644 packaging/baton.service "$pkg/lib/systemd/system/baton.service"
install -D -m 0644 packaging/baton.yaml "$pkg/etc/baton/baton.yaml"
install -d -m 0755 "$pkg/usr/share/baton/sounds" "$pkg/usr/share/baton/boards"
install -m 0644 config/sounds/*.wav config/sounds/*.opus "$pkg/usr/share/baton/sounds/"
install -m 0644 boards/*.yaml "$pkg/usr/share/baton/boards/"
install -d -m 0755 "$pkg/usr/share/doc/baton"
install -m 0644 README.md docs/*.md "$pkg/usr/share/doc/baton/"
install -m 0644 packaging/debian/copyright "$pkg/usr/share/doc/baton/copyright"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$pkg/DEBIAN/"
echo /etc/baton/baton.yaml > "$pkg/DEBIAN/conffiles"

# Depends: the shared libraries the binaries really link, with the versions their symbols need.
fallback="libasound2, libsamplerate0, libsoxr0, libopus0, libopusfile0, libyaml-0-2, libmicrohttpd12, libcurl4, libflac12, libmpg123-0, libsystemd0, libc6"
depends=""
if command -v dpkg-shlibdeps >/dev/null 2>&1; then
    shl=$stage/shlibdeps
    mkdir -p "$shl/debian"
    printf 'Source: baton\n\nPackage: baton\nArchitecture: any\n' > "$shl/debian/control"
    if line=$(cd "$shl" && dpkg-shlibdeps -O ${shlibdeps_options[@]+"${shlibdeps_options[@]}"} "$pkg/usr/bin/batond" "$pkg/usr/bin/batonctl" 2>"$shl/log"); then
        depends=${line#shlibs:Depends=}
    else
        echo "baton: dpkg-shlibdeps failed, using the fixed list:" >&2
        cat "$shl/log" >&2
    fi
    rm -rf "$shl"
fi
depends=${depends:-$fallback}

size=$(du -k -s --exclude=DEBIAN "$pkg" | cut -f1)
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: baton
Version: $version
Architecture: $arch
Maintainer: ${BATON_MAINTAINER:-Baton developers <baton@localhost>}
Installed-Size: $size
Depends: $depends
Recommends: alsa-utils
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
