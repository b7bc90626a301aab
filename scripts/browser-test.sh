#!/usr/bin/env bash
# The viewer page, our IIIF manifests in Mirador, a restricted image through IIIF Auth 2.0, then WebP and
# AVIF answers (defaults and slower settings), in headless
# Chromium (Debian's chromium, driven by Playwright for Python pointed at /usr/bin/chromium: no browser
# download). Screenshots go to $SCREENSHOTS (default: a new temporary folder, printed at the end). See
# Tests/Browser/viewer_test.py, Tests/Browser/mirador_test.py (which downloads Mirador's bundle from PyPI at
# run time, into the venv), Tests/Browser/auth_test.py and Tests/Browser/formats_test.py.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-browser
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import playwright, PIL, numpy, iiif_prezi3" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q playwright pillow numpy iiif-prezi3
fi
swift build --product tiler >/dev/null
shots=${SCREENSHOTS:-$(mktemp -d)}
tiler="$(swift build --show-bin-path)/tiler"
# All run, whatever the others give; the script fails if any does.
status=0
"$venv/bin/python" Tests/Browser/viewer_test.py "$shots" "$tiler" || status=1
"$venv/bin/python" Tests/Browser/mirador_test.py "$shots" "$tiler" || status=1
"$venv/bin/python" Tests/Browser/auth_test.py "$shots" "$tiler" || status=1
"$venv/bin/python" Tests/Browser/formats_test.py "$shots" "$tiler" || status=1
exit $status
