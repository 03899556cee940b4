#include "engine/kernel_cache.h"

#include <unordered_map>

#include "engine/inspect.h"

namespace mg {

namespace {

// device + "/" + variant -> AST hash -> kernels (equal hashes, different ASTs: rare, kept apart)
using Kernels = std::unordered_multimap<size_t, std::unique_ptr<CompiledKernel>>;
std::unordered_map<std::string, Kernels>& cache() {
  static auto* c = new std::unordered_map<std::string, Kernels>(); // never destroyed: programs outlive exit
  return *c;
}

} // namespace

const CompiledKernel& compiled_for(const ScheduleItem& item) {
  CompileOptions o = CompileOptions::from_settings();
  Kernels& kernels = cache()[item.bufs.at(0)->device + "/" + o.variant()];
  auto [lo, hi] = kernels.equal_range(item.ast->hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second->ast == item.ast) return *it->second;
  cross_compile(item);
  return *kernels.emplace(item.ast->hash, compile_kernel(item, o))->second;
}

void drop_compiled(const std::string& device) {
  std::erase_if(cache(),
                [&](const auto& kv) { return kv.first == device || kv.first.rfind(device + "/", 0) == 0; });
}

} // namespace mg
