#include "engine/machine.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace mg {

namespace {

// The first line of a sysfs file, without surrounding blanks ("" when it cannot be read).
std::string read_line(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// A whole non-negative number filling all of s, or -1.
int64_t parse_count(std::string_view s) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v >= 0 ? v : -1;
}

// sysfs's size: "48K", "1024K", "32M" or plain bytes; -1 when malformed.
int64_t parse_size(std::string s) {
  int64_t unit = 1;
  if (!s.empty()) {
    char c = s.back();
    unit = c == 'K' ? 1 << 10 : c == 'M' ? 1 << 20 : c == 'G' ? 1 << 30 : 1;
    if (unit > 1) s.pop_back();
  }
  int64_t n = parse_count(s);
  return n < 0 ? -1 : n * unit;
}

// The CPUs in a cpulist such as "0-1,4-5" (at least 1).
int count_cpus(const std::string& list) {
  int n = 0;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    std::string part = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = part.find('-');
    int64_t lo = parse_count(part.substr(0, dash));
    int64_t hi = dash == std::string::npos ? lo : parse_count(part.substr(dash + 1));
    if (lo >= 0 && hi >= lo) n += static_cast<int>(hi - lo + 1);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::max(n, 1);
}

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return std::max(static_cast<int>(std::thread::hardware_concurrency()), 1);
}

std::string size_str(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

// MG_<name>_KB: a cache size in KiB, replacing the detected one.
void override_cache(const EnvLookup& env, const char* var, CacheLevel& level, std::string& overrides) {
  const char* v = env(var);
  if (!v) return;
  int64_t kb = parse_count(v);
  if (kb <= 0) throw std::invalid_argument(std::string(var) + "=" + v + ": give a size in KiB, e.g. 1024");
  level.bytes = kb << 10;
  overrides += std::string(overrides.empty() ? "" : " ") + var + "=" + v;
}

const Machine* g_scoped = nullptr; // ScopedMachine's, when one lives

} // namespace

CacheSizes read_cache_sizes(const std::string& dir) {
  CacheSizes c;
  std::vector<std::filesystem::path> entries; // in name order, so a level listed twice reads the same
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind("index", 0) == 0) entries.push_back(it->path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    std::string type = read_line(p / "type");
    int64_t level = parse_count(read_line(p / "level")), bytes = parse_size(read_line(p / "size"));
    if (type == "Instruction" || bytes <= 0) continue;
    CacheLevel* slot = level == 1 ? &c.l1d : level == 2 ? &c.l2 : level == 3 ? &c.l3 : nullptr;
    if (!slot || slot->bytes > 0) continue; // a level listed twice: the first stands
    *slot = {bytes, count_cpus(read_line(p / "shared_cpu_list"))};
    c.found = true;
  }
  return c;
}

CacheSizes default_cache_sizes() {
  CacheSizes c;
  c.l1d = {32 << 10, 1};
  c.l2 = {1 << 20, 1};
  c.l3 = {32 << 20, 2};
  return c;
}

SimdProfile simd_profile_of_width(int lanes) {
  switch (lanes) {
  case 4:
    return {"SSE", 4, 16};
  case 8:
    return {"AVX2", 8, 16};
  case 16:
    return {"AVX-512", 16, 32};
  default:
    throw std::invalid_argument("MG_VECTOR_WIDTH=" + std::to_string(lanes) +
                                ": give 4 (SSE), 8 (AVX2) or 16 (AVX-512) float lanes");
  }
}

#if defined(__x86_64__) || defined(__i386__)
namespace {
// XCR0: the register states the OS saves on a context switch, so the ones a program may use.
uint64_t xcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
} // namespace

SimdProfile detect_simd() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return {"scalar", 1, 8};
  bool sse = d & (1u << 25), osxsave = c & (1u << 27), avx = c & (1u << 28);
  uint64_t x = osxsave ? xcr0() : 0;
  bool os_ymm = (x & 0x6) == 0x6;   // XMM and YMM state
  bool os_zmm = (x & 0xe6) == 0xe6; // and opmask, ZMM_Hi256, Hi16_ZMM
  bool avx2 = false, avx512f = false;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    avx2 = b & (1u << 5);
    avx512f = b & (1u << 16);
  }
  if (avx512f && os_zmm) return simd_profile_of_width(16);
  if (avx2 && avx && os_ymm) return simd_profile_of_width(8);
  if (sse) return simd_profile_of_width(4);
  return {"scalar", 1, 8};
}
#elif defined(__aarch64__)
SimdProfile detect_simd() { return {"NEON", 4, 32}; }
#else
SimdProfile detect_simd() { return {"scalar", 1, 1}; }
#endif

Machine probe_machine(const std::string& cache_dir, const EnvLookup& env) {
  Machine m;
  CacheSizes c = read_cache_sizes(cache_dir);
  m.caches_from_sysfs = c.found;
  CacheSizes d = default_cache_sizes();
  if (!c.found) c = d;
  // every CPU has an L1d and an L2; an L3 sysfs does not list is absent (0)
  m.l1d = c.l1d.bytes > 0 ? c.l1d : d.l1d;
  m.l2 = c.l2.bytes > 0 ? c.l2 : d.l2;
  m.l3 = c.l3;
  m.simd = detect_simd();
  m.cores = usable_cpus();
  if (const char* v = env("MG_VECTOR_WIDTH")) {
    int64_t lanes = parse_count(v);
    if (lanes < 0 || lanes > 64)
      throw std::invalid_argument(std::string("MG_VECTOR_WIDTH=") + v + ": give 4, 8 or 16");
    m.simd = simd_profile_of_width(static_cast<int>(lanes));
    m.overrides = std::string("MG_VECTOR_WIDTH=") + v;
  }
  override_cache(env, "MG_L1D_KB", m.l1d, m.overrides);
  override_cache(env, "MG_L2_KB", m.l2, m.overrides);
  override_cache(env, "MG_L3_KB", m.l3, m.overrides);
  return m;
}

std::string Machine::describe() const {
  std::string s = simd.isa + ": " + std::to_string(simd.float_lanes) + " float lanes, " +
                  std::to_string(simd.vector_registers) + " registers; L1d " + size_str(l1d.bytes) + ", L2 " +
                  size_str(l2.bytes);
  if (l3.bytes > 0)
    s += ", L3 " + size_str(l3.bytes) +
         (l3.shared_by > 1 ? " shared by " + std::to_string(l3.shared_by) + " cores" : "");
  else
    s += ", no L3";
  if (!caches_from_sysfs) s += " (defaults: no cache sizes in sysfs)";
  s += "; " + std::to_string(cores) + (cores == 1 ? " core" : " cores");
  if (!overrides.empty()) s += " [" + overrides + "]";
  return s;
}

const Machine& machine() {
  static const Machine detected =
      probe_machine("/sys/devices/system/cpu/cpu0/cache", [](const char* k) { return std::getenv(k); });
  return g_scoped ? *g_scoped : detected;
}

ScopedMachine::ScopedMachine(const Machine& m) : previous_(g_scoped), machine_(m) { g_scoped = &machine_; }
ScopedMachine::~ScopedMachine() { g_scoped = previous_; }

} // namespace mg
