#!/usr/bin/env bash
# Drives the web app in a real browser: Selenium (PyPI, in a venv under $BATON_CACHE) with Debian's
# chromium and chromium-driver, against the built batond and the Subsonic test server. Prints
# 'webapp: N passed, N failed'. scripts/test.sh runs it after the Swift tests.
#   scripts/test-webapp.sh [--screenshots DIR]
# Environment: BATON_SUBSONIC_ENV (default /tmp/baton-subsonic.env), BATON_BIN_DIR (default
# .build/debug), BATON_CACHE (default ~/.cache/baton), BATON_WEBAPP_ONLY (a regular expression: only
# the checks whose name it finds run).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${BATON_CACHE:-${HOME:-/root}/.cache/baton}"
venv="$cache/selenium-venv"
for tool in /usr/bin/chromium /usr/bin/chromedriver; do
  [ -x "$tool" ] || { echo "webapp: $tool is missing (scripts/install-deps.sh --test installs chromium and chromium-driver)" >&2; exit 1; }
done
if ! "$venv/bin/python" -c "import selenium" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/webapp/requirements.txt
fi
# Selenium Manager must not try to fetch a driver: the Debian one is given.
export SE_OFFLINE=true
exec "$venv/bin/python" scripts/webapp/test_webapp.py "${BATON_BIN_DIR:-.build/debug}/batond" \
  "${BATON_SUBSONIC_ENV:-/tmp/baton-subsonic.env}" "$@"
