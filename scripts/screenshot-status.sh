#!/usr/bin/env bash
# Makes the web app's screenshots in docs/ at phone (360 px) and desktop (1280 px) widths: runs the
# browser test (scripts/test-webapp.sh) with --screenshots, which plays a song from the Subsonic
# test server on the kitchen, rings the doorbell during it and logs in on a token config, taking
# pictures on the way. Starts the test Subsonic server when none answers. Needs chromium and
# chromium-driver (scripts/install-deps.sh --test).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product batond >/dev/null
env_file="${BATON_SUBSONIC_ENV:-/tmp/baton-subsonic.env}"
if ! BATON_SUBSONIC_ENV="$env_file" scripts/subsonic-server.sh status >/dev/null 2>&1; then
  BATON_SUBSONIC_ENV="$env_file" scripts/subsonic-server.sh start
fi
BATON_SUBSONIC_ENV="$env_file" scripts/test-webapp.sh --screenshots docs
