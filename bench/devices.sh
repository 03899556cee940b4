#!/usr/bin/env bash
# The devices side by side: elementwise 4M and matmul 512 on every device that runs here, with
# the CPU device and PyTorch (Debian's, same thread count) in the same run. Ratios are against
# the CPU device (and PyTorch): below 1 is slower.
set -euo pipefail
cd "$(dirname "$0")/.."
./setup.sh >/dev/null
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
build/moongrad bench/devices.lua > "$out/mg.txt"
/usr/bin/python3 - "$(nproc)" > "$out/torch.txt" <<'PY'
import sys, time, statistics, torch
torch.set_num_threads(int(sys.argv[1]))
def t(fn):
    fn(); fn()
    ts = []
    for _ in range(7):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3
a, b, c = (torch.rand(4194304) for _ in range(3))
print("D1_elementwise_4M torch %.3f" % t(lambda: a * b + c))
x, y = torch.rand(512, 512), torch.rand(512, 512)
print("D2_matmul_512 torch %.3f" % t(lambda: x @ y))
PY
grep '^#' "$out/mg.txt" || true
printf "%-20s %-8s %10s %10s %10s\n" workload device ms "vs CPU" "vs torch"
awk 'FNR==NR { if ($1 !~ /^#/) { if ($2 == "torch") torch[$1] = $3 } next }
     $1 !~ /^#/ { if ($2 == "CPU") cpu[$1] = $3; rows[++n] = $0 }
     END { for (i = 1; i <= n; i++) { split(rows[i], r, " ");
             printf "%-20s %-8s %10.3f %9.2fx %9.2fx\n", r[1], r[2], r[3], cpu[r[1]] / r[3], torch[r[1]] / r[3] } }' \
  "$out/torch.txt" "$out/mg.txt"
