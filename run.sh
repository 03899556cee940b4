#!/usr/bin/env bash
# Set up and build if needed, then run moongrad. With no arguments: the intro script, then
# (on a terminal) the REPL with everything the script made still defined.
# ./run.sh --install-kernel: build, then register the Jupyter kernel "moongrad (Lua)".
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh >&2
# --install-kernel: register the Jupyter kernel (build/moongrad-kernel) for this user, as
# "moongrad (Lua)"; the kernelspec CMake wrote points at this build
if [ "${1:-}" = "--install-kernel" ]; then
  if [ ! -x build/moongrad-kernel ]; then
    echo "run.sh: build/moongrad-kernel was not built (CMake found no xeus: ./setup.sh installs xeus-dev)" >&2
    exit 1
  fi
  jupyter kernelspec install --user --name moongrad build/jupyter/kernels/moongrad
  echo "Open a notebook (jupyter notebook notebooks/) and pick the kernel \"moongrad (Lua)\"."
  exit
fi
if [ $# -eq 0 ]; then
  if [ -t 0 ] && [ -t 1 ]; then set -- -i scripts/00_intro.lua; else set -- scripts/00_intro.lua; fi
fi
exec build/moongrad "$@"
