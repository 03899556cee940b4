#include "engine/inspect.h"

#include <cstdlib>
#include <fstream>

#include "engine/digest.h"
#include "engine/settings.h"

namespace mg {

std::vector<std::pair<std::string, std::string>> ir_stages(const CompiledKernel& c) {
  std::vector<std::pair<std::string, std::string>> r;
  for (const Stage& s : kernel_stages())
    r.emplace_back(s.name, s.text(c));
  return r;
}

RenderedKernel render_on(const ScheduleItem& item, const std::string& device, bool compiled) {
  Device& d = get_device(device);
  CompileOptions o = CompileOptions::from_settings();
  o.debug = 0, o.beam = 0; // the hand-coded opts: BEAM searches only where a kernel runs
  auto c = compile_for(item.ast, d, o, std::nullopt, false);
  RenderedKernel r{c->k.name, c->info.src, "", ""};
  if (compiled) r.compiled = d.compiled_text(c->k.name, r.src);
  r.launch = d.target().gpu
                 ? "global " + shape_str(c->k.global_size) + ", local " + shape_str(c->k.local_size)
                 : "loops on the CPU";
  return r;
}

void cross_compile(const ScheduleItem& item) {
  static const char* spec = std::getenv("MG_CROSS_COMPILE");
  if (!spec) return;
  std::string s = spec;
  size_t colon = s.find(':');
  std::string dev = s.substr(0, colon), dir = colon == std::string::npos ? "." : s.substr(colon + 1);
  make_dirs(dir);
  std::string base = dir + "/" + digest(print_tree(item.ast));
  try {
    RenderedKernel k = render_on(item, dev, true);
    std::ofstream(base + ".src") << k.src;
    std::ofstream(base + ".out") << k.compiled;
  } catch (const std::exception& e) {
    std::ofstream(base + ".error") << e.what();
  }
}

} // namespace mg
