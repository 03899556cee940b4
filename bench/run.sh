#!/usr/bin/env bash
# Runs moongrad's benchmark and its peers (PyTorch, NumPy/OpenBLAS from Debian) in one go and
# prints each figure with its ratio, at the same thread count: 1 thread, and every core.
set -euo pipefail
cd "$(dirname "$0")/.."
./setup.sh >/dev/null
for p in python3-torch python3-numpy libopenblas-dev hyperfine; do
  dpkg -s "$p" >/dev/null 2>&1 || need="${need:-} $p"
done
if [ -n "${need:-}" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends $need
fi
ninja -C build mgbench >/dev/null

out=$(mktemp -d)
MG_THREADS=1 build/mgbench > "$out/mg1.txt"
build/mgbench > "$out/mgn.txt"
# unset OpenBLAS pinning for the peers only, so they run their best kernels (see TOOLCHAIN notes);
# each peer script limits OpenBLAS to its thread count itself
py=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3)
"${py[@]}" bench/peers.py 1 > "$out/t1.txt"
"${py[@]}" bench/peers.py "$(nproc)" > "$out/tn.txt"
# U1-U8: issue 10's workloads written as a user writes them in Lua, and the same in PyTorch
MG_THREADS=1 build/moongrad bench/user.lua >> "$out/mg1.txt"
build/moongrad bench/user.lua >> "$out/mgn.txt"
"${py[@]}" bench/user.py 1 >> "$out/t1.txt"
"${py[@]}" bench/user.py "$(nproc)" >> "$out/tn.txt"
# S*, V*: BEAM=2 with an empty cache: the search time, then U5-U7's workloads with the opts found
for t in 1 "$(nproc)"; do
  f=$([ "$t" = 1 ] && echo mg1 || echo mgn)
  XDG_CACHE_HOME="$out/beam$t" BEAM=2 MG_THREADS=$t build/moongrad bench/beam.lua >> "$out/$f.txt"
done
# T1: the MNIST CNN's training step at batch 512 (scripts/04_mnist.lua's model), same threads
MG_THREADS=1 build/moongrad bench/mnist_step.lua >> "$out/mg1.txt"
build/moongrad bench/mnist_step.lua >> "$out/mgn.txt"
"${py[@]}" bench/mnist_step.py 1 >> "$out/t1.txt"
"${py[@]}" bench/mnist_step.py "$(nproc)" >> "$out/tn.txt"

# optional: tinygrad, where the user has a checkout (nothing is downloaded)
tg_env=(env PYTHONPATH="${TINYGRAD_PATH:-}" CPU=1)
if [ -n "${TINYGRAD_PATH:-}" ] && "${tg_env[@]}" /usr/bin/python3 -c "import tinygrad" 2>/dev/null; then
  "${tg_env[@]}" /usr/bin/python3 bench/peer_tinygrad.py > "$out/tg.txt"
fi

# W7: process start to first printed result
w7() { hyperfine -N -w 3 -r 20 --export-json "$out/$1.json" "$2" >/dev/null 2>&1
       /usr/bin/python3 -c "import json;print('%.1f' % (json.load(open('$out/$1.json'))['results'][0]['median']*1e3))"; }
mg_w7=$(w7 mg "build/moongrad -e print(1)")
pt_w7=$(w7 pt "/usr/bin/python3 -c 'import torch;print(torch.ones(1))'")
if [ -s "$out/tg.txt" ]; then
  echo "W7 $(w7 tg "env PYTHONPATH=$TINYGRAD_PATH CPU=1 /usr/bin/python3 -c 'from tinygrad import Tensor;print(Tensor([1,2]).sum().item())'") ms" >> "$out/tg.txt"
fi
echo "W7 $mg_w7 ms" >> "$out/mg1.txt"
echo "W7 $pt_w7 ms" >> "$out/t1.txt"

/usr/bin/python3 - "$out" <<'PY'
import sys
d = sys.argv[1]
def load(f):
  r = {}
  for line in open(f"{d}/{f}"):
    k, v, u = line.split(); r[k] = (float(v), u)
  return r
mg1, mgn, t1, tn = load("mg1.txt"), load("mgn.txt"), load("t1.txt"), load("tn.txt")
names = {"B0": "triad a=b+s*c, 4M f32, C++ loop (ceiling)", "W1": "elementwise ((a+1)*2).relu()-b*0.5, 4M f32", "W6": "100-op chain on 16 elems, per realize",
         "G1": "10k-op chain build+schedule", "M1": "512x512 f32 matmul", "W7": "start to first print (-e)",
         "T1": "MNIST CNN train step, batch 512 (TinyJit)",
         "U1": "Lua loop: ((a+1)*2):relu()-b*0.5, 4M", "U0": "U1 with collectgarbage() each call", "U2": "Lua: 100-op relu chain, 16 elems",
         "U3": "Lua: x:sum(), 16M", "U4": "Lua: x:softmax(-1), 4096x1024",
         "U5": "Lua: two convs fwd+bwd, 64x1x28x28", "U6": "Lua: matmul 1024", "U7": "Lua: matmul 256",
         "U8": "Lua: a new kernel at the prompt",
         "S6": "BEAM=2 search, matmul 1024 (cold cache)", "V6": "matmul 1024 with BEAM=2",
         "S7": "BEAM=2 search, matmul 256 (cold cache)", "V7": "matmul 256 with BEAM=2",
         "S5": "BEAM=2 search, two convs fwd+bwd (cold)", "V5": "two convs fwd+bwd with BEAM=2",
         "H5": "  the same, hand-coded, in turns with V5", "H6": "  the same, hand-coded, in turns with V6",
         "H7": "  the same, hand-coded, in turns with V7"}
higher = {"GB/s", "GFLOPS"}
def cell(v, u): return f"{v:>9.3f} {u:<6}"
print("W*, G1, M1: the engine's C++ benchmark (bench_core.cpp); U*: Lua as a user writes it")
print(f"{'workload':42} {'moongrad 1thr':>16} {'torch 1thr':>16} {'ratio':>7} | {'moongrad all':>16} {'torch all':>16} {'ratio':>7}")
for k in ["B0", "W1", "W6", "G1", "M1", "W7", "T1", "U1", "U0", "U2", "U3", "U4", "U5", "U6", "U7", "U8", "S5", "V5", "H5", "S6", "V6", "H6", "S7", "V7", "H7"]:
  row = f"{names[k]:42}"
  for mg, peer in ((mg1, t1), (mgn, tn)):
    if k not in mg: continue
    v, u = mg[k]
    row += " " + cell(v, u)
    pk = {"V5": "U5", "V6": "U6", "V7": "U7", "H5": "U5", "H6": "U6", "H7": "U7"}.get(k, k) # beside PyTorch's same workload
    if pk in peer:
      p = peer[pk][0]
      row += " " + cell(p, u) + f" {(v / p if u in higher else p / v):>6.2f}x"
    row += " |"
  print(row.rstrip(" |"))
import os
if os.path.exists(f"{d}/tg.txt"):
  tg = load("tg.txt")
  print(f"\ntinygrad (TINYGRAD_PATH, CPU backend, its default threads) against moongrad at all cores:")
  for k in ["W1", "W6", "M1", "W7"]:
    if k in tg and k in (mgn if k != "W7" else mg1):
      v, u = (mgn if k != "W7" else mg1)[k]; p = tg[k][0]
      print(f"{names[k]:42} {cell(v, u)} {cell(p, u)} {(v / p if u in higher else p / v):>6.2f}x")
if "B1" in t1: print(f"{'OpenBLAS sgemm 512 via numpy (ceiling)':42} {t1['B1'][0]:.2f} GFLOPS at 1 thread, {tn['B1'][0]:.2f} at all cores")
if "B2" in t1:
  print(f"{'OpenBLAS sgemm 1024 via numpy (ceiling)':42} {t1['B2'][0]:.2f} GFLOPS at 1 thread, {tn['B2'][0]:.2f} at all cores")
  for k, label in (("U6", "default opts"), ("H6", "default opts, in turns with BEAM's"), ("V6", "BEAM=2")):
    if k in mg1: print(f"matmul 1024, {label}, against OpenBLAS: {mg1[k][0] / t1['B2'][0]:.2f}x at 1 thread, {mgn[k][0] / tn['B2'][0]:.2f}x at all cores")
if "R6" in mg1 and "R6" in mgn:
  print(f"matmul 1024 against OpenBLAS in turns, one process (mgbench): {mg1['R6'][0]:.2f}x at 1 thread "
        f"({mg1['P6'][0]:.1f} vs {mg1['Q6'][0]:.1f} GFLOPS), {mgn['R6'][0]:.2f}x at all cores "
        f"({mgn['P6'][0]:.1f} vs {mgn['Q6'][0]:.1f}); all cores over 1 thread: moongrad "
        f"{mgn['P6'][0] / mg1['P6'][0]:.2f}x, OpenBLAS {mgn['Q6'][0] / mg1['Q6'][0]:.2f}x")
for w in "567":
  if "V" + w in mg1 and "H" + w in mg1:
    r = [(m["V" + w][0] / m["H" + w][0]) if m["V" + w][1] in higher else (m["H" + w][0] / m["V" + w][0]) for m in (mg1, mgn)]
    print(f"{names['V' + w]}: {r[0]:.2f}x the hand-coded opts at 1 thread, {r[1]:.2f}x at all cores (same process, in turns)")
print("ratio > 1 means moongrad is faster")
print("U1 against the triad ceiling (B0): %.2fx at 1 thread, %.2fx at all cores" %
      (mg1["U1"][0] / mg1["B0"][0], mgn["U1"][0] / mgn["B0"][0]))
PY
rm -rf "$out"

# O1: real models, PaddleOCR's detector and recognizer, beside ONNX Runtime (issue 22)
echo
echo "PaddleOCR v4 det (1x3x320x320) and rec (1x3x48x320) beside ONNX Runtime (onnxruntime-node), same inputs, same run:"
MG_THREADS=1 build/moongrad bench/onnx_ocr.lua
MG_THREADS="$(nproc)" build/moongrad bench/onnx_ocr.lua
