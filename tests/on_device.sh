#!/usr/bin/env bash
# Runs a Lua test file with DEV set (so the processes it starts use the device too):
#   tests/on_device.sh CL path/to/moongrad tests/lua/test_nn.lua
# A device that cannot run here prints why with SKIPPED: (CTest reports the test as skipped).
set -uo pipefail
dev=$1 exe=$2 file=$3
why=$(env -u DEV "$exe" -e "local n, w = Device.names(); io.write(w['$dev'] or '')") || exit 1
if [ -n "$why" ]; then echo "SKIPPED: $dev cannot run here: $why"; exit 0; fi
DEV=$dev exec "$exe" "$file"
