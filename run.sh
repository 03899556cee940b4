#!/usr/bin/env bash
# Set up and build if needed, then run moongrad. With no arguments: the intro script, then
# (on a terminal) the REPL with everything the script made still defined.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh >&2
if [ $# -eq 0 ]; then
  if [ -t 0 ] && [ -t 1 ]; then set -- -i scripts/00_intro.lua; else set -- scripts/00_intro.lua; fi
fi
exec build/moongrad "$@"
