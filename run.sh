#!/usr/bin/env bash
# Set up and build if needed, then run moongrad (by default the intro script).
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh >&2
if [ $# -eq 0 ]; then set -- scripts/00_intro.lua; fi
exec build/moongrad "$@"
