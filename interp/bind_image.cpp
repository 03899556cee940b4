// require "mgimage": image files (PNG, JPEG, BMP, ...) decoded by stb_image (Debian's libstb).
//   read(path [, channels]) -> bytes, height, width, channels   8-bit samples, rows top to bottom,
//                                                               channels interleaved
#include <stb_image.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "interp/lua_state.h"

namespace mg::lua {

namespace {

int image_read(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  int want = static_cast<int>(luaL_optinteger(L, 2, 0));
  if (want < 0 || want > 4)
    throw std::invalid_argument("channels must be 1 to 4 (or 0: as the file has), not " +
                                std::to_string(want));
  int w = 0, h = 0, c = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load(path, &w, &h, &c, want), stbi_image_free);
  if (!px) {
    const char* why = stbi_failure_reason();
    throw std::invalid_argument(std::string(path) + ": cannot read the image (" + (why ? why : "unknown") +
                                ")");
  }
  if (want) c = want;
  lua_pushlstring(L, reinterpret_cast<const char*>(px.get()), static_cast<size_t>(w) * h * c);
  lua_pushinteger(L, h);
  lua_pushinteger(L, w);
  lua_pushinteger(L, c);
  return 4;
}

const Binding kImageFns[] = {{"mgimage.read", image_read}};

} // namespace

int open_mgimage(lua_State* L) {
  lua_newtable(L);
  set_bindings(L, -1, kImageFns);
  return 1;
}

} // namespace mg::lua
