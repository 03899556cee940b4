#!/usr/bin/env bash
# Project 9's GPT (scripts/09_transformer.lua) beside its PyTorch peer (bench/gpt.py, Debian's
# PyTorch 1.13): the same model, data, batches and schedule, each side trained from scratch at 1
# thread and at 2 (MG_THREADS and torch.set_num_threads). Prints the median step time, the
# validation loss after the run and greedy generation with a KV cache, with the ratios.
#   bench/gpt.sh [STEPS]   STEPS defaults to 2000, nanoGPT's run: at 1 thread about 6 minutes for
#                          moongrad and 2.5 for PyTorch on the 2-vCPU machine of README.md's
#                          figures; 300 is a quick look
# MG=path/to/moongrad picks the binary (default: ./setup.sh, then build/moongrad).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-2000}
if [ -z "${MG:-}" ]; then
  ./setup.sh >/dev/null
  MG=build/moongrad
fi
dpkg -s python3-torch >/dev/null 2>&1 || {
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends python3-torch
}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
# the peer's OpenBLAS unpinned, as bench/run.sh does; gpt.py limits its threads itself
py=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3)
for t in 1 2; do
  echo "moongrad, $t thread(s), $steps steps" >&2
  MG_THREADS=$t "$MG" scripts/09_transformer.lua --steps "$steps" > "$out/mg$t.log" 2>&1 || { cat "$out/mg$t.log"; exit 1; }
  echo "PyTorch, $t thread(s), $steps steps" >&2
  "${py[@]}" bench/gpt.py "$t" --steps "$steps" > "$out/pt$t.log" 2>&1 || { cat "$out/pt$t.log"; exit 1; }
done

/usr/bin/python3 - "$out" "$steps" <<'PY'
import re, sys
d, steps = sys.argv[1], sys.argv[2]
def last(f):
    line = [l for l in open(f"{d}/{f}.log") if l.startswith("gpt: ")][-1]
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.naninf]+)", line)}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
avx512 = any("avx512f" in l.split() for l in open("/proc/cpuinfo") if l.startswith("flags"))
print(f"GPT (block 64, batch 12, 4 layers, 4 heads, width 128), {steps} steps; {cpu}, avx512f {'yes' if avx512 else 'no'}")
print(f"{'':22} {'moongrad':>10} {'PyTorch':>10} {'ratio':>8}")
for t in (1, 2):
    m, p = last(f"mg{t}"), last(f"pt{t}")
    print(f"{t} thread(s)")
    print(f"  {'step ms (median)':20} {m['step_ms']:10.1f} {p['step_ms']:10.1f} {p['step_ms'] / m['step_ms']:7.2f}x")
    print(f"  {'val loss':20} {m['val_loss']:10.4f} {p['val_loss']:10.4f} {m['val_loss'] - p['val_loss']:+8.4f}")
    print(f"  {'train loss':20} {m['train_loss']:10.4f} {p['train_loss']:10.4f} {m['train_loss'] - p['train_loss']:+8.4f}")
    print(f"  {'generation tok/s':20} {m['gen_tok_s']:10.0f} {p['gen_tok_s']:10.0f} {m['gen_tok_s'] / p['gen_tok_s']:7.2f}x")
print("ratio: PyTorch's time / moongrad's and moongrad's tok/s / PyTorch's (above 1: moongrad faster);")
print("loss: moongrad's minus PyTorch's (the two start from different random weights)")
PY
