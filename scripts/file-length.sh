#!/usr/bin/env bash
# Fails when a Swift or C file of Sources is over 400 lines (issue 42's bar: a file a reader takes in at once),
# naming each such file.
set -euo pipefail
cd "$(dirname "$0")/.."
long=$(find Sources -name '*.swift' -o -name '*.c' -o -name '*.h' | xargs wc -l | awk '$2 != "total" && $1 > 400 { print $2 " (" $1 " lines)" }')
if [ -n "$long" ]; then
  echo "files of Sources over 400 lines:"
  echo "$long"
  exit 1
fi
