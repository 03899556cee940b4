// Devices, buffers and programs. A device is an allocator + a renderer + a compiler; backends
// register themselves here, so the engine never includes a backend.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/codegen/opts.h"
#include "engine/dtype.h"
#include "engine/uop.h"

namespace mg {

class Device;

// Memory for `size` elements of `dtype` on a device, allocated on first use and returned to
// the device's free list (for reuse by a buffer of the same byte size) when dropped.
struct Buffer {
  std::string device;
  DType dtype;
  size_t size;
  Buffer(std::string device, DType dtype, size_t size);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  bool allocated() const { return ptr_ != nullptr; }
  void* ptr(); // allocates if needed
  size_t nbytes() const { return size * itemsize(dtype); }
  void copyin(const void* src);
  void copyout(void* dst);
  int id() const { return id_; }
  bool filled_from_host() const { return from_host_; } // by copyin: Lua data, rand, a file
  static int next_id();                                // the id the next buffer will get
  // How many tensors with requires_grad hold this buffer (the Lua front end counts them): a
  // realize whose graph reads it keeps that graph for backward (engine/gradient.h, keep_for_grad).
  int requires_grad() const { return requires_grad_; }
  void add_requires_grad(int delta);
  // Live buffers held by some tensor with requires_grad: with none, a realize keeps no graph
  // without walking it (the per-realize cost of a 100-op chain).
  static int buffers_requiring_grad();

private:
  int requires_grad_ = 0;
  bool from_host_ = false;
  void* ptr_ = nullptr;
  int id_;
};

// What a buffer taking memory finds: a freed block of its size (`reuse`), none (`miss`), or still
// none after the hook's `miss` call (`fresh`: new memory is taken once the call returns).
enum class AllocEvent { reuse, miss, fresh };
// Called whenever a buffer takes memory. The Lua front end collects garbage there: a realized
// tensor's memory is held by a small userdata the collector cannot weigh, so without this the
// buffers of dropped tensors would come back only when it happens to run.
void set_alloc_hook(std::function<void(size_t bytes, AllocEvent what)> hook);

size_t buffer_size(const Buffer& b);
std::string buffer_string(const Buffer& b);

// How a kernel is launched: a CPU splits its outermost loop over `cores` cores (1: the calling
// thread runs it); a GPU runs global_size work-groups of local_size threads each.
struct Launch {
  int cores = 1;
  Shape global_size, local_size;
  int lane = 0; // which of the concurrent runners launches it (each CPU lane has its own workers)
  // The shares a CPU kernel's outermost loop is cut into: each core runs its own equal run of them,
  // then takes the others' last ones (0: one share per core)
  int shares = 0;
};

// The two ceilings of a device's roofline at some number of threads: float32 FLOP/s with every
// vector unit busy, and bytes/s streamed through memory (counted as a kernel's bytes are: each
// buffer once).
struct DeviceLimits {
  double flops = 0, bytes = 0;
};

// A compiled kernel, ready to launch on its buffers.
class Program {
public:
  virtual ~Program() = default;
  virtual void run(void** bufs, size_t n, const Launch& launch) = 0;
};

class Device {
public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p, size_t bytes) = 0;
  virtual void copyin(void* dst, const void* src, size_t bytes) = 0;
  virtual void copyout(void* dst, const void* src, size_t bytes) = 0;
  // Linear program -> source text, and source text -> runnable program.
  // `parallel`: split the outermost loop by the (core, ncores) the program is run with.
  virtual std::string render(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel) = 0;
  // May be called from several threads at once (BEAM's candidates).
  virtual std::unique_ptr<Program> compile(const std::string& fn, const std::string& src) = 0;
  // A program for a short trial: its code need not outlive it (BEAM's candidates).
  virtual std::unique_ptr<Program> compile_trial(const std::string& fn, const std::string& src) {
    return compile(fn, src);
  }
  // What code built for this device depends on besides the source (its compiler, flags and
  // the host CPU): part of BEAM's cache key.
  virtual std::string fingerprint() const { return name(); }
  // Compiles done by this process (the on-disk cache makes repeats free).
  virtual int compile_count() const { return 0; }
  // What kernels are lowered for (a GPU keeps thread ids and work-groups).
  virtual Target target() const { return {}; }
  // Why this device cannot run kernels here ("" when it can). Rendering and compiling work
  // either way: creating a device needs no hardware, allocating on it does.
  virtual std::string unavailable() const { return ""; }
  // What the device's compiler makes of `src`, as text to read (SPIR-V disassembly, PTX), or ""
  // where that is the source itself or machine code. Needs no hardware.
  virtual std::string compiled_text(const std::string& fn, const std::string& src) { return ""; }
  // Text the renderer puts, the same each time, before the kernels that need it (the C device's
  // math declarations and helper functions): DEBUG=3 prints each block once per process.
  virtual std::vector<std::string> preamble() const { return {}; }
  // Times a compute-bound and a memory-bound kernel on `threads` threads (a CPU's cores) and
  // returns the two ceilings; nullopt where the device has no probe. Slow (a fraction of a
  // second): engine/roofline.h keeps the answer.
  virtual std::optional<DeviceLimits> measure_limits(int threads) { return std::nullopt; }
  // Whether its programs may run on another thread while a program of another device runs (the
  // host CPU's compiled C: yes; a device written in Lua, or a GPU queue: no).
  virtual bool runs_concurrently() const { return false; }
  // Whether its buffers are plain host memory (the host CPU's C and LLVM devices): a kernel of one
  // such device may read another's buffer in place, so a copy between them is a kernel.
  virtual bool host_memory() const { return false; }
  // Whether a program's run returns before the kernel has finished (CUDA queues it on a stream):
  // copies to and from the host wait for the kernels before them, and so does synchronize().
  virtual bool asynchronous() const { return false; }
  // Returns once every kernel launched on the device has finished (an error in one surfaces here).
  virtual void synchronize() {}
};

using DeviceFactory = std::function<std::unique_ptr<Device>()>;
// Returns true so it can initialise a static in the backend's translation unit.
bool register_device(const std::string& name, DeviceFactory f);
Device& get_device(const std::string& name);
std::vector<std::string> device_names();
// The device, or an error naming why it cannot run kernels here (or the known devices).
Device& check_runnable(const std::string& name);
// "CPU" unless DEV/CLANG say otherwise.
std::string default_device();
// The name a device's buffers carry: "CPU:0" is "CPU".
std::string canonical_device(std::string name);

} // namespace mg
