#!/usr/bin/python3
"""The learning projects as Jupyter notebooks: scripts/NN_*.lua -> notebooks/NN_*.ipynb for the
moongrad kernel. The notebooks are generated, never edited: tests/notebooks_test.sh checks that
running this again gives the committed files.

    /usr/bin/python3 tools/script_to_notebook.py            write notebooks/ (all of PROJECTS)
    /usr/bin/python3 tools/script_to_notebook.py --check    exit 1 if a notebook differs

A script becomes cells at its blank lines, wherever the Lua there is complete (no block, bracket
or long string open). A paragraph of comments alone becomes a markdown cell; a "-----" rule and
the section("...") call under it become a heading above the code. The first cell sets `arg` as
the script sees it (MG_NOTEBOOK_ARGS adds options, as CI's shorter runs do)."""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# project notebook name -> the script it is made from (07's script is a launcher of main.lua)
PROJECTS = {
    "00_intro": "scripts/00_intro.lua",
    "01_tensor_basics": "scripts/01_tensor_basics.lua",
    "02_op_types": "scripts/02_op_types.lua",
    "03_autograd": "scripts/03_autograd.lua",
    "04_mnist": "scripts/04_mnist.lua",
    "05_compiler_pipeline": "scripts/05_compiler_pipeline.lua",
    "06_custom_ops": "scripts/06_custom_ops.lua",
    "07_custom_backend": "scripts/07_custom_backend/main.lua",
    "08_onnx": "scripts/08_onnx.lua",
    "09_transformer": "scripts/09_transformer.lua",
    "10_data_parallel": "scripts/10_data_parallel.lua",
}

OPENERS = {"function", "do", "if", "repeat"}
CLOSERS = {"end", "until"}


def depth_after(text, depth, long_open):
    """Lua block and bracket depth after text, and whether a long string or comment is still
    open (its closing '=' count), given the state before it. A small tokenizer: strings and
    comments are skipped, keywords counted."""
    i, n = 0, len(text)
    while i < n:
        if long_open is not None:
            close = "]" + "=" * long_open + "]"
            j = text.find(close, i)
            if j < 0:
                return depth, long_open
            i, long_open = j + len(close), None
            continue
        c = text[i]
        m = re.match(r"--\[(=*)\[", text[i:])
        if m or re.match(r"\[(=*)\[", text[i:]):
            m = m or re.match(r"\[(=*)\[", text[i:])
            long_open = len(m.group(1))
            i += len(m.group(0))
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text[i:])
        if m:
            w = m.group(0)
            if w in OPENERS:
                depth += 1
            elif w in CLOSERS:
                depth -= 1
            i += len(w)
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        i += 1
    return depth, long_open


def paragraphs(source):
    """The script's text split at blank lines where the Lua is complete."""
    out, cur, depth, long_open = [], [], 0, None
    for line in source.split("\n"):
        if line.strip() == "" and depth == 0 and long_open is None:
            if cur:
                out.append(cur)
            cur = []
            continue
        cur.append(line)
        depth, long_open = depth_after(line + "\n", depth, long_open)
    if cur:
        out.append(cur)
    return out


def markdown(lines):
    text = [re.sub(r"^--+ ?", "", l) for l in lines]
    return "  \n".join(t.rstrip() for t in text)


def cells_of(script, rel):
    with open(os.path.join(ROOT, script), encoding="utf-8") as f:
        source = f.read()
    if source.startswith("#!"):
        source = source.split("\n", 1)[1]
    cells = [("markdown", f"# {os.path.basename(script)}\n\nGenerated from `{script}` by "
              "`tools/script_to_notebook.py`: edit the script, then run the tool again.")]
    cells.append(("code", f'arg = require("notebook").script_args("{rel}")'))
    for para in paragraphs(source.rstrip("\n")):
        if all(l.lstrip().startswith("--") for l in para):
            if all(re.fullmatch(r"-{4,}", l.strip()) for l in para):
                continue
            cells.append(("markdown", markdown(para)))
            continue
        if re.fullmatch(r"-{4,}", para[0].strip()):
            para = para[1:]
            m = re.match(r'\s*(?:lesson\.)?section\(\s*"([^"]*)"\s*\)', para[0]) if para else None
            if m:
                cells.append(("markdown", "## " + m.group(1)))
        cells.append(("code", "\n".join(para)))
    return cells


def notebook(name, script):
    rel = os.path.relpath(os.path.join(ROOT, script), os.path.join(ROOT, "notebooks"))
    cells = []
    for i, (kind, text) in enumerate(cells_of(script, rel)):
        cell = {"cell_type": kind, "id": f"{name}-{i}", "metadata": {}, "source": text.splitlines(True)}
        if kind == "code":
            cell.update({"execution_count": None, "outputs": []})
        cells.append(cell)
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "moongrad (Lua)", "language": "lua", "name": "moongrad"},
            "language_info": {"codemirror_mode": "lua", "file_extension": ".lua", "mimetype": "text/x-lua",
                              "name": "lua", "pygments_lexer": "lua", "version": "5.4"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main(argv):
    check = "--check" in argv
    out_dir = os.path.join(ROOT, "notebooks")
    os.makedirs(out_dir, exist_ok=True)
    stale = []
    for name, script in PROJECTS.items():
        path = os.path.join(out_dir, name + ".ipynb")
        text = notebook(name, script)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old == text:
            continue
        if check:
            stale.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print("wrote", os.path.relpath(path, ROOT))
    if stale:
        print("out of date (run /usr/bin/python3 tools/script_to_notebook.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
