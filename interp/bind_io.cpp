// require "mgio": whole-file reads that see through gzip (zlib), for the data set loaders.
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "interp/lua_state.h"

namespace mg::lua {

namespace {

// mgio.read(path) -> the file's bytes, gunzipped when it is gzip (plain files pass through).
int io_read(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path, "rb"), gzclose);
  if (!f) throw std::runtime_error(std::string("cannot open ") + path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    int n = gzread(f.get(), buf, sizeof buf);
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f.get(), &code);
      throw std::runtime_error(std::string(path) + ": " + (msg ? msg : "read error") +
                               " (damaged gzip file?)");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  lua_pushlstring(L, out.data(), out.size());
  return 1;
}

// mgio.isatty(fd): whether fd (0 stdin, 1 stdout, 2 stderr) is a terminal
int io_isatty(lua_State* L) {
  lua_pushboolean(L, isatty(static_cast<int>(luaL_checkinteger(L, 1))));
  return 1;
}

const Binding kIoFns[] = {{"mgio.read", io_read}, {"mgio.isatty", io_isatty}};

} // namespace

int open_mgio(lua_State* L) {
  lua_newtable(L);
  set_bindings(L, -1, kIoFns);
  // where `./setup.sh` puts the data sets: MG_DATA_DIR, or data/ in the source tree
  const char* d = std::getenv("MG_DATA_DIR");
  lua_pushstring(L, d && *d ? d : MG_SOURCE_DIR "/data");
  lua_setfield(L, -2, "data_dir");
  return 1;
}

} // namespace mg::lua
