// The CL device: OpenCL C from the C-style renderer, built by the OpenCL platform's compiler
// (PoCL here, on the CPU) and run as NDRange kernels. Buffers are cl_mem handles.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "engine/codegen/cstyle.h"
#include "engine/device.h"
#include "engine/lazy_runtime.h"

namespace mg {

namespace {

// half and bfloat16 compute in float (stored as half, and as bfloat16's top 16 bits)
const TypeNames kClTypes{"bool", "char",  "uchar", "short", "ushort", "int",   "uint",
                         "long", "ulong", "float", "float", "float",  "double"};
std::string cl_type(DType t) { return type_in(t, kClTypes, "OpenCL C"); }

// A buffer's element type: bool as a byte, half as half (read by vload_half), bfloat16 as its bits.
std::string storage_type(DType t) {
  if (t == DType::Bool || t == DType::Void) return "uchar";
  if (t == DType::Float16) return "half";
  return t == DType::BFloat16 ? "ushort" : cl_type(t);
}

const Dialect& cl_dialect() {
  static const Dialect d = [] {
    Dialect d;
    d.name = "OpenCL C";
    d.bitcast = [](DType from, DType to, const std::string& x) -> std::string {
      if (itemsize(from) < 4 || from == DType::BFloat16 || to == DType::BFloat16) return "";
      return "as_" + cl_type(to) + "(" + x + ")";
    };
    d.type = cl_type;
    // half and bfloat16 compute in float (PoCL has no cl_khr_fp16); buffers hold their bits
    d.load = [](DType t, const std::string& b, const std::string& i) {
      if (t == DType::Float16) return "vload_half(" + i + ", " + b + ")";
      if (t == DType::BFloat16) return "as_float((uint)" + b + "[" + i + "]<<16)";
      return t == DType::Bool ? "(" + b + "[" + i + "]!=0)" : b + "[" + i + "]";
    };
    d.store = [](DType t, const std::string& b, const std::string& i, const std::string& v) {
      if (t == DType::Float16) return "vstore_half_rte(" + v + ", " + i + ", " + b + ");";
      if (t == DType::BFloat16) return b + "[" + i + "] = bf16_bits(" + v + ");";
      return b + "[" + i + "] = " + (t == DType::Bool ? "(uchar)(" + v + ")" : v) + ";";
    };
    d.cast = [](DType t, const std::string& x) {
      if (t == DType::BFloat16) return "as_float((uint)bf16_bits((float)" + x + ")<<16)";
      if (t == DType::Float16) return "half_round((float)" + x + ")";
      return "((" + cl_type(t) + ")" + x + ")";
    };
    d.math = [](const std::string& f, DType, const std::vector<std::string>& a) {
      std::string s = f + "(";
      for (size_t i = 0; i < a.size(); i++)
        s += (i ? ", " : "") + a[i];
      return s + ")";
    };
    d.half_in_float = true;
    d.special = [](LaunchDim l) {
      return std::string(l.local ? "get_local_id(" : "get_group_id(") + std::to_string(l.axis) + ")";
    };
    d.int64_suffix = "l";
    d.uint64_suffix = "ul";
    d.barrier = "barrier(CLK_LOCAL_MEM_FENCE);";
    d.shared = "__local ";
    d.header = [](const KernelParts& k) {
      std::ostringstream os;
      bool f64 = k.body.find("double") != std::string::npos;
      for (auto& [i, t] : k.globals)
        f64 |= t == DType::Float64;
      if (f64) os << "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
      if (k.body.find("bf16_bits(") != std::string::npos)
        os << "inline ushort bf16_bits(float f) { uint u = as_uint(f); return isnan(f) ? (ushort)((u >> 16) "
              "| "
              "0x40u) : (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }\n";
      if (k.body.find("half_round(") != std::string::npos)
        os << "inline float half_round(float f) { ushort h; vstore_half_rte(f, 0, (half*)&h); return "
              "vload_half(0, "
              "(half*)&h); }\n";
      os << "__kernel ";
      if (!k.local_size.empty()) {
        os << "__attribute__((reqd_work_group_size(";
        for (size_t i = 0; i < 3; i++)
          os << (i ? ", " : "") << (i < k.local_size.size() ? k.local_size[i].value() : 1);
        os << "))) ";
      }
      os << "void " << k.fn << "(";
      for (size_t j = 0; j < k.globals.size(); j++) {
        auto [i, t] = k.globals[j];
        os << (j ? ", " : "") << "__global " << (i == 0 ? "" : "const ") << storage_type(t)
           << "* restrict data" << i;
      }
      os << ") {\n" << k.body << "}\n";
      return os.str();
    };
    return d;
  }();
  return d;
}

std::string cl_error(cl_int e) {
  switch (e) {
  case CL_DEVICE_NOT_FOUND:
    return "no OpenCL device (CL_DEVICE_NOT_FOUND)";
  case CL_OUT_OF_RESOURCES:
    return "out of resources (CL_OUT_OF_RESOURCES)";
  case CL_OUT_OF_HOST_MEMORY:
    return "out of host memory (CL_OUT_OF_HOST_MEMORY)";
  case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    return "cannot allocate device memory (CL_MEM_OBJECT_ALLOCATION_FAILURE)";
  case CL_BUILD_PROGRAM_FAILURE:
    return "the kernel did not build (CL_BUILD_PROGRAM_FAILURE)";
  case CL_INVALID_WORK_GROUP_SIZE:
    return "invalid work-group size (CL_INVALID_WORK_GROUP_SIZE)";
  case CL_INVALID_BUFFER_SIZE:
    return "invalid buffer size (CL_INVALID_BUFFER_SIZE)";
  case -1001:
    return "no OpenCL platform: is an ICD installed (pocl-opencl-icd)? (CL_PLATFORM_NOT_FOUND_KHR)";
  default:
    return "OpenCL error " + std::to_string(e);
  }
}

void check(cl_int e, const char* what) {
  if (e != CL_SUCCESS) throw std::runtime_error(std::string("CL: ") + what + ": " + cl_error(e));
}

// The first platform's first device, and one in-order queue on it.
struct Context {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  std::string description;
  size_t max_work_group = 256;
  size_t local_mem = 16384;
  size_t max_item[3] = {0, 0, 0}; // work-items along each dim (0: not reported)
  Context() {
    cl_uint n = 0;
    check(clGetPlatformIDs(1, &platform, &n), "finding a platform");
    if (n == 0) throw std::runtime_error("CL: no OpenCL platform: is an ICD installed (pocl-opencl-icd)?");
    check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, &n), "finding a device");
    cl_int e;
    ctx = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &e);
    check(e, "creating a context");
    queue = clCreateCommandQueue(ctx, device, 0, &e);
    check(e, "creating a queue");
    char buf[256] = {};
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof buf - 1, buf, nullptr);
    description = buf;
    clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof buf - 1, buf, nullptr);
    description += std::string(" / ") + buf;
    clGetDeviceInfo(device, CL_DEVICE_VERSION, sizeof buf - 1, buf, nullptr);
    description += std::string(" / ") + buf;
    clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_work_group, &max_work_group, nullptr);
    clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof max_item, max_item, nullptr);
    cl_ulong lm = 0;
    clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lm, &lm, nullptr);
    local_mem = static_cast<size_t>(lm);
  }
  ~Context() {
    if (queue) clReleaseCommandQueue(queue);
    if (ctx) clReleaseContext(ctx);
  }
};

class ClProgram : public Program {
public:
  ClProgram(cl_command_queue q, cl_program p, cl_kernel k) : queue_(q), program_(p), kernel_(k) {}
  ~ClProgram() override {
    clReleaseKernel(kernel_);
    clReleaseProgram(program_);
  }
  ClProgram(const ClProgram&) = delete;
  ClProgram& operator=(const ClProgram&) = delete;
  void run(void** bufs, size_t n, const Launch& l) override {
    std::lock_guard<std::mutex> lk(m_); // kernel arguments are the kernel object's state
    cl_uint args = 0;
    clGetKernelInfo(kernel_, CL_KERNEL_NUM_ARGS, sizeof args, &args, nullptr);
    for (size_t i = 0; i < n && i < args; i++) { // buffers after the last one used are no arguments
      cl_mem m = static_cast<cl_mem>(bufs[i]);
      check(clSetKernelArg(kernel_, static_cast<cl_uint>(i), sizeof m, &m), "setting a kernel argument");
    }
    size_t global[3] = {1, 1, 1}, local[3] = {1, 1, 1};
    for (size_t i = 0; i < 3 && i < l.global_size.size(); i++) {
      local[i] = static_cast<size_t>(l.local_size[i]);
      global[i] = static_cast<size_t>(l.global_size[i]) * local[i];
    }
    check(clEnqueueNDRangeKernel(queue_, kernel_, 3, nullptr, global, local, 0, nullptr, nullptr),
          "launching a kernel");
    check(clFinish(queue_), "running a kernel");
  }

private:
  cl_command_queue queue_;
  cl_program program_;
  cl_kernel kernel_;
  std::mutex m_;
};

class ClDevice : public Device {
public:
  std::string name() const override { return "CL"; }
  std::string unavailable() const override { return runtime_.why_not(); }
  Target target() const override {
    Target t;
    t.gpu = true;
    if (unavailable().empty()) {
      t.max_local = static_cast<int64_t>(ctx().max_work_group);
      t.max_shared = std::min<int64_t>(static_cast<int64_t>(ctx().local_mem), 32768);
      for (int k = 0; k < 3; k++)
        t.max_local_axis[k] = static_cast<int64_t>(ctx().max_item[k]);
    } else {
      t.max_local = 256;
    }
    return t;
  }
  std::string fingerprint() const override { return "CL " + ctx().description; }
  void* alloc(size_t bytes) override {
    cl_int e;
    cl_mem m = clCreateBuffer(ctx().ctx, CL_MEM_READ_WRITE, bytes, nullptr, &e);
    check(e, ("allocating " + std::to_string(bytes) + " bytes").c_str());
    return m;
  }
  void free(void* p, size_t) override { clReleaseMemObject(static_cast<cl_mem>(p)); }
  void copyin(void* dst, const void* src, size_t n) override {
    if (n)
      check(clEnqueueWriteBuffer(ctx().queue, static_cast<cl_mem>(dst), CL_TRUE, 0, n, src, 0, nullptr,
                                 nullptr),
            "copying to the device");
  }
  void copyout(void* dst, const void* src, size_t n) override {
    if (n)
      check(clEnqueueReadBuffer(ctx().queue, static_cast<cl_mem>(const_cast<void*>(src)), CL_TRUE, 0, n, dst,
                                0, nullptr, nullptr),
            "copying from the device");
  }
  std::string render(const std::string& fn, const std::vector<UOpRef>& linear, bool) override {
    return render_cstyle(cl_dialect(), fn, linear, false);
  }
  int compile_count() const override { return compiles_; }
  std::unique_ptr<Program> compile(const std::string& fn, const std::string& src) override {
    Context& c = ctx();
    const char* text = src.c_str();
    cl_int e;
    cl_program p = clCreateProgramWithSource(c.ctx, 1, &text, nullptr, &e);
    check(e, "creating a program");
    e = clBuildProgram(p, 1, &c.device, "-cl-std=CL1.2", nullptr, nullptr);
    compiles_++;
    if (e != CL_SUCCESS) {
      size_t n = 0;
      clGetProgramBuildInfo(p, c.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      clGetProgramBuildInfo(p, c.device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      clReleaseProgram(p);
      throw std::runtime_error("CL: kernel " + fn + " did not build: " + cl_error(e) + "\n" + log);
    }
    cl_kernel k = clCreateKernel(p, fn.c_str(), &e);
    if (e != CL_SUCCESS) clReleaseProgram(p);
    check(e, "creating a kernel");
    return std::make_unique<ClProgram>(c.queue, p, k);
  }

private:
  Context& ctx() const { return runtime_.get(); }
  LazyRuntime<Context> runtime_;
  std::atomic<int> compiles_{0};
};

const bool registered = register_device("CL", [] { return std::make_unique<ClDevice>(); });

} // namespace
} // namespace mg
