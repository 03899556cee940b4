// The CUDA device: CUDA C from the C-style renderer, compiled to PTX in process by NVRTC, and run
// through the driver API, which is loaded with dlopen("libcuda.so.1") when first needed and never
// linked: a machine without an NVIDIA driver still starts, renders and compiles CUDA kernels
// (:src EXPR CUDA), and creating a CUDA tensor there is an error that says why.
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "engine/codegen/cstyle.h"
#include "engine/device.h"
#include "engine/lazy_runtime.h"
#include "engine/roofline.h"

namespace mg {

namespace {

// half and bfloat16 compute in float; buffers hold half, and bfloat16's bits
const TypeNames kCudaTypes{
    "bool",      "signed char",        "unsigned char", "short", "unsigned short", "int",   "unsigned int",
    "long long", "unsigned long long", "float",         "float", "float",          "double"};
std::string cu_type(DType t) { return type_in(t, kCudaTypes, "CUDA C"); }

std::string storage_type(DType t) {
  if (t == DType::Float16) return "half";
  if (t == DType::BFloat16) return "unsigned short";
  return t == DType::Void ? "unsigned char" : cu_type(t);
}

const Dialect& cuda_dialect() {
  static const Dialect d = [] {
    Dialect d;
    d.name = "CUDA C";
    d.bitcast = [](DType from, DType to, const std::string& x) -> std::string {
      bool f32 = from == DType::Float32 || to == DType::Float32,
           f64 = from == DType::Float64 || to == DType::Float64;
      if (f32)
        return is_float(from) ? "((" + cu_type(to) + ")__float_as_uint(" + x + "))"
                              : "__uint_as_float((unsigned int)" + x + ")";
      if (f64)
        return is_float(from) ? "((" + cu_type(to) + ")__double_as_longlong(" + x + "))"
                              : "__longlong_as_double((long long)" + x + ")";
      return "";
    };
    d.type = cu_type;
    d.load = [](DType t, const std::string& b, const std::string& i) {
      if (t == DType::Float16) return "__half2float(" + b + "[" + i + "])";
      if (t == DType::BFloat16) return "__uint_as_float((unsigned int)" + b + "[" + i + "]<<16)";
      return b + "[" + i + "]";
    };
    d.store = [](DType t, const std::string& b, const std::string& i, const std::string& v) {
      if (t == DType::Float16) return b + "[" + i + "] = __float2half_rn(" + v + ");";
      if (t == DType::BFloat16) return b + "[" + i + "] = bf16_bits(" + v + ");";
      return b + "[" + i + "] = " + v + ";";
    };
    d.cast = [](DType t, const std::string& x) {
      if (t == DType::Float16) return "__half2float(__float2half_rn((float)" + x + "))";
      if (t == DType::BFloat16) return "__uint_as_float((unsigned int)bf16_bits((float)" + x + ")<<16)";
      return "((" + cu_type(t) + ")" + x + ")";
    };
    d.math = [](const std::string& f, DType t, const std::vector<std::string>& a) {
      std::string s = f + (t == DType::Float64 ? "(" : "f(");
      for (size_t i = 0; i < a.size(); i++)
        s += (i ? ", " : "") + a[i];
      return s + ")";
    };
    d.half_in_float = true;
    // A 16-bit result wrapped by a plain (short) cast, then compared, ran unwrapped on an H100
    // (NEG(-32768) != -32768 was true: ptxas kept neg.s16 in 32 bits). The conversion as an
    // explicit cvt.s16.s32 is one the compilers cannot fold away.
    d.wrap = [](DType t, const std::string& x) {
      return t == DType::Int16 ? "mg_wrap_s16(" + x + ")" : "((" + cu_type(t) + ")" + x + ")";
    };
    d.special = [](LaunchDim l) { return std::string(l.local ? "threadIdx." : "blockIdx.") + "xyz"[l.axis]; };
    d.inf = "__int_as_float(0x7f800000)";
    d.nan = "__int_as_float(0x7fffffff)";
    d.barrier = "__syncthreads();";
    d.shared = "__shared__ ";
    d.header = [](const KernelParts& k) {
      std::ostringstream os;
      bool half = false;
      for (auto& [i, t] : k.globals)
        half |= t == DType::Float16;
      if (half || k.body.find("__float2half") != std::string::npos) os << "#include <cuda_fp16.h>\n";
      if (k.body.find("mg_wrap_s16(") != std::string::npos)
        os << "__device__ inline short mg_wrap_s16(int x) { short r; "
              "asm(\"cvt.s16.s32 %0, %1;\" : \"=h\"(r) : \"r\"(x)); return r; }\n";
      if (k.body.find("bf16_bits(") != std::string::npos)
        os << "__device__ inline unsigned short bf16_bits(float f) { unsigned int u = __float_as_uint(f); "
              "return f != f ? (unsigned short)((u >> 16) | 0x40u) : (unsigned short)((u + 0x7fffu + ((u >> "
              "16) & "
              "1u)) >> 16); }\n";
      int64_t threads = 1;
      for (auto l : k.local_size)
        threads *= l;
      os << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") " << k.fn << "(";
      for (size_t j = 0; j < k.globals.size(); j++) {
        auto [i, t] = k.globals[j];
        os << (j ? ", " : "") << (i == 0 ? "" : "const ") << storage_type(t) << "* __restrict__ data" << i;
      }
      os << ") {\n" << k.body << "}\n";
      return os.str();
    };
    return d;
  }();
  return d;
}

// CUDA C -> PTX for a virtual `arch` (compute_90), or machine code (a CUBIN) for a real one
// (sm_90); or an error carrying NVRTC's log.
std::string nvrtc_compile(const std::string& fn, const std::string& src, const std::string& arch) {
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src.c_str(), (fn + ".cu").c_str(), 0, nullptr, nullptr) != NVRTC_SUCCESS)
    throw std::runtime_error("CUDA: NVRTC could not take the kernel " + fn);
  std::string a = "--gpu-architecture=" + arch;
  const char* opts[] = {a.c_str(), "-I/usr/local/cuda/include"};
  nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  std::string log(n, '\0');
  nvrtcGetProgramLog(prog, log.data());
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    throw std::runtime_error("CUDA: kernel " + fn + " did not compile (" + nvrtcGetErrorString(r) + "):\n" +
                             log);
  }
  std::string out;
  if (arch.rfind("sm_", 0) == 0) {
    nvrtcGetCUBINSize(prog, &n);
    out.resize(n);
    nvrtcGetCUBIN(prog, out.data());
    nvrtcDestroyProgram(&prog);
    return out;
  }
  nvrtcGetPTXSize(prog, &n);
  out.resize(n);
  nvrtcGetPTX(prog, out.data());
  nvrtcDestroyProgram(&prog);
  while (!out.empty() && out.back() == '\0')
    out.pop_back();
  return out;
}

// The driver API, loaded at run time.
struct Driver {
  void* lib = nullptr;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  std::string arch = "compute_90"; // the GPU's, as NVRTC names its virtual architecture
  // Its real one (sm_90) where NVRTC assembles for it: kernels are compiled to machine code then
  // (an H100 loaded the first matmul in half the time the driver took to assemble its PTX); "":
  // PTX, which the driver assembles.
  std::string machine_arch;
  int sms = 0;
  std::string gpu; // its name, as the driver gives it
  decltype(&::cuInit) init;
  decltype(&::cuDeviceGet) device_get;
  decltype(&::cuDeviceGetAttribute) attribute;
  decltype(&::cuDeviceGetName) get_name;
  decltype(&::cuDevicePrimaryCtxRetain) retain;
  decltype(&::cuCtxSetCurrent) set_current;
  decltype(&::cuMemAlloc_v2) mem_alloc;
  decltype(&::cuMemFree_v2) mem_free;
  decltype(&::cuMemcpyHtoD_v2) htod;
  decltype(&::cuMemcpyDtoH_v2) dtoh;
  decltype(&::cuModuleLoadData) module_load;
  decltype(&::cuModuleUnload) module_unload;
  decltype(&::cuModuleGetFunction) get_function;
  decltype(&::cuLaunchKernel) launch;
  decltype(&::cuCtxSynchronize) synchronize;
  decltype(&::cuGetErrorString) error_string;

  template <typename F> void sym(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    if (!f) throw std::runtime_error(std::string("CUDA: the driver lacks ") + name);
  }
  Driver() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      throw std::runtime_error("no CUDA driver here (libcuda.so.1 not found): CUDA kernels render and "
                               "compile, but cannot run");
    sym(init, "cuInit");
    sym(device_get, "cuDeviceGet");
    sym(attribute, "cuDeviceGetAttribute");
    sym(get_name, "cuDeviceGetName");
    sym(retain, "cuDevicePrimaryCtxRetain");
    sym(set_current, "cuCtxSetCurrent");
    sym(mem_alloc, "cuMemAlloc_v2");
    sym(mem_free, "cuMemFree_v2");
    sym(htod, "cuMemcpyHtoD_v2");
    sym(dtoh, "cuMemcpyDtoH_v2");
    sym(module_load, "cuModuleLoadData");
    sym(module_unload, "cuModuleUnload");
    sym(get_function, "cuModuleGetFunction");
    sym(launch, "cuLaunchKernel");
    sym(synchronize, "cuCtxSynchronize");
    sym(error_string, "cuGetErrorString");
    check(init(0), "starting the driver");
    check(device_get(&dev, 0), "finding a GPU");
    check(retain(&ctx, dev), "creating a context");
    check(set_current(ctx), "using the context");
    int major = 0, minor = 0;
    attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    arch = "compute_" + std::to_string(major * 10 + minor);
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
      std::vector<int> archs(static_cast<size_t>(n));
      if (nvrtcGetSupportedArchs(archs.data()) == NVRTC_SUCCESS &&
          std::find(archs.begin(), archs.end(), major * 10 + minor) != archs.end())
        machine_arch = "sm_" + std::to_string(major * 10 + minor);
    }
    attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    char buf[256] = {};
    if (get_name(buf, sizeof buf - 1, dev) == CUDA_SUCCESS) gpu = buf;
  }
  void check(CUresult r, const std::string& what) const {
    if (r == CUDA_SUCCESS) return;
    const char* s = nullptr;
    if (error_string) error_string(r, &s);
    throw std::runtime_error("CUDA: " + what + ": " + (s ? s : "error " + std::to_string(r)));
  }
};

class CudaProgram : public Program {
public:
  CudaProgram(const Driver& d, CUmodule m, CUfunction f) : d_(d), module_(m), fn_(f) {}
  ~CudaProgram() override { d_.module_unload(module_); }
  CudaProgram(const CudaProgram&) = delete;
  CudaProgram& operator=(const CudaProgram&) = delete;
  void run(void** bufs, size_t n, const Launch& l) override {
    std::vector<CUdeviceptr> ptrs(n);
    std::vector<void*> args(n);
    for (size_t i = 0; i < n; i++)
      ptrs[i] = reinterpret_cast<CUdeviceptr>(bufs[i]), args[i] = &ptrs[i];
    unsigned g[3] = {1, 1, 1}, b[3] = {1, 1, 1};
    for (size_t i = 0; i < 3 && i < l.global_size.size(); i++)
      g[i] = static_cast<unsigned>(l.global_size[i]), b[i] = static_cast<unsigned>(l.local_size[i]);
    d_.check(d_.set_current(d_.ctx), "using the context");
    // Queued on the default stream, behind every kernel and copy before it: the engine waits only
    // where it times a kernel or reads a result (CudaDevice::synchronize, copyout).
    d_.check(d_.launch(fn_, g[0], g[1], g[2], b[0], b[1], b[2], 0, nullptr, args.data(), nullptr),
             "launching a kernel");
  }

private:
  const Driver& d_;
  CUmodule module_;
  CUfunction fn_;
};

class CudaDevice : public Device {
public:
  std::string name() const override { return "CUDA"; }
  std::string unavailable() const override { return runtime_.why_not(); }
  Target target() const override {
    Target t;
    t.gpu = true;
    t.max_local = 1024;
    t.max_local_axis[2] = 64;    // blockDim.z (a launch past it fails: "invalid argument")
    t.max_groups = 65535;        // gridDim.y and .z
    t.max_groups_x = 2147483647; // gridDim.x (gidx0)
    t.max_shared = 48 << 10;
    return t;
  }
  std::string fingerprint() const override {
    return "CUDA NVRTC " + arch() + (unavailable().empty() ? " " + driver().gpu : "");
  }
  std::optional<DeviceLimits> measure_limits(int) override;
  void* alloc(size_t bytes) override {
    const Driver& d = driver();
    CUdeviceptr p = 0;
    d.check(d.set_current(d.ctx), "using the context");
    d.check(d.mem_alloc(&p, bytes), "allocating " + std::to_string(bytes) + " bytes");
    return reinterpret_cast<void*>(p);
  }
  void free(void* p, size_t) override { // called by destructors: never throws
    const Driver& d = driver();
    d.set_current(d.ctx);
    d.synchronize(); // a queued kernel may still use it (its error, if any, surfaces at the next wait)
    d.mem_free(reinterpret_cast<CUdeviceptr>(p));
  }
  bool asynchronous() const override { return true; }
  void synchronize() override {
    const Driver& d = driver();
    d.check(d.set_current(d.ctx), "using the context");
    d.check(d.synchronize(), "running a kernel");
  }
  // Both copies are ordered after the kernels queued before them (a copy from pageable host memory
  // waits for the stream), so a result read back is final.
  void copyin(void* dst, const void* src, size_t n) override {
    if (n) driver().check(driver().htod(reinterpret_cast<CUdeviceptr>(dst), src, n), "copying to the GPU");
  }
  void copyout(void* dst, const void* src, size_t n) override {
    if (n)
      driver().check(driver().dtoh(dst, reinterpret_cast<CUdeviceptr>(const_cast<void*>(src)), n),
                     "copying from the GPU");
  }
  std::string render(const std::string& fn, const std::vector<UOpRef>& linear, bool) override {
    return render_cstyle(cuda_dialect(), fn, linear, false);
  }
  std::string compiled_text(const std::string& fn, const std::string& src) override {
    return nvrtc_compile(fn, src, arch());
  }
  int compile_count() const override { return compiles_; }
  std::unique_ptr<Program> compile(const std::string& fn, const std::string& src) override {
    const Driver& d = driver();
    std::string image = nvrtc_compile(fn, src, d.machine_arch.empty() ? d.arch : d.machine_arch);
    compiles_++;
    CUmodule m;
    d.check(d.set_current(d.ctx), "using the context");
    d.check(d.module_load(&m, image.data()), "loading the code of " + fn);
    CUfunction f;
    CUresult r = d.get_function(&f, m, fn.c_str());
    if (r != CUDA_SUCCESS) d.module_unload(m);
    d.check(r, "finding " + fn);
    return std::make_unique<CudaProgram>(d, m, f);
  }

private:
  // PTX for the GPU here, or for compute_90 (an H100) where there is none.
  std::string arch() const { return unavailable().empty() ? driver().arch : "compute_90"; }
  const Driver& driver() const { return runtime_.get(); }
  LazyRuntime<Driver> runtime_;
  std::atomic<int> compiles_{0};
};

// The two probes of the roofline: independent FMA chains in every thread that the GPU can keep
// resident (8 blocks of 256 per multiprocessor), and a triad over arrays far past its L2.
const char* kPeakProbe =
    R"(extern "C" __global__ void mg_peak_probe(float* out, const float* in, const int* iters) {
  float x = in[0], y = in[1], a[8];
  for (int j = 0; j < 8; j++) a[j] = threadIdx.x * 1e-9f + j;
  int n = iters[0];
  #pragma unroll 16
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 8; j++) a[j] = fmaf(a[j], x, y);
  float s = 0;
  for (int j = 0; j < 8; j++) s += a[j];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
)";
const char* kTriadProbe =
    R"(extern "C" __global__ void mg_triad_probe(float* a, const float* b, const float* c) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  a[i] = b[i] + 3.0f * c[i];
}
)";

std::optional<DeviceLimits> CudaDevice::measure_limits(int) {
  if (!unavailable().empty()) return std::nullopt;
  struct Mem { // device memory for the probes, freed on every path out
    CudaDevice& d;
    void* p;
    size_t n;
    Mem(CudaDevice& d, size_t n) : d(d), p(d.alloc(n)), n(n) {}
    ~Mem() { d.free(p, n); }
    Mem(const Mem&) = delete;
    Mem& operator=(const Mem&) = delete;
  };
  DeviceLimits limits;
  int64_t blocks = 8 * std::max(1, driver().sms), threads = 256;
  Mem out(*this, static_cast<size_t>(blocks * threads) * 4), in(*this, 8), iters(*this, 4);
  float xy[] = {0.9999f, 0.0001f};
  copyin(in.p, xy, sizeof xy);
  auto peak = compile("mg_peak_probe", kPeakProbe);
  int32_t n = 1000;
  void* pbufs[] = {out.p, in.p, iters.p};
  Launch launch{1, {blocks}, {threads}, 0};
  auto run_peak = [&] {
    copyin(iters.p, &n, 4);
    peak->run(pbufs, 3, launch);
    synchronize();
  };
  for (double s = best_of(1, run_peak); s < 0.02 && n < (1 << 28); s = best_of(1, run_peak))
    n = static_cast<int32_t>(std::min(double(1 << 28), n * std::min(100.0, 0.025 / std::max(s, 1e-6))));
  limits.flops = 2.0 * 8 * n * static_cast<double>(blocks * threads) / best_of(5, run_peak);

  int64_t len = int64_t(1) << 27; // 512 MiB an array
  Mem a(*this, static_cast<size_t>(len) * 4), b(*this, static_cast<size_t>(len) * 4),
      c(*this, static_cast<size_t>(len) * 4);
  auto triad = compile("mg_triad_probe", kTriadProbe);
  void* tbufs[] = {a.p, b.p, c.p};
  Launch tl{1, {len / 256}, {256}, 0};
  auto run_triad = [&] {
    triad->run(tbufs, 3, tl);
    synchronize();
  };
  run_triad();
  limits.bytes = 12.0 * static_cast<double>(len) / best_of(5, run_triad);
  return limits;
}

const bool registered = register_device("CUDA", [] { return std::make_unique<CudaDevice>(); });

} // namespace
} // namespace mg
