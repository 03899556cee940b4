#!/usr/bin/env bash
# Runs moongrad's benchmark and its peers (PyTorch, NumPy/OpenBLAS from Debian) in one go and
# prints each figure with its ratio. moongrad runs on one thread; PyTorch is shown at 1 thread
# (same thread count) and at all cores.
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
build/mgbench > "$out/mg.txt"
# unset OpenBLAS pinning for the peers only, so they run their best kernels (see TOOLCHAIN notes)
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/peers.py 1 > "$out/t1.txt"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/peers.py "$(nproc)" > "$out/tn.txt"

# W7: process start to first printed result
w7() { hyperfine -N -w 3 -r 20 --export-json "$out/$1.json" "$2" >/dev/null 2>&1
       /usr/bin/python3 -c "import json;print('%.1f' % (json.load(open('$out/$1.json'))['results'][0]['median']*1e3))"; }
mg_w7=$(w7 mg "build/moongrad -e print(1)")
pt_w7=$(w7 pt "/usr/bin/python3 -c 'import torch;print(torch.ones(1))'")
echo "W7 $mg_w7 ms" >> "$out/mg.txt"
echo "W7 $pt_w7 ms" >> "$out/t1.txt"

/usr/bin/python3 - "$out" <<'PY'
import sys
d = sys.argv[1]
def load(f):
  r = {}
  for line in open(f"{d}/{f}"):
    k, v, u = line.split(); r[k] = (float(v), u)
  return r
mg, t1, tn = load("mg.txt"), load("t1.txt"), load("tn.txt")
names = {"W1": "elementwise ((a+1)*2).relu()-b*0.5, 4M f32", "W6": "100-op chain on 16 elems, per realize",
         "G1": "10k-op chain build+schedule", "M1": "512x512 f32 matmul", "W7": "start to first print (-e)"}
higher = {"GB/s", "GFLOPS"}
print(f"{'workload':44} {'moongrad':>14} {'torch 1 thr':>14} {'ratio':>7} {'torch all':>14} {'ratio':>7}")
for k in ["W1", "W6", "G1", "M1", "W7"]:
  v, u = mg[k]
  row = f"{names[k]:44} {v:>9.3f} {u:<4}"
  for peer in (t1, tn):
    if k in peer:
      p = peer[k][0]
      ratio = v / p if u in higher else p / v
      row += f" {p:>9.3f} {u:<4} {ratio:>6.2f}x"
  print(row)
if "B1" in t1: print(f"{'OpenBLAS sgemm 512 via numpy (ceiling)':44} {'':>14} {t1['B1'][0]:>9.2f} GFLOPS (1 thr)  {tn['B1'][0]:.2f} (all)")
print("ratio > 1 means moongrad is faster")
PY
rm -rf "$out"
