// The Jupyter kernel's answers (see jupyter_kernel.h). C++ here owns the protocol's side (JSON,
// streams, signals); what a cell means and how values look is stdlib/notebook.lua's.
#include "interp/jupyter_kernel.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <vector>

#include <xeus/xhelper.hpp>

#include "interp/interrupt.h"

namespace mg::lua {

namespace {

constexpr const char* kNotebookKey = "moongrad.notebook";
JupyterKernel* g_kernel = nullptr; // the one kernel of this process, for the Lua bindings

// Jupyter counts cursor positions in Unicode code points; Lua sees bytes.
size_t byte_of(const std::string& s, int cp) {
  size_t i = 0;
  for (int k = 0; k < cp && i < s.size(); k++) {
    i++;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80)
      i++;
  }
  return i;
}
int cp_of(const std::string& s, size_t byte) {
  int n = 0;
  for (size_t i = 0; i < byte && i < s.size(); i++)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) n++;
  return n;
}

// SIGINT stays blocked in every thread (main blocks it before any thread starts) except in the
// main thread while a cell's Lua runs: Jupyter's interrupt is a SIGINT to the process, and
// outside a cell it would break ZeroMQ's poll. One that came between cells is dropped first.
class SigintWindow {
public:
  explicit SigintWindow(lua_State* L) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    timespec zero{};
    while (sigtimedwait(&set_, nullptr, &zero) == SIGINT) {
    }
    scope_.emplace(L);
    pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);
  }
  ~SigintWindow() { pthread_sigmask(SIG_BLOCK, &set_, nullptr); }
  SigintWindow(const SigintWindow&) = delete;
  SigintWindow& operator=(const SigintWindow&) = delete;

private:
  sigset_t set_;
  std::optional<InterruptScope> scope_;
};

// A Lua table of strings (mime type -> content) as JSON.
nl::json bundle_of(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  nl::json out = nl::json::object();
  if (!lua_istable(L, idx)) return out;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_isstring(L, -1)) {
      size_t n = 0;
      const char* s = lua_tolstring(L, -1, &n);
      out[lua_tostring(L, -2)] = std::string(s, n);
    }
    lua_pop(L, 1);
  }
  return out;
}

// notebook.display(bundle) from Lua
int lua_display(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (g_kernel) g_kernel->display(bundle_of(L, 1));
  return 0;
}
const Binding kDisplay{"notebook.display", lua_display};

// The traceback's lines that say something: not the C frames nor the kernel's own calls.
std::vector<std::string> trace_lines(const std::string& tb) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < tb.size()) {
    size_t end = tb.find('\n', pos);
    if (end == std::string::npos) end = tb.size();
    std::string line = tb.substr(pos, end - pos);
    pos = end + 1;
    if (line.find("[C]: in ?") != std::string::npos) continue;
    out.push_back(line);
  }
  return out;
}

} // namespace

JupyterKernel::JupyterKernel() {
  g_kernel = this;
  xeus::register_interpreter(this);
}

JupyterKernel::~JupyterKernel() {
  capture_.reset(); // output back on the real descriptors before Lua goes
  lua_.reset();
  g_kernel = nullptr;
}

void JupyterKernel::log(const std::string& line) const {
  std::string s = "moongrad-kernel: " + line + "\n";
  int fd = capture_ ? capture_->log_fd() : 2;
  (void)!write(fd, s.data(), s.size());
}

void JupyterKernel::configure_impl() {
  // The Lua state first: if it fails, the error goes to the log through the real stderr.
  lua_ = std::make_unique<LuaState>();
  lua_->set_args({"moongrad-kernel"}, 0);
  lua_State* L = lua_->get();
  lua_getglobal(L, "require");
  lua_pushstring(L, "notebook");
  if (!lua_->pcall(1, 1)) throw std::runtime_error("cannot load stdlib/notebook.lua: " + lua_->error());
  lua_setfield(L, LUA_REGISTRYINDEX, kNotebookKey);
  push_notebook_fn("install");
  push_binding(L, kDisplay);
  if (!lua_->pcall(1, 0)) throw std::runtime_error("notebook.install: " + lua_->error());
  capture_ = std::make_unique<StreamCapture>(
      [this](const std::string& name, const std::string& text) { publish_stream(name, text); });
  log("ready (moongrad " MG_VERSION ", " LUA_RELEASE ")");
}

void JupyterKernel::push_notebook_fn(const char* fn) {
  lua_State* L = lua_->get();
  lua_getfield(L, LUA_REGISTRYINDEX, kNotebookKey);
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
}

void JupyterKernel::display(nl::json data) {
  capture_->flush(); // what the cell printed before the picture shows above it
  std::lock_guard<std::mutex> g(capture_->lock());
  display_data(std::move(data), nl::json::object(), nl::json::object());
}

nl::json JupyterKernel::error_reply(const std::string& ename, const std::string& evalue,
                                    const std::string& tb) {
  std::vector<std::string> trace = {"\033[0;31merror: " + evalue + "\033[0m"};
  for (auto& line : trace_lines(tb))
    trace.push_back(line);
  publish_execution_error(ename, evalue, trace);
  // by hand: xeus 2.4.1's create_error_reply swaps ename and evalue
  return nl::json{{"status", "error"}, {"ename", ename}, {"evalue", evalue}, {"traceback", trace}};
}

nl::json JupyterKernel::execute_request_impl(int count, const std::string& code, bool silent, bool, nl::json,
                                             bool) {
  lua_State* L = lua_->get();
  int top = lua_gettop(L);
  capture_->flush(); // output from between cells goes to the log
  capture_->set_live(true);
  struct EndCell { // whatever happens, the cell's output is sent before its reply
    StreamCapture& c;
    ~EndCell() {
      c.flush();
      c.set_live(false);
    }
  };
  nl::json result;
  std::string failed;       // the error's name, if any
  std::string syntax_error; // the message when the cell did not compile
  {
    EndCell end{*capture_};
    push_notebook_fn("load_cell");
    lua_pushlstring(L, code.data(), code.size());
    lua_pushinteger(L, count);
    if (!lua_->pcall(2, 2)) {
      failed = "InternalError";
    } else if (lua_isnil(L, -2)) { // a syntax error, or a bad colon command
      failed = "SyntaxError";
      syntax_error = lua_isstring(L, -1) ? lua_tostring(L, -1) : "invalid cell";
    } else {
      lua_pop(L, 1);
      bool ok;
      {
        SigintWindow armed(L);
        ok = lua_->pcall(0, LUA_MULTRET);
      }
      if (!ok) {
        failed = lua_->error().find(kInterruptedMessage) != std::string::npos ? "Interrupted" : "LuaError";
      } else if (int n = lua_gettop(L) - top; n > 0) {
        push_notebook_fn("bundle");
        lua_insert(L, top + 1);
        if (lua_->pcall(n, 1))
          result = bundle_of(L, -1);
        else
          failed = "LuaError";
      }
    }
    lua_settop(L, top);
  }
  if (!syntax_error.empty()) return error_reply(failed, syntax_error, "");
  if (!failed.empty()) return error_reply(failed, lua_->error(), lua_->traceback());
  if (!silent && !result.empty()) publish_execution_result(count, std::move(result), nl::json::object());
  return xeus::create_successful_reply();
}

nl::json JupyterKernel::complete_request_impl(const std::string& code, int cursor_pos) {
  lua_State* L = lua_->get();
  size_t cursor = byte_of(code, cursor_pos);
  push_notebook_fn("complete");
  lua_pushlstring(L, code.data(), code.size());
  lua_pushinteger(L, static_cast<lua_Integer>(cursor));
  nl::json matches = nl::json::array();
  int start = cursor_pos;
  if (lua_->pcall(2, 2)) {
    lua_Integer n = lua_istable(L, -2) ? static_cast<lua_Integer>(lua_rawlen(L, -2)) : 0;
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, -2, i);
      if (lua_isstring(L, -1)) matches.push_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    start = cp_of(code, static_cast<size_t>(lua_tointeger(L, -1)));
    lua_pop(L, 2);
  }
  return xeus::create_complete_reply(matches, start, cursor_pos);
}

nl::json JupyterKernel::inspect_request_impl(const std::string& code, int cursor_pos, int) {
  lua_State* L = lua_->get();
  push_notebook_fn("inspect");
  lua_pushlstring(L, code.data(), code.size());
  lua_pushinteger(L, static_cast<lua_Integer>(byte_of(code, cursor_pos)));
  if (!lua_->pcall(2, 1)) return xeus::create_inspect_reply(false);
  bool found = lua_isstring(L, -1);
  nl::json data = nl::json::object();
  if (found) data["text/plain"] = lua_tostring(L, -1);
  lua_pop(L, 1);
  return xeus::create_inspect_reply(found, data);
}

nl::json JupyterKernel::is_complete_request_impl(const std::string& code) {
  lua_State* L = lua_->get();
  push_notebook_fn("is_complete");
  lua_pushlstring(L, code.data(), code.size());
  std::string status = "unknown";
  if (lua_->pcall(1, 1)) {
    if (lua_isstring(L, -1)) status = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return xeus::create_is_complete_reply(status, status == "incomplete" ? "  " : "");
}

nl::json JupyterKernel::kernel_info_request_impl() {
  std::string banner =
      "moongrad " MG_VERSION " (" LUA_RELEASE "): tinygrad's ideas in C++, with Lua in front.\n"
      "Colon commands are the magics: :help lists them.";
  nl::json links =
      nl::json::array({{{"text", "Lua 5.4 manual"}, {"url", "https://www.lua.org/manual/5.4/"}}});
  return xeus::create_info_reply("5.3", "moongrad", MG_VERSION, "lua",
                                 LUA_VERSION_MAJOR "." LUA_VERSION_MINOR, "text/x-lua", ".lua", "lua", "lua",
                                 "", banner, false, links);
}

void JupyterKernel::shutdown_request_impl() { log("shutting down"); }

} // namespace mg::lua
