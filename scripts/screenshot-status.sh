#!/usr/bin/env bash
# Makes docs/status-page.png: runs batond on the default config, plays music on both zones, rings
# the doorbell (interrupting the music) and queues a chime behind it, then photographs the status
# page with headless Chromium. Needs chromium (apt-get install chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product batond >/dev/null
out=$(mktemp -d)
sed "s#output-dir: ../out#output-dir: $out#" config/baton.yaml > "$out/baton.yaml"
sed -i "s#alsa-config: alsa/baton-files.conf#alsa-config: $PWD/config/alsa/baton-files.conf#; s#^sounds: sounds#sounds: $PWD/config/sounds#" "$out/baton.yaml"
.build/debug/batond --config "$out/baton.yaml" 2>"$out/batond.log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$out"' EXIT
api=http://127.0.0.1:8470/api/v1
for _ in $(seq 50); do curl -fs "$api/status" >/dev/null && break; sleep 0.1; done
curl -fs -X POST -H 'Content-Type: application/json' "$api/music/play" -d '{"sound": "chime", "zones": ["kitchen", "patio"], "loop": true}' >/dev/null
sleep 8
curl -fs -X POST -H 'Content-Type: application/json' "$api/announce" -d '{"sound": "doorbell"}' >/dev/null
curl -fs -X POST -H 'Content-Type: application/json' "$api/announce" -d '{"sound": "chime", "zones": ["kitchen"]}' >/dev/null
sleep 6
curl -fs -X POST -H 'Content-Type: application/json' "$api/announce" -d '{"sound": "doorbell", "zones": ["kitchen"]}' >/dev/null
sleep 0.7
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,900 \
  --timeout=2500 --screenshot=docs/status-page.png http://127.0.0.1:8470/ 2>/dev/null
echo "wrote docs/status-page.png"
