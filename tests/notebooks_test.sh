#!/usr/bin/env bash
# The notebooks as a person uses them. notebooks/NN_*.ipynb are what tools/script_to_notebook.py
# makes of the scripts today (no drift); each notebook executes through the moongrad kernel with
# `jupyter nbconvert --execute` (Projects 4 and 9 for 30 steps, with loose bounds: CTest runs the
# scripts themselves at their tested lengths and bounds; 10 in one process, as without mpirun) without an error and
# shows at least one picture (an SVG plot or :viz graph); the executed tour, exported to HTML, renders
# in headless Chromium with its tensor table and SVGs on the page (screenshot: BUILD/notebook-tour.png).
#   tests/notebooks_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
export JUPYTER_PATH="$build/jupyter" # the kernelspec CMake writes, for this build's kernel
export JUPYTER_RUNTIME_DIR="$build/jupyter-runtime"
out="$build/notebooks"
mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }

/usr/bin/python3 "$src/tools/script_to_notebook.py" --check ||
  fail "notebooks/ differs from what tools/script_to_notebook.py makes of scripts/: run it and commit"
# and the check notices a script changed without its notebook (a copy of the tree, one line added)
copy=$(mktemp -d)
cp -r "$src/tools" "$src/scripts" "$src/notebooks" "$copy/"
echo 'print("a line the notebook lacks")' >>"$copy/scripts/02_op_types.lua"
if /usr/bin/python3 "$copy/tools/script_to_notebook.py" --check >"$copy/check.log"; then
  fail "the drift check passed with scripts/02_op_types.lua changed"
fi
grep -q "02_op_types.ipynb" "$copy/check.log" || fail "the drift check does not name the stale notebook: $(cat "$copy/check.log")"
rm -rf "$copy"

# short runs (30 steps reached a smoothed loss of 0.88 and 80% on MNIST, a val loss of 3.19 for the
# transformer when measured): the scripts' own tests (CMakeLists.txt) check that the models learn
declare -A args=([04_mnist]="--steps 30 --max-loss 1.5 --min-acc 0.6" [09_transformer]="--steps 30 --max-loss 3.6")
# outputs of the executed notebook: "pictures errors"
count() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
nb = json.load(open(sys.argv[1]))
pictures = errors = 0
for cell in nb["cells"]:
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        html = data.get("text/html", "")
        if "image/svg+xml" in data or "<svg" in ("".join(html) if isinstance(html, list) else html):
            pictures += 1
        errors += o["output_type"] == "error"
print(pictures, errors)
PY
}
total_start=$(date +%s)
for nb in "$src"/notebooks/*.ipynb; do
  name=$(basename "$nb" .ipynb)
  start=$(date +%s)
  MG_NOTEBOOK_ARGS="${args[$name]:-}" timeout 900 /usr/bin/jupyter nbconvert --to notebook --execute \
    --ExecutePreprocessor.timeout=600 --output-dir "$out" "$nb" >"$out/$name.log" 2>&1 ||
    fail "$name did not execute: $(tail -25 "$out/$name.log")"
  read -r pictures errors < <(count "$out/$name.ipynb")
  echo "$name: executed in $(($(date +%s) - start)) s, $pictures pictures"
  [ "$errors" -eq 0 ] || fail "$name: $errors error outputs"
  [ "$pictures" -ge 1 ] || fail "$name: no picture among its outputs"
done
echo "all notebooks: $(($(date +%s) - total_start)) s"

# The tour in a browser: a table of the tensor, SVGs (plots, :viz), the highlighted :src
command -v chromium >/dev/null || fail "no chromium on PATH (Debian's chromium package; ./setup.sh installs it)"
# no MathJax: the page must not reach for the network
/usr/bin/jupyter nbconvert --to html --HTMLExporter.mathjax_url= --output-dir "$out" "$out/tour.ipynb" >"$out/tour-html.log" 2>&1 ||
  fail "HTML export: $(tail -5 "$out/tour-html.log")"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
browse() {
  local o=$1
  shift
  timeout 120 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$profile" "$@" >"$o" 2>"$profile/chromium.log" ||
    fail "chromium could not start or load the page (exit $?): $(tail -5 "$profile/chromium.log")"
}
browse "$out/tour-dom.html" --dump-dom "file://$out/tour.html"
dom="$out/tour-dom.html"
grep -q '<table class="mg-tensor"' "$dom" || fail "no tensor table on the page"
grep -q '<code>(2, 3)</code> dtype <code>int32</code> device <code>CPU</code>' "$dom" || fail "the table's shape, dtype and device line is missing"
grep -q '<td>12</td>' "$dom" || fail "x * 2's last value (12) is not in the table"
grep -q '<td>9999</td>' "$dom" || fail "the summarized 100x100 table lacks its last value"
svgs=$(grep -o '<svg' "$dom" | wc -l)
[ "$svgs" -ge 4 ] || fail "expected SVGs for the two plots and :viz's graphs, found $svgs"
grep -q 'class="mg-src"' "$dom" || fail ":src's highlighted source is missing"
# the two plots drawn on the page: gnuplot's canvas with its lines and its title as SVG text
plots=$(grep -c '<g id="gnuplot_canvas">' "$dom" || true)
[ "$plots" -ge 2 ] || fail "expected the tour's two plots drawn as SVG, found $plots gnuplot canvases"
grep -q '<text><tspan[^>]*>two series</tspan></text>' "$dom" || fail "the line plot's title is not SVG text on the page"
browse "$out/shot.log" --screenshot="$build/notebook-tour.png" --window-size=1280,4200 "file://$out/tour.html"
size=$(stat -c %s "$build/notebook-tour.png" 2>/dev/null || echo 0)
[ "$size" -gt 50000 ] || fail "the screenshot is $size bytes: blank?"
echo "the tour in Chromium: tensor tables, $svgs SVGs; screenshot $build/notebook-tour.png ($size bytes)"
echo "PASS"
