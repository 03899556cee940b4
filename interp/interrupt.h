// Ctrl-C (SIGINT) stops running Lua code, as lua.c does: the handler installs a hook that raises
// "interrupted (Ctrl-C)" at the next Lua instruction (lua_sethook is async-signal-safe). Engine
// work already in C++ finishes first. The REPL and the Jupyter kernel (whose "interrupt" is a
// SIGINT from Jupyter) share it.
#pragma once
#include <lua.hpp>

namespace mg::lua {

// Installs the SIGINT handler (once per process).
void install_interrupt_handler();

// While one exists, a SIGINT interrupts the Lua code running in L; a SIGINT that arrives after
// the code finished is dropped when it goes.
class InterruptScope {
public:
  explicit InterruptScope(lua_State* L);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

private:
  lua_State* L_;
};

// The message the hook raises, for telling an interrupt from other errors.
inline constexpr const char* kInterruptedMessage = "interrupted (Ctrl-C)";

} // namespace mg::lua
