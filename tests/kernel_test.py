"""The Jupyter kernel driven through the protocol, as Jupyter drives it: Debian's
python3-jupyter-kernel-test (kernel info, execute, errors, completion, is_complete, inspect,
display data), then what that library does not cover: interrupt, restart, streaming, colon
commands as magics, a kernel that cannot start. Run by CTest as
    /usr/bin/python3 tests/kernel_test.py BUILD_DIR
with JUPYTER_PATH pointing at BUILD_DIR/jupyter (the kernelspec CMake writes)."""
import os
import subprocess
import sys
import time
import unittest
from queue import Empty

BUILD = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else "build")
os.environ["JUPYTER_PATH"] = os.path.join(BUILD, "jupyter")
os.environ.setdefault("JUPYTER_RUNTIME_DIR", os.path.join(BUILD, "jupyter-runtime"))
os.makedirs(os.environ["JUPYTER_RUNTIME_DIR"], exist_ok=True)

import jupyter_kernel_test  # noqa: E402
from jupyter_client.manager import start_new_kernel  # noqa: E402

TIMEOUT = 60


class ProtocolTests(jupyter_kernel_test.KernelTests):
    kernel_name = "moongrad"
    language_name = "lua"
    file_extension = ".lua"

    code_hello_world = 'print("hello, world")'
    code_stderr = 'io.stderr:write("to stderr\\n")'
    completion_samples = [
        # the REPL's completer: x:re + TAB offers the Tensor methods starting with re
        {"text": "Tensor.resh", "matches": {"reshape"}},
        {"text": ":sch", "matches": {"schedule"}},
    ]
    complete_code_samples = ["x = 1", "for i = 1, 2 do print(i) end", ":debug 2", ""]
    incomplete_code_samples = ["for i = 1, 2 do", "function f(x)", "t = {1, 2,", 's = [[long']
    invalid_code_samples = ["for i = 1 do end", "x = = 2", ":nosuchcommand"]
    code_generate_error = 'error("boom")'
    code_execute_result = [
        {"code": "1 + 2", "result": "3"},
        {"code": "x = 40\nx + 2", "result": "42"},
        {"code": 'local y = "a"\ny .. "b"', "result": "ab"},
        {"code": "Tensor{1, 2, 3} * 2", "mime": "text/html"},
        {"code": "Tensor{1, 2, 3} * 2", "result": "Tensor([2, 4, 6], shape=(3,), dtype=int32, device=CPU)"},
    ]
    code_display_data = [
        {"code": 'plot = require "plot"\nplot.line({1, 2, 3}, {3, 1, 2}, {title = "t"})', "mime": "image/svg+xml"},
        {"code": ":src Tensor{1, 2}:relu()", "mime": "text/html"},
        {"code": ":viz (Tensor{1, 2} + 1):sum()", "mime": "text/html"},
    ]
    code_inspect_sample = "x:relu"


class Session(unittest.TestCase):
    """One kernel for the tests below, driven message by message."""

    @classmethod
    def setUpClass(cls):
        cls.km, cls.kc = start_new_kernel(kernel_name="moongrad")

    @classmethod
    def tearDownClass(cls):
        cls.kc.stop_channels()
        cls.km.shutdown_kernel(now=True)

    def run_cell(self, code, timeout=TIMEOUT, during=None):
        """Executes code; returns (reply content, [(msg_type, content, seconds since sent)])."""
        msg_id = self.kc.execute(code)
        start = time.time()
        if during:
            during()
        out = []
        reply = None
        while True:
            try:
                m = self.kc.get_iopub_msg(timeout=timeout)
            except Empty:
                self.fail(f"no idle status within {timeout} s for {code!r}")
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            t = m["msg_type"]
            if t == "status" and m["content"]["execution_state"] == "idle":
                break
            if t not in ("status", "execute_input"):
                out.append((t, m["content"], time.time() - start))
        reply = self.kc.get_shell_msg(timeout=timeout)
        self.assertEqual(reply["parent_header"]["msg_id"], msg_id)
        return reply["content"], out

    def text(self, out, name="stdout"):
        return "".join(c["text"] for t, c, _ in out if t == "stream" and c["name"] == name)

    def data(self, out, mime, kind=("display_data", "execute_result")):
        return [c["data"][mime] for t, c, _ in out if t in kind and mime in c["data"]]

    def test_execution_counts_increase(self):
        r1, _ = self.run_cell("1")
        r2, _ = self.run_cell("2")
        self.assertEqual(r2["execution_count"], r1["execution_count"] + 1)

    def test_complete_a_tensor_method(self):
        self.run_cell("x = Tensor{1, 2}")
        code = "y = x:re"
        self.kc.complete(code, len(code))
        reply = self.kc.get_shell_msg(timeout=TIMEOUT)["content"]
        self.assertIn("relu", reply["matches"])
        self.assertIn("reshape", reply["matches"])
        self.assertNotIn("sum", reply["matches"])
        self.assertEqual((reply["cursor_start"], reply["cursor_end"]), (len(code) - 2, len(code)))

    def test_inspect_shows_help(self):
        self.kc.inspect("x:softmax(1)", 6)
        reply = self.kc.get_shell_msg(timeout=TIMEOUT)["content"]
        self.assertTrue(reply["found"])
        self.assertIn("softmax", reply["data"]["text/plain"])
        self.kc.inspect(":schedule x", 3)
        reply = self.kc.get_shell_msg(timeout=TIMEOUT)["content"]
        self.assertIn("the kernels realizing EXPR would run", reply["data"]["text/plain"])
        self.kc.inspect("nosuchname", 4)
        self.assertFalse(self.kc.get_shell_msg(timeout=TIMEOUT)["content"]["found"])

    def test_locals_live_on_in_the_next_cell(self):
        self.run_cell("local kept = 7\nlocal function twice(v) return 2 * v end\nlocal a, b -- declared\na = 1")
        _, out = self.run_cell("twice(kept) + a")
        self.assertEqual(self.data(out, "text/plain"), ["15"])
        _, out = self.run_cell("b == nil")
        self.assertEqual(self.data(out, "text/plain"), ["true"])
        _, out = self.run_cell("for i = 1, 2 do\n  local inner = i\nend\ninner == nil")  # indented: still local
        self.assertEqual(self.data(out, "text/plain"), ["true"])

    def test_runtime_error_has_the_lua_traceback(self):
        r, out = self.run_cell("local function inner() error('deep trouble') end\nfunction outer() inner() end\nouter()")
        self.assertEqual(r["status"], "error")
        self.assertEqual(r["ename"], "LuaError")
        self.assertIn("deep trouble", r["evalue"])
        tb = "\n".join(r["traceback"])
        self.assertIn("in function 'inner'", tb)
        self.assertIn("in function 'outer'", tb)
        errors = [c for t, c, _ in out if t == "error"]
        self.assertEqual(len(errors), 1)
        _, out = self.run_cell("1 + 1")  # alive
        self.assertEqual(self.data(out, "text/plain"), ["2"])

    def test_syntax_error(self):
        r, _ = self.run_cell("x = = 1")
        self.assertEqual(r["ename"], "SyntaxError")
        self.assertIn("unexpected symbol", r["evalue"])

    def test_crash_prone_calls_are_errors(self):
        r, _ = self.run_cell("Tensor.ones(1 << 40):realize()")
        self.assertEqual(r["status"], "error")
        self.assertIn("cannot allocate", r["evalue"])
        r, _ = self.run_cell("function r() return 1 + r() end\nr()")
        self.assertEqual(r["status"], "error")
        self.assertIn("stack overflow", r["evalue"])
        r, _ = self.run_cell("Tensor.ones(2, 3):reshape(4, 4)")
        self.assertEqual(r["status"], "error")
        _, out = self.run_cell("(Tensor{1, 2} + 1):tolist()")
        self.assertEqual(self.data(out, "text/plain"), ["{2, 3}"])

    def test_interrupt_stops_an_infinite_loop(self):
        def interrupt():
            time.sleep(1.0)
            self.km.interrupt_kernel()

        r, _ = self.run_cell("while true do end", during=interrupt)
        self.assertEqual(r["status"], "error")
        self.assertEqual(r["ename"], "Interrupted")
        _, out = self.run_cell("'still here'")
        self.assertEqual(self.data(out, "text/plain"), ["still here"])

    def test_interrupt_between_cells_is_harmless(self):
        self.km.interrupt_kernel()
        time.sleep(0.5)
        r, out = self.run_cell("local s = 0\nfor i = 1, 3000000 do s = s + i end\ns")
        self.assertEqual(r["status"], "ok")
        self.assertEqual(self.data(out, "text/plain"), ["4500001500000"])

    def test_output_streams_while_the_cell_runs(self):
        code = 'print("first")\nlocal t = os.clock()\nwhile os.clock() - t < 1.5 do end\nprint("second")'
        r, out = self.run_cell(code)
        self.assertEqual(r["status"], "ok")
        streams = [(c["text"], at) for t, c, at in out if t == "stream"]
        first = [at for text, at in streams if "first" in text]
        second = [at for text, at in streams if "second" in text]
        self.assertTrue(first and second, streams)
        self.assertLess(first[0], second[0] - 1.0, f"'first' should arrive while the cell runs: {streams}")

    def test_progress_bar_and_debug_lines_stream(self):
        _, out = self.run_cell('for i = 1, 3 do io.write(("\\rstep %d/3"):format(i)); io.flush() end\nprint()')
        self.assertIn("\rstep 1/3", self.text(out))
        self.assertIn("\rstep 3/3", self.text(out))
        _, out = self.run_cell(":debug 2\n(Tensor{1, 2, 3} + 1):sum():item()")
        self.run_cell(":debug 0")
        self.assertIn("*** CPU", self.text(out))  # the engine's DEBUG line, printed from C++
        self.assertEqual(self.data(out, "text/plain"), ["9"])

    def test_colon_commands_are_magics(self):
        _, out = self.run_cell(":help relu")
        self.assertIn("relu", self.text(out))
        _, out = self.run_cell("z = Tensor{1, 2, 3}\n:schedule (z + 1):sum()")
        self.assertIn("why a kernel", self.text(out))
        _, out = self.run_cell(":kernels (z * 2):sum()")
        self.assertIn("GFLOPS", self.text(out))
        _, out = self.run_cell(":ir (z + 1) graph")
        self.assertIn("=== graph", self.text(out))
        _, out = self.run_cell(":time (z + 1):sum()")
        self.assertRegex(self.text(out), r"\d")
        _, out = self.run_cell(":src (z * 3):relu()")
        html = self.data(out, "text/html")
        self.assertEqual(len(html), 1)
        self.assertIn("<span style=", html[0])
        self.assertIn("kernel 1 of 1", self.data(out, "text/plain")[0])
        _, out = self.run_cell(":viz (z * 5 + 1):sum()")  # not realized before: a kernel to show
        html = self.data(out, "text/html")[0]
        self.assertIn("<svg", html)
        self.assertIn("<h4>tensor graph</h4>", html)
        self.assertIn("<summary><b>simplified</b></summary>", html)
        r, _ = self.run_cell(":nosuch")
        self.assertEqual(r["status"], "error")
        self.assertIn("unknown command", r["evalue"])

    def test_tensor_table(self):
        _, out = self.run_cell("Tensor{{1, 2}, {3, 4}}")
        html = self.data(out, "text/html")[0]
        self.assertIn("shape <code>(2, 2)</code>", html)
        self.assertIn("dtype <code>int32</code>", html)
        self.assertIn("device <code>CPU</code>", html)
        self.assertIn("<td>4</td>", html)
        _, out = self.run_cell("Tensor.arange(0, 3000):reshape(30, 100)")
        html = self.data(out, "text/html")[0]
        self.assertIn("summarized", html)
        self.assertIn("<td>2999</td>", html)  # the last element
        self.assertIn("<th>29</th>", html)  # the last row's label
        self.assertNotIn("<td>1500</td>", html)
        self.assertLess(html.count("<tr>"), 10)

    def test_plot_image(self):
        _, out = self.run_cell('plot = require "plot"\nplot.image(Tensor.arange(0, 16):reshape(4, 4))')
        svg = self.data(out, "image/svg+xml", ("display_data",))
        self.assertEqual(len(svg), 1)
        self.assertIn("<svg", svg[0])
        self.assertEqual(self.data(out, "text/plain", ("execute_result",)), [])

    def test_z_restart_clears_the_state(self):  # last: the others share this kernel
        self.run_cell("survivor = 1")
        self.km.restart_kernel(now=True)
        self.kc.wait_for_ready(timeout=TIMEOUT)
        _, out = self.run_cell("survivor == nil")
        self.assertEqual(self.data(out, "text/plain"), ["true"])


class Startup(unittest.TestCase):
    def test_a_kernel_that_cannot_start_says_why(self):
        exe = os.path.join(BUILD, "moongrad-kernel")
        p = subprocess.run([exe, "-f", "/nonexistent/connection.json"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("moongrad-kernel: cannot start:", p.stderr)
        p = subprocess.run([exe], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage: moongrad-kernel -f CONNECTION_FILE", p.stderr)
        env = dict(os.environ, DEV="NOSUCHDEVICE")
        p = subprocess.run([exe, "-f", "/nonexistent/connection.json"], capture_output=True, text=True,
                           timeout=60, env=env)
        self.assertIn("cannot start", p.stderr)
        self.assertIn("NOSUCHDEVICE", p.stderr)
        # a Lua state that cannot be set up (its stdlib missing), with a good connection file
        from jupyter_client.connect import write_connection_file
        conn, _ = write_connection_file(os.path.join(os.environ["JUPYTER_RUNTIME_DIR"], "kernel-test-bad.json"))
        env = dict(os.environ, MG_STDLIB_DIR="/nonexistent")
        p = subprocess.run([exe, "-f", conn], capture_output=True, text=True, timeout=60, env=env)
        os.remove(conn)
        self.assertEqual(p.returncode, 1)
        self.assertIn("moongrad-kernel: cannot start: cannot set up the Lua state: MG_STDLIB_DIR: cannot read", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
