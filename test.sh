#!/usr/bin/env bash
# Set up and build if needed, then run every test.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
cd build
ctest --no-tests=error --output-on-failure -j2
