// The Jupyter kernel: xeus speaks the protocol, this class answers it with the REPL's Lua state
// (LuaState: the same globals, stdlib/repl.lua's colon commands and completion) and
// stdlib/notebook.lua's cells, rich output and inspection.
#pragma once
#include <memory>
#include <string>

#include <xeus/xinterpreter.hpp>

#include "interp/lua_state.h"
#include "interp/stream_capture.h"

namespace mg::lua {

class JupyterKernel final : public xeus::xinterpreter {
public:
  JupyterKernel();
  ~JupyterKernel() override;

  // notebook.display(bundle): a display_data message in the running cell (bound into Lua).
  void display(nl::json data);
  // Writes a line to the kernel's log (Jupyter's server log), not to a cell.
  void log(const std::string& line) const;

private:
  void configure_impl() override;
  nl::json execute_request_impl(int execution_counter, const std::string& code, bool silent,
                                bool store_history, nl::json user_expressions, bool allow_stdin) override;
  nl::json complete_request_impl(const std::string& code, int cursor_pos) override;
  nl::json inspect_request_impl(const std::string& code, int cursor_pos, int detail_level) override;
  nl::json is_complete_request_impl(const std::string& code) override;
  nl::json kernel_info_request_impl() override;
  void shutdown_request_impl() override;

  // Pushes notebook.<fn> (stdlib/notebook.lua).
  void push_notebook_fn(const char* fn);
  // An error as Jupyter's error reply, published in the cell: its name, the Lua message and
  // the Lua traceback.
  nl::json error_reply(const std::string& ename, const std::string& evalue, const std::string& traceback);

  std::unique_ptr<LuaState> lua_;
  std::unique_ptr<StreamCapture> capture_;
};

} // namespace mg::lua
