// The CPU device: C source from the C renderer, compiled by clang-15 into a shared object,
// dlopen'ed, and kept in an on-disk cache so a second run compiles nothing.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

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
#include "engine/device.h"

namespace mg {

namespace {

const char* kFlags = "-O2 -march=native -fPIC -shared -fno-math-errno -w";

std::string compiler() {
  const char* c = std::getenv("MG_CLANG");
  return c && *c ? c : "clang-15";
}

std::string cache_dir() {
  std::string base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    base = x;
  else if (const char* h = std::getenv("HOME"); h && *h)
    base = std::string(h) + "/.cache";
  else
    base = "/tmp";
  return base + "/moongrad/kernels";
}

void mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); i++)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

// 128-bit FNV-1a pair: a cache key that cannot realistically collide.
std::string digest(const std::string& s) {
  uint64_t a = 1469598103934665603ULL, b = 0x84222325cbf29ce4ULL;
  for (unsigned char c : s) {
    a = (a ^ c) * 1099511628211ULL;
    b = (b ^ c) * 0x100000001b3ULL + 0x9e37;
  }
  char out[40];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return out;
}

class SharedObject {
public:
  explicit SharedObject(const std::string& path) : h_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (!h_) throw std::runtime_error(std::string("cannot load compiled kernel: ") + dlerror());
  }
  ~SharedObject() {
    if (h_) dlclose(h_);
  }
  SharedObject(const SharedObject&) = delete;
  SharedObject& operator=(const SharedObject&) = delete;
  void* sym(const std::string& n) const {
    void* p = dlsym(h_, n.c_str());
    if (!p) throw std::runtime_error("compiled kernel has no symbol " + n);
    return p;
  }

private:
  void* h_;
};

// Workers that each run one share of a kernel; the calling thread runs share 0.
class ThreadPool {
public:
  void run(int n, const std::function<void(int)>& job) {
    while (static_cast<int>(workers_.size()) < n - 1) {
      int id = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, id] { work(id); });
    }
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = &job, cores_ = n, pending_ = n - 1, gen_++;
    }
    cv_.notify_all();
    job(0);
    std::unique_lock<std::mutex> lk(m_);
    done_.wait(lk, [&] { return pending_ == 0; });
  }

private:
  void work(int id) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return gen_ != seen; });
        seen = gen_;
        if (id >= cores_) continue;
        job = job_;
      }
      (*job)(id);
      std::lock_guard<std::mutex> lk(m_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
  std::vector<std::thread> workers_; // never joined: the device lives until the process exits
  std::mutex m_;
  std::condition_variable cv_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int cores_ = 1, pending_ = 0;
  uint64_t gen_ = 0;
};

ThreadPool& pool() {
  static ThreadPool* p = new ThreadPool();
  return *p;
}

class CpuProgram : public Program {
public:
  CpuProgram(std::shared_ptr<SharedObject> so, const std::string& fn)
      : so_(std::move(so)), fn_(reinterpret_cast<void (*)(void**, int, int)>(so_->sym(fn))) {}
  void run(void** bufs, size_t, int cores) override {
    if (cores <= 1) return fn_(bufs, 0, 1);
    pool().run(cores, [&](int core) { fn_(bufs, core, cores); });
  }

private:
  std::shared_ptr<SharedObject> so_;
  void (*fn_)(void**, int, int);
};

class CpuDevice : public Device {
public:
  std::string name() const override { return "CPU"; }
  void* alloc(size_t bytes) override {
    // Linux overcommits: a buffer larger than RAM would "succeed" and the process be killed
    // later when the kernel touches it. Refuse it here with an error instead.
    size_t ram = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
    if (bytes > ram)
      throw std::runtime_error("cannot allocate " + std::to_string(bytes >> 20) +
                               " MiB on CPU: the machine has " + std::to_string(ram >> 20) +
                               " MiB of memory");
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes on CPU");
    return p;
  }
  void free(void* p, size_t) override { std::free(p); }
  void copyin(void* dst, const void* src, size_t n) override {
    if (n) std::memcpy(dst, src, n);
  }
  void copyout(void* dst, const void* src, size_t n) override {
    if (n) std::memcpy(dst, src, n);
  }
  std::string render(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel) override {
    return render_c(fn, linear, parallel);
  }
  int compile_count() const override { return compiles_; }

  std::unique_ptr<Program> compile(const std::string& fn, const std::string& src) override {
    std::string key = digest(compiler() + "\n" + kFlags + "\n" + src);
    auto it = loaded_.find(key);
    if (it == loaded_.end()) it = loaded_.emplace(key, load_or_build(key, src)).first;
    return std::make_unique<CpuProgram>(it->second, fn);
  }

private:
  std::shared_ptr<SharedObject> load_or_build(const std::string& key, const std::string& src) {
    std::string dir = cache_dir();
    std::string so = dir + "/" + key + ".so";
    if (::access(so.c_str(), R_OK) == 0) {
      try {
        return std::make_shared<SharedObject>(so);
      } catch (const std::runtime_error&) {
        std::remove(so.c_str()); // a damaged cache entry: build it again
      }
    }
    mkdirs(dir);
    // Build beside the final name and rename: a crash or a second process never sees half a file.
    std::string tmp = dir + "/" + key + "." + std::to_string(::getpid());
    {
      std::ofstream f(tmp + ".c");
      f << src;
      if (!f) throw std::runtime_error("cannot write kernel source to " + tmp + ".c");
    }
    std::string cmd = compiler() + " " + kFlags + " -x c " + tmp + ".c -o " + tmp + ".so 2> " + tmp + ".err";
    int rc = std::system(cmd.c_str());
    std::ifstream ef(tmp + ".err");
    std::stringstream err;
    err << ef.rdbuf();
    std::remove((tmp + ".c").c_str());
    std::remove((tmp + ".err").c_str());
    if (rc != 0) {
      std::remove((tmp + ".so").c_str());
      std::string e = err.str();
      if (e.size() > 2000) e = e.substr(0, 2000) + "...";
      throw std::runtime_error("kernel compile failed (" + compiler() + ", exit " + std::to_string(rc) +
                               "):\n" + e);
    }
    compiles_++;
    if (std::rename((tmp + ".so").c_str(), so.c_str()) != 0)
      return std::make_shared<SharedObject>(tmp + ".so");
    return std::make_shared<SharedObject>(so);
  }

  std::unordered_map<std::string, std::shared_ptr<SharedObject>> loaded_;
  int compiles_ = 0;
};

const bool registered = register_device("CPU", [] { return std::make_unique<CpuDevice>(); });

} // namespace
} // namespace mg
