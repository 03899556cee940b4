// SIGINT -> a Lua hook that raises an error at the next instruction (see interrupt.h).
#include "interp/interrupt.h"

#include <csignal>

namespace mg::lua {

namespace {

lua_State* volatile g_running = nullptr; // set while Lua code that may be interrupted runs

void interrupt_hook(lua_State* L, lua_Debug*) {
  lua_sethook(L, nullptr, 0, 0);
  luaL_error(L, "%s", kInterruptedMessage);
}

void on_sigint(int) {
  if (lua_State* L = g_running) lua_sethook(L, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

} // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

InterruptScope::InterruptScope(lua_State* L) : L_(L) { g_running = L; }

InterruptScope::~InterruptScope() {
  g_running = nullptr;
  lua_sethook(L_, nullptr, 0, 0); // a Ctrl-C that came after the code finished
}

} // namespace mg::lua
