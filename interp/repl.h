// The interactive prompt: line editing, history, completion and colon commands on a terminal;
// the same evaluation without decorations when stdin is a pipe, so it can be scripted and tested.
#pragma once
#include "interp/lua_state.h"

namespace mg::lua {

// Reads entries from stdin until end of input. On a terminal: libedit editing, a history file,
// TAB completion, Ctrl-C to abandon the entry or interrupt running Lua code. Returns the exit
// status: 0, or 1 when stdin is not a terminal and some entry failed.
int run_prompt(LuaState& lua);

} // namespace mg::lua
