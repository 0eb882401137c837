#!/usr/bin/env bash
# A real Subsonic server on 127.0.0.1 for the Subsonic tests: Supysonic 0.7.9 (PyPI) behind waitress,
# serving a test library generated on the spot with ffmpeg. See docs/SUBSONIC.md.
#
#   scripts/subsonic-server.sh start                 install (cached venv), generate, start; idempotent
#   scripts/subsonic-server.sh stop                  kill the server, remove its data dir
#   scripts/subsonic-server.sh status                print the env file; exit 0 when it answers ping
#   scripts/subsonic-server.sh restart-server-only   kill and restart the server process, same data/IDs
#
# Environment: BATON_SUBSONIC_PORT (default 4533), BATON_CACHE (default ~/.cache/baton, holds the venv),
# BATON_SUBSONIC_ENV (default /tmp/baton-subsonic.env: the file the tests read),
# BATON_SUBSONIC_LIBRARY (`test`, the default; `demo`: the album scripts/run.sh plays; or the absolute
# path of a directory whose files are copied in as the library, as scripts/bench-realtime.sh does).
# Needs: python3-venv and ffmpeg (apt, both in scripts/install-deps.sh --test); PyPI for the first start.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
helpers="$here/subsonic"
port="${BATON_SUBSONIC_PORT:-4533}"
cache="${BATON_CACHE:-${HOME:-/root}/.cache/baton}"
venv="$cache/supysonic-venv"
pointer="${BATON_SUBSONIC_ENV:-/tmp/baton-subsonic.env}"
user="baton"

say() { echo "subsonic-server: $*" >&2; }
die() { say "$*"; exit 1; }

# Reads KEY from an env file (KEY=VALUE lines).
env_get() { sed -n "s/^$2=//p" "$1" 2>/dev/null | head -n 1; }

# Whether process $1 runs (a zombie does not: without a reaping init, a killed server lingers as one).
alive() {
  [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] || return 1
  local state
  state="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

ping_ok() { "$venv/bin/python" "$helpers/ping.py" "$1" "$2" "$3"; }

# What a running server was made by: a hash of this script, the pinned requirements, the WAV tagger
# and the library asked for (for a directory: its files' names, sizes and times). Written into the
# env file; a start finds a server with another one (left by a killed run of an older script, or
# asked for another library) and replaces it rather than reuse it.
server_version() {
  local library="${BATON_SUBSONIC_LIBRARY:-test}"
  {
    cat "$here/subsonic-server.sh" "$helpers/requirements.txt" "$helpers/tag_wav.py"
    echo "library=$library"
    case "$library" in /*) [ -d "$library" ] && find "$library" -type f -printf '%P %s %T@\n' | sort ;; esac
  } | sha256sum | cut -c1-16
}

# The venv, reused when it holds exactly the pinned requirements.
ensure_venv() {
  local stamp="$venv/.baton-requirements"
  if [ -x "$venv/bin/supysonic-server" ] && cmp -s "$helpers/requirements.txt" "$stamp"; then return; fi
  say "installing Supysonic into $venv (about 20 s, once)"
  command -v ffmpeg >/dev/null || die "ffmpeg is missing: run scripts/install-deps.sh --test"
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv" || die "python3 -m venv failed: run scripts/install-deps.sh --test (python3-venv)"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$helpers/requirements.txt" \
    || die "pip install failed"
  "$venv/bin/pip" check -q >/dev/null || die "the pinned requirements are inconsistent: $("$venv/bin/pip" check)"
  cp "$helpers/requirements.txt" "$stamp"
}

# The library's generators run in the background, several at once. `bg WHAT COMMAND...` starts one;
# `wait_bg` waits for each and dies naming those that failed (ffmpeg has said why on stderr): a bare
# `wait` returns 0 whatever they did, and a library missing tracks would be scanned and served.
bg_pids=(); bg_what=()
bg() { local what="$1"; shift; "$@" & bg_pids+=("$!"); bg_what+=("$what"); }
wait_bg() {
  local i failed=()
  for i in "${!bg_pids[@]}"; do wait "${bg_pids[$i]}" || failed+=("${bg_what[$i]}"); done
  bg_pids=(); bg_what=()
  [ ${#failed[@]} -eq 0 ] || die "generating the library failed for: ${failed[*]}"
}

# sine FILE FREQ RATE SECONDS CODEC-ARGS...: a steady stereo sine.
sine() {
  local out="$1" freq="$2" rate="$3" secs="$4"; shift 4
  ffmpeg -v error -nostdin -y -f lavfi -i "sine=frequency=$freq:sample_rate=$rate:duration=$secs" \
    -ac 2 "$@" "$out"
}

# The test library. Tones: one steady sine per track, each a different format and frequency.
# Gapless: one continuous 500 Hz sine cut at sample-exact boundaries into three FLAC tracks.
# Large: a raw WAV bigger than the loopback socket buffers, for kill-mid-transfer tests.
# Steps: a tone that rises by 100 Hz every second, for seek tests.
# Silence: digital zeros, for the silence alarm.
make_library() {
  local music="$1" a="Baton Test"
  mkdir -p "$music/Tones" "$music/Gapless" "$music/Large"
  local t="$music/Tones"
  bg "Tone 440 FLAC" sine "$t/01 Tone 440.flac" 440 44100 20 -c:a flac \
    -metadata artist="$a" -metadata album_artist="$a" -metadata album=Tones -metadata title="Tone 440 FLAC" -metadata track=1
  bg "Tone 550 MP3" sine "$t/02 Tone 550.mp3" 550 44100 20 -c:a libmp3lame -b:a 192k -id3v2_version 3 \
    -metadata artist="$a" -metadata album_artist="$a" -metadata album=Tones -metadata title="Tone 550 MP3" -metadata track=2
  bg "Tone 660 Opus" sine "$t/03 Tone 660.opus" 660 48000 20 -c:a libopus -b:a 128k \
    -metadata artist="$a" -metadata album_artist="$a" -metadata album=Tones -metadata title="Tone 660 Opus" -metadata track=3
  bg "Tone 770 WAV" sine "$t/04 Tone 770.wav" 770 22050 20 -c:a pcm_s16le -map_metadata -1
  bg "Tone 880 WAV" sine "$t/05 Tone 880.wav" 880 48000 20 -c:a pcm_s16le -map_metadata -1
  bg "Long Tone 330" sine "$music/Large/01 Long Tone 330.wav" 330 44100 72 -c:a pcm_s16le -map_metadata -1
  # Steps: 1 s of 300 Hz, then 400, 500, … 1200 Hz: where a seek lands can be heard.
  mkdir -p "$music/Steps"
  bg "Steps" ffmpeg -v error -nostdin -y -f lavfi \
    -i "aevalsrc=0.4*sin(2*PI*(300+100*floor(t))*t):s=44100:d=10" -ac 2 -c:a flac \
    -metadata artist="$a" -metadata album_artist="$a" -metadata album=Steps -metadata title="Steps" -metadata track=1 \
    "$music/Steps/01 Steps.flac"
  # Silence: 10 s of digital zeros (a track that decodes to silence, for silent-while-playing).
  mkdir -p "$music/Silence"
  bg "Digital Silence" ffmpeg -v error -nostdin -y -f lavfi -i "anullsrc=r=44100:cl=stereo:d=10" -c:a flac \
    -metadata artist="$a" -metadata album_artist="$a" -metadata album=Silence -metadata title="Digital Silence" \
    -metadata track=1 "$music/Silence/01 Digital Silence.flac"
  # Gapless: 15 s at 44100 Hz, cut at samples 220537 and 441048 (deliberately not on a frame boundary).
  local whole="$music/.gapless-whole.wav"
  bg "the gapless source" sine "$whole" 500 44100 15 -c:a pcm_s16le
  wait_bg
  local cuts=(0 220537 441048 661500) i
  for i in 1 2 3; do
    bg "Gapless Part $i" ffmpeg -v error -nostdin -y -i "$whole" \
      -af "atrim=start_sample=${cuts[$((i-1))]}:end_sample=${cuts[$i]},asetpts=N/SR/TB" -c:a flac \
      -metadata artist="$a" -metadata album_artist="$a" -metadata album=Gapless \
      -metadata title="Gapless Part $i" -metadata track="$i" "$music/Gapless/0$i Gapless Part $i.flac"
  done
  wait_bg
  rm -f "$whole"
  local py="$venv/bin/python"
  "$py" "$helpers/tag_wav.py" "$t/04 Tone 770.wav" "$a" Tones "Tone 770 WAV 22050" 4
  "$py" "$helpers/tag_wav.py" "$t/05 Tone 880.wav" "$a" Tones "Tone 880 WAV 48000" 5
  "$py" "$helpers/tag_wav.py" "$music/Large/01 Long Tone 330.wav" "$a" Large "Long Tone 330" 1
}

# The demo library (BATON_SUBSONIC_LIBRARY=demo, used by scripts/run.sh): one album of three
# short arpeggio pieces, pleasant enough to hear the doorbell interrupt them.
# arpeggio FILE TITLE TRACK ROOT-HZ THIRD-RATIO
arpeggio() {
  local out="$1" title="$2" track="$3" b="$4" r="$5"
  local n="mod(floor(4*t),4)"
  ffmpeg -v error -nostdin -y -f lavfi \
    -i "aevalsrc='0.22*sin(PI*mod(4*t,1))*sin(2*PI*$b*if(eq($n,0),1,if(eq($n,1),$r,if(eq($n,2),1.5,2)))*t)+0.08*sin(2*PI*$b/2*t)':s=44100:d=40" \
    -ac 2 -c:a flac -metadata artist="Baton" -metadata album_artist="Baton" -metadata album="Baton Demo" \
    -metadata title="$title" -metadata track="$track" "$out"
}
make_demo_library() {
  local d="$1/Baton Demo"
  mkdir -p "$d"
  bg "Morning" arpeggio "$d/01 Morning.flac" "Morning (C major)" 1 261.63 1.25
  bg "Doorstep" arpeggio "$d/02 Doorstep.flac" "Doorstep (A minor)" 2 220.00 1.2
  bg "Evening" arpeggio "$d/03 Evening.flac" "Evening (F major)" 3 174.61 1.25
  wait_bg
}

write_config() {
  local data="$1"
  cat >"$data/supysonic.conf" <<EOF
[base]
database_uri = sqlite:///$data/supysonic.db

[webapp]
cache_dir = $data/cache
mount_webui = no
mount_api = yes
log_file = $data/supysonic.log
log_level = WARNING

[daemon]
run_watcher = no
socket = $data/daemon.sock

[transcoding]
transcoder = ffmpeg -v error -nostdin -i %srcpath -map 0:a:0 -map_metadata -1 -b:a %outratek -f %outfmt -
decoder = ffmpeg -v error -nostdin -i %srcpath -map 0:a:0 -map_metadata -1 -f wav -
encoder_opus = sh -c 'r=%outrate; if [ "\$r" -gt 256 ]; then r=256; fi; exec ffmpeg -v error -nostdin -f wav -i - -c:a libopus -b:a "\$r"k -ar 48000 -f opus -'

[mimetypes]
opus = audio/ogg
EOF
}

# Runs supysonic-cli inside the data dir (it reads ./supysonic.conf; HOME keeps ~/.supysonic out).
cli() { (cd "$data" && HOME="$data/home" "$venv/bin/supysonic-cli" "$@"); }

# Starts the server process for data dir $data; sets $pid. Clears the transcode cache first.
launch() {
  rm -rf "$data/cache/transcodes"
  local url="http://127.0.0.1:$port"
  if ping_ok "$url" "$user" "$data/password" 2>/dev/null; then
    die "something already answers on $url: stop it or set BATON_SUBSONIC_PORT"
  fi
  (
    # Close every inherited descriptor but 0-2: a caller reading our output through a pipe must see
    # EOF when this script exits, not when the server does.
    for fd in /proc/$BASHPID/fd/*; do
      fd="${fd##*/}"
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    cd "$data" && HOME="$data/home" exec setsid "$venv/bin/supysonic-server" -S waitress -h 127.0.0.1 \
      -p "$port" --threads 8 </dev/null >>"$data/server.log" 2>&1
  ) &
  pid=$!
  local i
  for i in $(seq 1 150); do
    if ping_ok "$url" "$user" "$data/password"; then return; fi
    alive "$pid" || die "the server exited: $(tail -n 20 "$data/server.log")"
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  die "the server did not answer ping on $url within 15 s: $(tail -n 20 "$data/server.log")"
}

write_env() {
  local tmp="$data/server.env.tmp"
  cat >"$tmp" <<EOF
url=http://127.0.0.1:$port
user=$user
password-file=$data/password
pid=$pid
data=$data
music=$data/music
port=$port
version=$version
EOF
  mv "$tmp" "$data/server.env"
  cp "$data/server.env" "$pointer.tmp" && mv "$pointer.tmp" "$pointer"
}

kill_server() {
  local p="$1"
  alive "$p" || return 0
  kill "$p" 2>/dev/null || true
  local i
  for i in $(seq 1 50); do alive "$p" || return 0; sleep 0.1; done
  kill -9 "$p" 2>/dev/null || true
}

start() {
  if [ -f "$pointer" ]; then
    data="$(env_get "$pointer" data)"
    pid="$(env_get "$pointer" pid)"
    if alive "$pid" && ping_ok "$(env_get "$pointer" url)" "$user" "$data/password" 2>/dev/null; then
      if [ "$(env_get "$pointer" version)" = "$(server_version)" ]; then
        say "already running: $(env_get "$pointer" url) (pid $pid)"
        return
      fi
      say "the running server (pid $pid) was made by another version of this script or for another library: replacing it"
    else
      say "a stale server env file was found: cleaning up"
    fi
    stop
  fi
  ensure_venv
  pid=""
  data="$(mktemp -d /tmp/baton-subsonic.XXXXXX)"
  # Until the env file names it, a failure (or Ctrl-C) removes the new data dir and its server.
  trap 'kill_server "$pid"; rm -rf "$data"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$data/home" "$data/cache"
  chmod 755 "$data"
  local library="${BATON_SUBSONIC_LIBRARY:-test}"
  case "$library" in
    test) make_library "$data/music" ;;
    demo) make_demo_library "$data/music" ;;
    /*) [ -d "$library" ] || die "BATON_SUBSONIC_LIBRARY: $library is not a directory"
        mkdir -p "$data/music" && cp -R "$library/." "$data/music/" ;;
    *) die "BATON_SUBSONIC_LIBRARY: test, demo or the absolute path of a directory (got $library)" ;;
  esac
  write_config "$data"
  # A fresh random password per start: tests read it from the password file.
  "$venv/bin/python" -c 'import secrets; print("pw-" + secrets.token_hex(8))' >"$data/password"
  chmod 600 "$data/password"
  cli user add "$user" -p "$(cat "$data/password")" >/dev/null
  cli folder add Music "$data/music" >/dev/null
  cli folder scan Music >"$data/scan.log" 2>&1 || die "scan failed: $(cat "$data/scan.log")"
  launch
  version="$(server_version)"
  write_env
  trap - EXIT INT TERM
  say "running: http://127.0.0.1:$port (pid $pid, data $data, env $pointer)"
}

stop() {
  [ -f "$pointer" ] || { say "not running"; return 0; }
  local d p
  d="$(env_get "$pointer" data)"
  p="$(env_get "$pointer" pid)"
  kill_server "$p"
  case "$d" in /tmp/baton-subsonic.*) rm -rf "$d" ;; esac
  rm -f "$pointer"
  say "stopped"
}

restart_server_only() {
  [ -f "$pointer" ] || die "not running: scripts/subsonic-server.sh start"
  data="$(env_get "$pointer" data)"
  # The same data, so the same version (whatever BATON_SUBSONIC_LIBRARY says now).
  version="$(env_get "$pointer" version)"
  kill_server "$(env_get "$pointer" pid)"
  # An optional pause (seconds) while the server is away, for retry-limit tests.
  if [ -n "${2:-}" ]; then sleep "$2"; fi
  launch
  write_env
  say "restarted: pid $pid"
}

status() {
  [ -f "$pointer" ] || { say "not running (no $pointer)"; exit 1; }
  cat "$pointer"
  local d
  d="$(env_get "$pointer" data)"
  if alive "$(env_get "$pointer" pid)" && ping_ok "$(env_get "$pointer" url)" "$user" "$d/password"; then
    say "running"
  else
    say "not answering"; exit 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  restart-server-only) restart_server_only "$@" ;;
  *) echo "usage: $0 start|stop|status|restart-server-only [SECONDS-AWAY]" >&2; exit 2 ;;
esac
