#!/usr/bin/env bash
# The viewer page in headless Chromium (Debian's chromium, driven by Playwright for Python pointed at
# /usr/bin/chromium: no browser download). Screenshots go to $SCREENSHOTS (default: a new temporary
# folder, printed at the end). See Tests/Browser/viewer_test.py.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-browser
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import playwright, PIL, numpy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q playwright pillow numpy
fi
swift build --product tiler >/dev/null
shots=${SCREENSHOTS:-$(mktemp -d)}
"$venv/bin/python" Tests/Browser/viewer_test.py "$shots" "$(swift build --show-bin-path)/tiler"
