// The prompt. libedit (BSD) does the line editing; stdlib/repl.lua decides what a line means
// (colon commands), what TAB offers and how results print, so those parts are testable from Lua.
#include "interp/repl.h"
#include "interp/interrupt.h"

#include "engine/machine.h"
#include "engine/settings.h"

#include <histedit.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace mg::lua {

namespace {

// ---------------------------------------------------------------- Lua side

// Pushes repl.<fn> (stdlib/repl.lua) from the module LuaState loaded at start-up, without
// calling anything a user could have replaced (require = nil at the prompt must not abort).
void push_repl_fn(lua_State* L, const char* fn) {
  push_repl_module(L);
  lua_pushstring(L, fn);
  lua_rawget(L, -2); // a missing function is nil: calling it is an error the pcall reports
  lua_remove(L, -2);
}

// An error as the prompt shows it: the message, and the Lua frames under it when the error
// came from inside a function (a traceback of the prompt line alone says nothing new).
void report(const LuaState& lua) {
  std::fprintf(stderr, "error: %s\n", lua.error().c_str());
  std::vector<std::string> frames;
  size_t pos = 0;
  const std::string& tb = lua.traceback();
  while (pos < tb.size()) {
    size_t end = tb.find('\n', pos);
    if (end == std::string::npos) end = tb.size();
    std::string line = tb.substr(pos, end - pos);
    pos = end + 1;
    // keep frames of user functions; drop the header, C frames, the prompt chunk and stdlib
    if (line.rfind("\t", 0) != 0 || line.find("[C]") != std::string::npos ||
        line.find("main chunk") != std::string::npos || line.find("stdlib/") != std::string::npos ||
        line.find("(...tail calls...)") != std::string::npos)
      continue;
    frames.push_back(line);
  }
  if (frames.size() >= 2) {
    std::fprintf(stderr, "traceback:\n");
    for (size_t i = 0; i < frames.size() && i < 6; i++)
      std::fprintf(stderr, "%s\n", frames[i].c_str());
  }
  std::fflush(stderr);
}

// The banner's machine line; a malformed MG_VECTOR_WIDTH or MG_*_KB shows as its error.
std::string machine_line() {
  try {
    return machine().describe();
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string history_path() {
  std::string base = xdg_dir("XDG_DATA_HOME", ".local/share");
  if (base.empty()) return "";
  std::error_code ec;
  std::filesystem::create_directories(base + "/moongrad", ec);
  return ec ? "" : base + "/moongrad/history";
}

// ---------------------------------------------------------------- the session

class Prompt {
public:
  Prompt(LuaState& lua, bool tty) : lua_(lua), tty_(tty) {
    if (tty_) open_editor();
  }
  ~Prompt() {
    if (el_) el_end(el_);
    if (hist_) history_end(hist_);
  }
  Prompt(const Prompt&) = delete;
  Prompt& operator=(const Prompt&) = delete;

  int run() {
    if (tty_)
      std::printf(
          "moongrad %s (%s): tinygrad's ideas in C++, with Lua in front.\n"
          "CPU %s (Device.machine())\n"
          "Try  x = Tensor{1,2,3}  then  x * 2  or  :src x:relu():sum()   (:help, TAB, Ctrl-D quits)\n",
          MG_VERSION, LUA_RELEASE, machine_line().c_str());
    std::string line;
    while (read_line(line))
      handle(line);
    if (tty_) std::printf("\n");
    return failures_ > 0 && !tty_ ? 1 : 0;
  }

private:
  void open_editor() {
    hist_ = history_init();
    HistEvent ev;
    history(hist_, &ev, H_SETSIZE, 2000);
    history(hist_, &ev, H_SETUNIQUE, 1);
    hist_file_ = history_path();
    if (!hist_file_.empty()) history(hist_, &ev, H_LOAD, hist_file_.c_str());
    el_ = el_init("moongrad", stdin, stdout, stderr);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_HIST, history, hist_);
    el_set(el_, EL_CLIENTDATA, this);
    el_set(el_, EL_PROMPT, &Prompt::prompt_of);
    el_set(el_, EL_ADDFN, "mg-complete", "complete the name before the cursor", &Prompt::complete_key);
    el_set(el_, EL_BIND, "^I", "mg-complete", nullptr);
    el_set(el_, EL_ADDFN, "mg-interrupt", "abandon the entry", &Prompt::interrupt_key);
    el_set(el_, EL_BIND, "^C", "mg-interrupt", nullptr);
    el_set(el_, EL_BIND, "^R", "em-inc-search-prev", nullptr);
    // While editing, Ctrl-C is a key (above), not a signal; while Lua runs it is SIGINT.
    el_set(el_, EL_SETTY, "-d", "-isig", nullptr);
    el_source(el_, nullptr); // the user's ~/.editrc, if any
    install_interrupt_handler();
  }

  static char* prompt_of(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    static char main_prompt[] = "mg> ", more_prompt[] = "..> ";
    return static_cast<Prompt*>(self)->chunk_.empty() ? main_prompt : more_prompt;
  }

  bool read_line(std::string& line) {
    if (!tty_) return static_cast<bool>(std::getline(std::cin, line));
    interrupted_ = false;
    int n = 0;
    const char* s = el_gets(el_, &n);
    if (interrupted_) { // Ctrl-C: drop the entry, keep going
      chunk_.clear();
      line.clear();
      return true;
    }
    if (!s || n <= 0) return false; // Ctrl-D on an empty line, or end of input
    line.assign(s, static_cast<size_t>(n));
    if (!line.empty() && line.back() == '\n') line.pop_back();
    remember(line);
    return true;
  }

  void remember(const std::string& line) {
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    HistEvent ev;
    history(hist_, &ev, H_ENTER, line.c_str());
    if (hist_file_.empty()) return;
    // write a new file and rename it over the old one: an interrupted save never truncates
    std::string tmp = hist_file_ + ".tmp" + std::to_string(getpid());
    if (history(hist_, &ev, H_SAVE, tmp.c_str()) >= 0)
      std::rename(tmp.c_str(), hist_file_.c_str());
    else
      std::remove(tmp.c_str());
  }

  void handle(const std::string& line) {
    lua_State* L = lua_.get();
    if (chunk_.empty() && line.find_first_not_of(" \t") != std::string::npos &&
        line[line.find_first_not_of(" \t")] == ':') {
      // a colon command: translate it to its Lua call, then run that as a statement
      push_repl_fn(L, "translate");
      lua_pushstring(L, line.c_str());
      if (!lua_.pcall(1, 1)) return fail();
      if (lua_type(L, -1) == LUA_TSTRING) {
        std::string code = lua_tostring(L, -1);
        lua_pop(L, 1);
        if (!guarded([&] { return lua_.run_string(code, "=stdin"); })) fail();
        return;
      }
      lua_pop(L, 1); // not a command (a goto label): Lua handles it
    }
    chunk_ += line;
    push_repl_fn(L, "prepare");
    lua_pushstring(L, chunk_.c_str());
    if (!lua_.pcall(1, 1)) return fail();
    const char* prepared = lua_tostring(L, -1);
    std::string code = prepared ? prepared : chunk_;
    lua_pop(L, 1);
    std::optional<bool> r;
    guarded([&] {
      r = lua_.run_repl(code);
      return true;
    });
    if (!r) { // incomplete: read another line
      chunk_ += "\n";
      return;
    }
    chunk_.clear();
    if (!*r) fail();
  }

  // Runs f with Ctrl-C armed to interrupt Lua.
  template <class F> bool guarded(F f) {
    bool ok;
    {
      InterruptScope armed(lua_.get());
      ok = f();
    }
    std::fflush(stdout);
    return ok;
  }

  void fail() {
    failures_++;
    chunk_.clear();
    std::fflush(stdout);
    report(lua_);
  }

  // ---- keys

  static Prompt* self_of(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return static_cast<Prompt*>(self);
  }

  static unsigned char interrupt_key(EditLine* el, int) {
    Prompt* p = self_of(el);
    p->interrupted_ = true;
    std::printf("^C\n");
    return CC_NEWLINE;
  }

  static unsigned char complete_key(EditLine* el, int) { return self_of(el)->complete(el); }

  unsigned char complete(EditLine* el) {
    const LineInfo* li = el_line(el);
    std::string before(li->buffer, li->cursor);
    lua_State* L = lua_.get();
    push_repl_fn(L, "complete");
    lua_pushstring(L, before.c_str());
    if (!lua_.pcall(1, 2)) return CC_ERROR;
    std::string partial = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
    std::vector<std::string> names;
    lua_Integer n = luaL_len(L, -2);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, -2, i);
      if (lua_isstring(L, -1)) names.emplace_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    lua_pop(L, 2);
    if (names.empty()) return CC_REFRESH_BEEP;
    // insert what every candidate shares beyond the typed part
    std::string common = names[0];
    for (const auto& s : names) {
      size_t k = 0;
      while (k < common.size() && k < s.size() && common[k] == s[k])
        k++;
      common.resize(k);
    }
    if (common.size() > partial.size()) {
      el_insertstr(el, common.substr(partial.size()).c_str());
      return CC_REFRESH;
    }
    list_columns(names);
    return CC_REDISPLAY;
  }

  static void list_columns(const std::vector<std::string>& names) {
    size_t width = 1;
    for (const auto& s : names)
      width = std::max(width, s.size() + 2);
    winsize ws{};
    size_t cols = (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) ? ws.ws_col : 80;
    size_t per_row = std::max<size_t>(1, cols / width);
    std::printf("\n");
    for (size_t i = 0; i < names.size(); i++)
      std::printf("%-*s%s", static_cast<int>(width), names[i].c_str(),
                  (i + 1) % per_row == 0 || i + 1 == names.size() ? "\n" : "");
    std::fflush(stdout);
  }

  LuaState& lua_;
  bool tty_;
  EditLine* el_ = nullptr;
  History* hist_ = nullptr;
  std::string hist_file_;
  std::string chunk_;
  bool interrupted_ = false;
  int failures_ = 0;
};

} // namespace

int run_prompt(LuaState& lua) {
  // libedit needs a terminal on both ends to draw; piped output gets the plain loop.
  Prompt p(lua, isatty(0) && isatty(1));
  return p.run();
}

} // namespace mg::lua
