#!/usr/bin/env bash
# Installs the Debian packages Baton needs to build, run and test. Idempotent: installs only what
# is missing, so a second run costs a dpkg query. Needs root (or sudo) when something is missing.
set -euo pipefail

build=(pkg-config libasound2-dev libsamplerate0-dev libsoxr-dev libopus-dev libopusfile-dev
       libyaml-dev libmicrohttpd-dev libcurl4-openssl-dev libflac-dev libmpg123-dev libsystemd-dev libmosquitto-dev libgpiod-dev)
# Tools the daemon uses at run time (aplay to inspect PCMs; espeak-ng speaks text announcements).
runtime=(alsa-utils espeak-ng)
# Only the test suite needs these.
# (ffmpeg makes the Subsonic test library and transcodes for the test server; python3-venv hosts it;
# snapserver and snapclient for the Snapcast zone tests, which run their own on loopback ports;
# chromium-driver lets Selenium drive chromium in scripts/test-webapp.sh; stress-ng loads every core
# next to batond in the soak; systemd's systemd-analyze checks the unit file.)
# (mpd, mpc, mpv + mpv-mpris, shairport-sync, pulseaudio-utils and dbus play through the baton PCM in ExternalTests;
# python3 too, through alsa-lib with ctypes: a non-blocking drain, NonBlockingDrainTests.)
# (curl: ExternalTests and the scripts call the control API with it.)
# (iproute2: the intercom's multicast tests run `ip` in a network namespace of their own.)
testing=(curl sox ffmpeg python3 python3-venv chromium chromium-driver openssl mosquitto mosquitto-clients snapserver snapclient
         mpd mpc mpv mpv-mpris shairport-sync pulseaudio pulseaudio-utils pulseaudio-module-raop avahi-daemon dbus
         stress-ng systemd iproute2)

# scripts/build-deb.sh: dpkg-shlibdeps, dpkg-parsechangelog and dpkg-architecture (dpkg-dev), pandoc for
# the man pages, python3 to list the ALSA plugin products. The test suite builds a package too, so --test
# includes them.
package=(dpkg-dev pandoc python3)
# scripts/test-deb.sh: a Debian 12 root to install the package into, and lintian to check it.
package_test=(debootstrap lintian)

# The demo of scripts/run.sh runs a local Subsonic server (Supysonic in a venv, library made by ffmpeg).
demo=(ffmpeg python3-venv)

# The benchmarks against other players (scripts/bench-realtime.sh, scripts/bench-pipelines.sh): MPD
# (+ mpc), mpv, GStreamer (souphttpsrc is in -good, opusdec and audioresample in -base, alsasink in
# -alsa), ffmpeg (makes the stream), GNU time, python3-venv for the Supysonic server, and gdb (names
# batond's threads by their entry functions in bench-realtime.sh), mosquitto, alsa-utils (aplay),
# snapserver and snapclient for the `batond idle listening`, `batond external aplay` and `batond idle
# snapcast` cases. curl calls the API and fetches the streams (also in measure-music.sh).
bench=(curl mpd mpc mpv gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-alsa
       ffmpeg time python3-venv gdb mosquitto alsa-utils snapserver snapclient)

#   scripts/install-deps.sh [--test] [--demo] [--bench] [--package] [--package-test]   (several may be given)
want=("${build[@]}" "${runtime[@]}")
for mode in "$@"; do
  case "$mode" in
    --test) want+=("${testing[@]}" "${package[@]}") ;;
    --demo) want+=("${demo[@]}") ;;
    --bench) want+=("${bench[@]}") ;;
    --package) want+=("${package[@]}") ;;
    --package-test) want+=("${package[@]}" "${package_test[@]}") ;;
    *) echo "usage: scripts/install-deps.sh [--test] [--demo] [--bench] [--package] [--package-test]" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "baton: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# On a fresh image unattended-upgrades holds the apt and dpkg locks at first boot: wait for them (up
# to 10 minutes) rather than fail at once with "Could not get lock". DPkg::Lock::Timeout covers the
# dpkg lock of `install`; `update`'s lists lock it does not (apt 2.6), so `update` is tried again
# every 10 s while that lock is held, and three times in all for other failures (a mirror's hiccup).
lock=(-o DPkg::Lock::Timeout=600)
update_log="$(mktemp)"
trap 'rm -f "$update_log"' EXIT
failures=0
deadline=$((SECONDS + 600))
# In the C locale: the lock's message is matched, and apt translates it (sudo keeps LANG).
until $sudo env LC_ALL=C apt-get "${lock[@]}" update -qq 2>"$update_log"; do
  cat "$update_log" >&2
  if grep -q "Could not get lock" "$update_log"; then
    [ $SECONDS -lt $deadline ] || { echo "baton: apt's lists lock still held after 10 minutes" >&2; exit 1; }
    echo "baton: another apt holds the lock (unattended-upgrades at first boot?): waiting" >&2
  else
    failures=$((failures + 1))
    [ $failures -lt 3 ] || { echo "baton: apt-get update failed 3 times (see above)" >&2; exit 1; }
    echo "baton: apt-get update failed; trying again in 10 s" >&2
  fi
  sleep 10
done
cat "$update_log" >&2
$sudo apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
  || { echo "baton: apt-get install ${missing[*]} failed (see above)" >&2; exit 1; }

# The tests and benchmarks start their own servers and players, on loopback ports of their own. These
# packages also start and enable system services that outlive them: an AirPlay target and an open
# snapserver on the local network, an MPD or snapclient playing into the card batond uses. On a
# machine run by systemd, those this script just installed are stopped and disabled again.
if [ -d /run/systemd/system ]; then
  units=()
  for p in "${missing[@]}"; do
    case "$p" in
      shairport-sync|snapserver|snapclient|mosquitto) units+=("$p.service") ;;
      mpd) units+=(mpd.service mpd.socket) ;;
      avahi-daemon) units+=(avahi-daemon.service avahi-daemon.socket) ;;
    esac
  done
  if [ ${#units[@]} -gt 0 ]; then
    echo "baton: stopping and disabling ${units[*]} (installed for the tests, which start their own)" >&2
    $sudo systemctl disable --now "${units[@]}" >/dev/null 2>&1 || true
  fi
fi
