#!/usr/bin/env bash
# Build the docs site and take PNGs of its start page and the error reference in headless
# Chromium, served from a local http.server on 127.0.0.1 (as a reader's browser loads it).
#   docs/screenshot.sh [OUTDIR=site-screenshots]
# Needs: apt-get install -y chromium (after apt-get update).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "${1:-site-screenshots}" && cd "${1:-site-screenshots}" && pwd)
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROMIUM" ] || { echo "chromium not found: apt-get install -y chromium" >&2; exit 3; }
SITE=$(mktemp -d)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet -d "$SITE"
PORT=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
.venv/bin/python -m http.server "$PORT" --bind 127.0.0.1 --directory "$SITE" >/dev/null 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; rm -rf "$SITE"' EXIT
until .venv/bin/python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/')" 2>/dev/null; do
  sleep 0.1
done
shoot() {  # PAGE PNG
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d)" --window-size=1280,900 --hide-scrollbars \
    --screenshot="$OUT/$2" "http://127.0.0.1:$PORT/$1" >/dev/null 2>&1
  echo "$OUT/$2"
}
shoot "" start.png
shoot "reference/errors/" reference-errors.png
