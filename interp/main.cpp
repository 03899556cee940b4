// moongrad: the REPL, or a Lua script / -e chunk, with the engine bound.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/settings.h"
#include "interp/host_memory.h"
#include "interp/lua_state.h"
#include "interp/repl.h"

namespace {

const char* kUsage = R"(usage: moongrad [options] [script.lua [args...]]
  -e CODE     run CODE (may be given more than once)
  -i          enter the prompt after running the script / -e code
  -           run stdin as one script (instead of entry by entry)
  --          stop handling options
  -h, --help  show this help
  -v, --version
With no script and no -e, moongrad is the REPL: on a terminal with line editing, history
and TAB completion; with piped stdin entry by entry without a prompt (exit 1 if one failed).
At the prompt, :help lists the colon commands (:debug :schedule :ir :src :kernels :time ...).
Environment: DEBUG=1..4, BEAM=N, NOOPT=1, DEV=CPU (live: :debug 3, Context({DEBUG=3}, fn)).
)";

int report(const mg::lua::LuaState& lua) {
  std::fprintf(stderr, "moongrad: %s\n", lua.error().c_str());
  // a module that leaves other processes waiting on this one (dist's MPI) stops them now
  lua_State* L = lua.get();
  if (lua_getfield(L, LUA_REGISTRYINDEX, mg::lua::kAtErrorKey) == LUA_TFUNCTION)
    lua_pcall(L, 0, 0, 0);
  else
    lua_pop(L, 1);
  // The stack traceback helps with a long script but buries the message for a learner.
  if (mg::settings().debug >= 1 && !lua.traceback().empty())
    std::fprintf(stderr, "%s\n", lua.traceback().c_str());
  std::fflush(stderr);
  return 1;
}

struct Options {
  std::vector<std::string> exprs;
  bool interactive = false;
  int script = -1; // argv index of the script ("-" for stdin), -1 if none
};

// Returns an exit code if the process should stop now (help, version, bad option).
int parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "-v" || a == "--version") {
      std::printf("moongrad %s (%s)\n", MG_VERSION, LUA_RELEASE);
      return 0;
    }
    if (a == "-e") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "moongrad: '-e' needs an argument\n%s", kUsage);
        return 1;
      }
      o.exprs.push_back(argv[++i]);
    } else if (a.rfind("-e", 0) == 0 && a.size() > 2) {
      o.exprs.push_back(a.substr(2));
    } else if (a == "-i") {
      o.interactive = true;
    } else if (a == "--") {
      if (i + 1 < argc) o.script = i + 1;
      return -1;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "moongrad: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 1;
    } else {
      o.script = i;
      return -1;
    }
  }
  return -1;
}

int run(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, o); rc >= 0) return rc;
  try {
    mg::check_runnable(mg::settings().device); // a bad DEV= is reported now, not at the first tensor
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moongrad: DEV=%s: %s\n", mg::settings().device.c_str(), e.what());
    return 1;
  }
  mg::lua::LuaState lua;
  std::vector<std::string> all(argv, argv + argc);
  lua.set_args(all, o.script >= 0 ? o.script : argc - 1);
  for (const auto& e : o.exprs)
    if (!lua.run_string(e, "=(command line)")) return report(lua);
  if (o.script >= 0) {
    std::string path = all[o.script];
    std::vector<std::string> args(all.begin() + o.script + 1, all.end());
    if (!lua.run_file(path == "-" ? "" : path, args)) return report(lua);
  } else if (o.exprs.empty()) {
    return mg::lua::run_prompt(lua);
  }
  if (o.interactive) return mg::lua::run_prompt(lua);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  // The LuaState is closed inside run(), before the engine's statics go away.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moongrad: %s\n", e.what());
    return 1;
  }
}
