// The CPU devices. CPU: C source from the C renderer, compiled in process by clang 15 into an
// object file. LLVM: LLVM IR text from the LLVM renderer, optimized and compiled by LLVM 15.
// Both link their objects with LLVM's ORC JIT and keep them in an on-disk cache, so a second run
// compiles nothing; both split a kernel's outermost loop over the cores.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "backends/cpu/c_renderer.h"
#include "backends/cpu/clang_jit.h"
#include "backends/cpu/limits_probe.h"
#include "backends/cpu/llvm_renderer.h"
#include "engine/device.h"
#include "engine/digest.h"
#include "engine/settings.h"

namespace mg {

namespace {

// -fwrapv: integer arithmetic wraps, as on every other backend (C leaves signed overflow undefined)
const std::vector<std::string> kFlags{"-O2", "-march=native", "-fPIC", "-fno-math-errno", "-fwrapv", "-w"};

std::string cache_dir() { return cache_root() + "/kernels"; }

// Workers that run shares of a kernel with the calling thread (core 0). Each core owns an equal
// run of the shares, the part of the loop a fixed split would give it, and takes them from the
// front; a core that runs out takes the others' from the back. Cores of equal speed each run their
// own part, in order, as a fixed split would; a core slowed by another process (a shared machine)
// leaves its last shares to the others instead of making every kernel wait for it. Each owner's
// run is one word, (generation, front, back), so that a worker waking late for a finished kernel
// takes nothing of the next one, and the caller returns once every share is done. Between kernels
// a worker, and the caller waiting for the others, first spin for a while (kSpin) and only then
// sleep: a TinyJit replay launches the next kernel within microseconds, and waking a sleeping
// thread took longer than many of the MNIST step's kernels run.
class ThreadPool {
public:
  static constexpr int kMaxCores = 256;
  // job(0) .. job(shares - 1) on n threads, this one and n - 1 workers (a multiple of n shares
  // gives each the same number of its own)
  void run(int n, int shares, const std::function<void(int)>& job) {
    n = std::min(n, kMaxCores);
    while (static_cast<int>(workers_.size()) < n - 1) {
      int id = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, id] { work(id); });
    }
    uint32_t g;
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = &job, cores_ = n, shares_ = shares;
      done_.store(0, std::memory_order_relaxed);
      g = static_cast<uint32_t>(gen_.load(std::memory_order_relaxed) + 1);
      const int per = shares / n;
      for (int c = 0; c < n; c++)
        runs_[c].store(pack(g, c * per, c + 1 == n ? shares : (c + 1) * per), std::memory_order_relaxed);
      gen_.store(g, std::memory_order_release);
    }
    cv_.notify_all();
    take_shares(g, 0, n, shares, job);
    if (spin([&] { return done_.load(std::memory_order_acquire) == shares; })) return;
    std::unique_lock<std::mutex> lk(m_);
    all_done_.wait(lk, [&] { return done_.load(std::memory_order_acquire) == shares; });
  }

private:
  static constexpr auto kSpin = std::chrono::microseconds(200);
  static uint64_t pack(uint32_t g, int front, int back) {
    return uint64_t{g} << 32 | uint64_t(static_cast<uint16_t>(front)) << 16 | static_cast<uint16_t>(back);
  }
  // Polls ready() until it holds (true) or kSpin has passed (false).
  template <class F> static bool spin(F ready) {
    auto end = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0;; i++) {
      if (ready()) return true;
      __builtin_ia32_pause();
      if (i % 64 == 63 && std::chrono::steady_clock::now() > end) return false;
    }
  }
  // A share of run g from core c's run (its front, or its back for another core), or -1.
  int claim(uint32_t g, int c, bool front) {
    uint64_t w = runs_[c].load(std::memory_order_acquire);
    for (;;) {
      int f = static_cast<int>(w >> 16 & 0xffff), b = static_cast<int>(w & 0xffff);
      if (static_cast<uint32_t>(w >> 32) != g || f >= b) return -1;
      uint64_t next = front ? pack(g, f + 1, b) : pack(g, f, b - 1);
      if (runs_[c].compare_exchange_weak(w, next, std::memory_order_acq_rel)) return front ? f : b - 1;
    }
  }
  // Runs shares of run g, core `me`'s own first, until none is left anywhere. A share claimed keeps
  // run g from finishing, so job outlives every call made here.
  void take_shares(uint32_t g, int me, int n, int shares, const std::function<void(int)>& job) {
    for (;;) {
      int s = claim(g, me, true);
      for (int k = 1; s < 0 && k < n; k++)
        s = claim(g, (me + k) % n, false);
      if (s < 0) return;
      job(s);
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == shares) {
        std::lock_guard<std::mutex> lk(m_);
        all_done_.notify_one();
      }
    }
  }
  void work(int id) {
    uint32_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      int n, shares;
      spin([&] { return gen_.load(std::memory_order_acquire) != seen; });
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return gen_.load(std::memory_order_acquire) != seen; });
        seen = gen_.load(std::memory_order_relaxed);
        if (id >= cores_) continue;
        job = job_, n = cores_, shares = shares_;
      }
      take_shares(seen, id, n, shares, *job);
    }
  }
  std::vector<std::thread> workers_; // never joined: the device lives until the process exits
  std::mutex m_;
  std::condition_variable cv_, all_done_;
  const std::function<void(int)>* job_ = nullptr;
  int cores_ = 1, shares_ = 0;
  std::atomic<int> done_{0};
  std::atomic<uint32_t> gen_{0};
  std::array<std::atomic<uint64_t>, kMaxCores> runs_{}; // each core's (generation, front, back)
};

// One pool per lane (engine/realize.cpp runs the kernels of several devices at once, a lane
// each): two lanes sharing one pool's job slot would run each other's kernels. Lanes are few and
// kept, as the workers are.
ThreadPool& pool(int lane) {
  static std::mutex m;
  static auto* pools = new std::vector<std::unique_ptr<ThreadPool>>();
  std::lock_guard<std::mutex> lk(m);
  while (static_cast<int>(pools->size()) <= lane)
    pools->push_back(std::make_unique<ThreadPool>());
  return *(*pools)[static_cast<size_t>(lane)];
}

using KernelFn = void (*)(void**, int, int);

// The linker lives until the process exits: kept programs may run until then, and LLVM's own
// statics are gone before a static linker would be destroyed.
ObjectLinker& linker() {
  static ObjectLinker* l = new ObjectLinker();
  return *l;
}

class CpuProgram : public Program {
public:
  // `library` >= 0: a trial's own code, removed with the program.
  explicit CpuProgram(KernelFn fn, int library = -1) : fn_(fn), library_(library) {}
  ~CpuProgram() override {
    if (library_ >= 0) linker().unload(library_);
  }
  CpuProgram(const CpuProgram&) = delete;
  CpuProgram& operator=(const CpuProgram&) = delete;
  void run(void** bufs, size_t, const Launch& launch) override {
    int cores = launch.cores;
    if (cores <= 1) return fn_(bufs, 0, 1);
    // the kernel runs share i of n as it would run core i of n
    int shares = launch.shares > 0 ? std::min(launch.shares, 1 << 15) : cores; // ThreadPool counts in 16 bits
    pool(launch.lane).run(cores, shares, [&](int share) { fn_(bufs, share, shares); });
  }

private:
  KernelFn fn_;
  int library_;
};

// A cache file is the object followed by a trailer: a tag and the digest of the object, so a
// damaged or truncated file is detected and rebuilt instead of handed to the linker.
const std::string kTrailerTag = "\nmoongrad-object ";

std::string with_trailer(const std::string& object) { return object + kTrailerTag + digest(object); }

// The object in `file`, or "" when the file is missing or damaged.
std::string read_object(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  size_t tail = kTrailerTag.size() + 32;
  if (s.size() <= tail || s.compare(s.size() - tail, kTrailerTag.size(), kTrailerTag) != 0) return "";
  std::string object = s.substr(0, s.size() - tail);
  return digest(object) == s.substr(s.size() - 32) ? object : "";
}

// What tells the two CPU devices apart: how source is written and how it becomes an object.
struct Language {
  std::string device;
  std::string (*render)(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel);
  std::string (*compile)(const std::string& src); // -> object code
  std::string compiler;                           // for cache keys
  std::string (*explain)(const std::string& src); // what the compiler makes of it, as text (or null)
  std::vector<std::string> (*preamble)();         // Device::preamble (or null)
};

std::string compile_c_source(const std::string& src) {
  std::vector<std::string> flags = kFlags;
  for (size_t at = 0; src.compare(at, std::strlen(kCompileFlagTag), kCompileFlagTag) == 0;) {
    size_t end = src.find('\n', at);
    flags.push_back(src.substr(at + std::strlen(kCompileFlagTag), end - at - std::strlen(kCompileFlagTag)));
    at = end == std::string::npos ? src.size() : end + 1;
  }
  return compile_c(src, flags);
}

class CpuDevice : public Device {
public:
  explicit CpuDevice(Language lang) : lang_(std::move(lang)) {}
  std::string name() const override { return lang_.device; }
  ~CpuDevice() override {
    for (auto& [size, p] : spare_)
      std::free(p);
  }
  void* alloc(size_t bytes) override {
    // Linux overcommits: a buffer larger than RAM would "succeed" and the process be killed
    // later when the kernel touches it. Refuse it here with an error instead.
    size_t ram = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
    if (bytes > ram)
      throw std::runtime_error("cannot allocate " + std::to_string(bytes >> 20) +
                               " MiB on CPU: the machine has " + std::to_string(ram >> 20) +
                               " MiB of memory");
    size_t size = rounded(bytes);
    if (void* p = take_spare(size)) return p;
    void* p = std::aligned_alloc(alignment(bytes), size);
    if (!p) { // the spare buffers go back before giving up
      drop_spares();
      p = std::aligned_alloc(alignment(bytes), size);
    }
    if (!p) throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes on CPU");
    // marked for transparent huge pages where the kernel allows (Debian's default is "madvise"):
    // a fresh 16 MiB result then faults in 8 times, not 4096
    if (alignment(bytes) == kHuge) ::madvise(p, size, MADV_HUGEPAGE); // advice only
    return p;
  }
  void free(void* p, size_t bytes) override {
    size_t size = rounded(bytes);
    if (size >= kSpareMin) {
      std::lock_guard<std::mutex> lock(spare_m_);
      if (spare_bytes_ + size <= kSpareMax) {
        spare_.emplace(size, p);
        spare_bytes_ += size;
        return;
      }
    }
    std::free(p);
  }
  void copyin(void* dst, const void* src, size_t n) override {
    if (n) std::memcpy(dst, src, n);
  }
  void copyout(void* dst, const void* src, size_t n) override {
    if (n) std::memcpy(dst, src, n);
  }
  std::string render(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel) override {
    return lang_.render(fn, linear, parallel);
  }
  int compile_count() const override { return compiles_.load(); }
  std::string fingerprint() const override { return compiler_id(); }
  std::string compiled_text(const std::string&, const std::string& src) override {
    return lang_.explain ? lang_.explain(src) : "";
  }
  std::vector<std::string> preamble() const override {
    return lang_.preamble ? lang_.preamble() : std::vector<std::string>{};
  }
  // The host's limits, whichever language the kernels are written in: the probes are C.
  std::optional<DeviceLimits> measure_limits(int threads) override { return measure_host_limits(threads); }
  bool runs_concurrently() const override { return true; }
  bool host_memory() const override { return true; }
  Target target() const override {
    Target t;
    t.vector_packs = lang_.device == "CPU"; // the C renderer's (slp.h); LLVM's IR has none
    return t;
  }

  // Safe to call from several threads at once (BEAM compiles its candidates in parallel): the
  // map and the count are locked, the compile itself is not.
  std::unique_ptr<Program> compile(const std::string& fn, const std::string& src) override {
    std::string key = kernel_key(fn, src);
    {
      std::lock_guard<std::mutex> lk(m_);
      if (auto it = loaded_.find(key); it != loaded_.end()) return std::make_unique<CpuProgram>(it->second);
    }
    KernelFn f = reinterpret_cast<KernelFn>(load_or_build(key, fn, src).address);
    std::lock_guard<std::mutex> lk(m_);
    loaded_.emplace(key, f);
    return std::make_unique<CpuProgram>(f);
  }
  // A trial's program owns its code, which is freed with it (BEAM tries hundreds).
  std::unique_ptr<Program> compile_trial(const std::string& fn, const std::string& src) override {
    auto l = load_or_build(kernel_key(fn, src), fn, src);
    return std::make_unique<CpuProgram>(reinterpret_cast<KernelFn>(l.address), l.library);
  }

private:
  // What the object code depends on besides the source: the compiler, its flags and the host CPU
  // (asked of the CPU once).
  const std::string& compiler_id() const {
    std::call_once(id_once_, [&] { id_ = lang_.compiler + " " + host_cpu_id(); });
    return id_;
  }
  std::string kernel_key(const std::string& fn, const std::string& src) const {
    return digest(compiler_id() + "\n" + fn + "\n" + src);
  }

  ObjectLinker::Loaded load_or_build(const std::string& key, const std::string& fn, const std::string& src) {
    std::string dir = cache_dir(), path = dir + "/" + key + ".o";
    if (std::string object = read_object(path); !object.empty()) {
      try {
        return linker().load(object, fn);
      } catch (const std::runtime_error&) {
        // an entry that does not link is rebuilt below
      }
    }
    std::string object = lang_.compile(src);
    compiles_++;
    // Write beside the final name and rename: a crash, a second process or a second thread never
    // sees half a file. A cache that cannot be written costs a compile next time, nothing more.
    make_dirs(dir);
    std::string tmp = path + "." + std::to_string(::getpid()) + "." +
                      std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
    {
      std::ofstream f(tmp, std::ios::binary);
      f << with_trailer(object);
      if (!f.flush()) std::remove(tmp.c_str());
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
    return linker().load(object, fn);
  }

  // Big buffers on 2 MiB boundaries (huge pages), the rest on cache lines.
  static constexpr size_t kHuge = 2 << 20;
  static size_t alignment(size_t bytes) { return bytes >= 2 * kHuge ? kHuge : 64; }
  static size_t rounded(size_t bytes) {
    size_t a = alignment(bytes);
    return (bytes + a - 1) / a * a;
  }
  // Freed buffers of 1 MiB or more are kept, up to 512 MiB in all, for the next buffer of the
  // same size (tinygrad's LRUAllocator does the same): memory fresh from the kernel is zeroed
  // page by page on first touch, which took 6% of a step of two Winograd convolutions (their
  // 10-21 MiB intermediates, new every step). device memory counters count buffers in use only.
  static constexpr size_t kSpareMin = 1 << 20, kSpareMax = size_t{512} << 20;
  void* take_spare(size_t size) {
    std::lock_guard<std::mutex> lock(spare_m_);
    auto it = spare_.find(size);
    if (it == spare_.end()) return nullptr;
    void* p = it->second;
    spare_.erase(it);
    spare_bytes_ -= size;
    return p;
  }
  void drop_spares() {
    std::lock_guard<std::mutex> lock(spare_m_);
    for (auto& [size, p] : spare_)
      std::free(p);
    spare_.clear();
    spare_bytes_ = 0;
  }

  Language lang_;
  std::mutex spare_m_;
  std::unordered_multimap<size_t, void*> spare_;
  size_t spare_bytes_ = 0;
  mutable std::once_flag id_once_;
  mutable std::string id_;
  std::mutex m_;
  std::unordered_map<std::string, KernelFn> loaded_;
  std::atomic<int> compiles_{0};
};

std::string c_compiler() {
  std::string s = "clang-15-in-process";
  for (auto& f : kFlags)
    s += " " + f;
  return s;
}

const bool registered_cpu = register_device("CPU", [] {
  return std::make_unique<CpuDevice>(
      Language{"CPU", render_c, compile_c_source, c_compiler(), nullptr, c_preamble});
});
const bool registered_llvm = register_device("LLVM", [] {
  return std::make_unique<CpuDevice>(
      Language{"LLVM", render_llvm, compile_ir, "llvm-15-ir O2 loop+slp vectorizers", optimize_ir, nullptr});
});

} // namespace
} // namespace mg
