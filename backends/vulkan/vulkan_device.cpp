// The VULKAN device: GLSL compute shaders from the C-style renderer, compiled to SPIR-V in process
// by glslang's C API, checked by SPIRV-Tools' validator, and run as compute pipelines (lavapipe
// here: Mesa's Vulkan on the CPU). Buffers are host-visible storage buffers. Every Vulkan handle
// is owned by a Handle, so a throw part-way through making the context, a program or a buffer
// releases what was made before it.
//
// Test hook: MG_VULKAN_FAIL_AT=<step> makes that step fail as if the driver had refused it (steps:
// instance, device, command_pool, shader_module, descriptor_layout, pipeline_layout, pipeline,
// descriptor_pool, descriptor_set, command_buffer, fence, buffer, memory, bind, map); with
// vulkan_live_handles() (backends/vulkan/vulkan_device.h) a test checks that nothing is left.
#include <glslang/Include/glslang_c_interface.h>
#include <glslang/Public/resource_limits_c.h>
#include <spirv-tools/libspirv.h>
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "backends/vulkan/vulkan_device.h"

#include <cstdlib>
#include <functional>

#include "engine/codegen/cstyle.h"
#include "engine/device.h"
#include "engine/lazy_runtime.h"

namespace mg {

namespace {
std::atomic<int> live_handles{0};
} // namespace

int vulkan_live_handles() { return live_handles.load(); }

namespace {

// half and bfloat16 compute in float; buffers hold float16_t, and bfloat16's bits
const TypeNames kGlslTypes{"bool",    "int8_t",   "uint8_t", "int16_t", "uint16_t", "int",   "uint",
                           "int64_t", "uint64_t", "float",   "float",   "float",    "double"};
std::string glsl_type(DType t) { return type_in(t, kGlslTypes, "GLSL"); }

std::string storage_type(DType t) {
  if (t == DType::Bool || t == DType::Void) return "uint8_t";
  if (t == DType::Float16) return "float16_t";
  return t == DType::BFloat16 ? "uint16_t" : glsl_type(t);
}

// GLSL leaves pow undefined for a negative base, a zero base, inf and NaN, and its mod floors;
// C's pow and fmod (what every other backend runs) are written out for float and double:
// mg_pow takes the special cases in C's order, then pow of |x| with the sign of an odd power;
// mg_fmod subtracts |b| scaled by powers of two (each step exact), as fmod is defined.
// GLSL's exp2, log2, sin and pow take float only, so float64 gets its own, from arithmetic:
// exp2 by 2^n times a degree-14 Taylor series of 2^f (|f| <= 1/2, error ~1e-16); log2 by the
// exponent plus the series of ln in t = (m-1)/(m+1) (|t| <= 0.172, to t^23); sin by reduction
// modulo pi/2 (pi/2 in two parts) and the sin or cos series on |r| <= pi/4; pow by repeated
// squaring for integer exponents up to 64 (exact where the result is), else exp2(y log2 x).
const char* kCMathTemplate = R"(T mg_pow_T(T x, T y) {
  if (y == T(0) || x == T(1)) return T(1);
  if (isnan(x) || isnan(y)) return NAN_T;
  T ax = abs(x);
  if (isinf(y)) return ax == T(1) ? T(1) : (ax < T(1)) == (y > T(0)) ? T(0) : INF_T;
  bool integral = trunc(y) == y, odd = integral && mod(abs(y), T(2)) == T(1);
  bool negative = x < T(0) || (x == T(0) && T(1) / x < T(0));
  T r;
  if (ax == T(0)) r = y > T(0) ? T(0) : INF_T;
  else if (isinf(ax)) r = y > T(0) ? INF_T : T(0);
  else if (x < T(0) && !integral) return NAN_T;
  else r = POW_T(ax, y);
  return negative && odd ? -r : r;
}
T mg_fmod_T(T a, T b) {
  if (isnan(a) || isnan(b) || isinf(a) || b == T(0)) return NAN_T;
  if (isinf(b)) return a;
  T r = abs(a), m = abs(b), s = m;
  while (s <= r * T(0.5)) s *= T(2); // no frexp: lavapipe's is wrong for denormals
  for (; s >= m && r >= m; s *= T(0.5))
    if (r >= s) r -= s;
  return a < T(0) || (a == T(0) && T(1) / a < T(0)) ? -r : r;
}
)";

// The template above for one type: T, its suffix, NaN, inf, and pow on positive finite values.
std::string c_math(const std::string& t, const std::string& suffix, const std::string& pos_pow) {
  std::string s = kCMathTemplate;
  auto put = [&](const std::string& from, const std::string& to) {
    for (size_t k = s.find(from); k != std::string::npos; k = s.find(from, k + to.size()))
      s.replace(k, from.size(), to);
  };
  put("mg_pow_T", "mg_pow" + suffix);
  put("mg_fmod_T", "mg_fmod" + suffix);
  put("NAN_T", t == "float" ? "uintBitsToFloat(0x7fc00000u)" : "(0.0lf / 0.0lf)");
  put("INF_T", t == "float" ? "uintBitsToFloat(0x7f800000u)" : "(1.0lf / 0.0lf)");
  put("POW_T", pos_pow);
  put("T(", t + "(");
  put("T ", t + " ");
  return s;
}

const char* kFloat64Math = R"(float mg_log2f(float x) { // lavapipe's log2 misreads denormals
  return x > 0.0f && x < 1.17549435e-38f ? log2(x * 18446744073709551616.0f) - 64.0f : log2(x);
}
float mg_pos_powf(float x, float y) { return x < 1.17549435e-38f ? exp2(y * mg_log2f(x)) : pow(x, y); }
double mg_exp2d(double x) {
  if (isnan(x)) return x;
  if (x > 1100.0lf) return 1.0lf / 0.0lf;
  if (x < -1100.0lf) return 0.0lf;
  double n = round(x), f = (x - n) * 0.6931471805599453lf, p = 1.0lf, t = 1.0lf;
  for (int k = 1; k <= 14; k++) { t *= f / double(k); p += t; }
  int e = int(n), a = e / 2;
  return ldexp(ldexp(p, a), e - a);
}
double mg_log2d(double x) {
  if (isnan(x) || x < 0.0lf) return 0.0lf / 0.0lf;
  if (x == 0.0lf) return -1.0lf / 0.0lf;
  if (isinf(x)) return x;
  double bias = 0.0lf; // a denormal is scaled up first (lavapipe's frexp misreads them)
  if (x < 2.2250738585072014e-308lf) { x *= 18446744073709551616.0lf; bias = 64.0lf; }
  int e;
  double m = frexp(x, e);
  if (m < 0.7071067811865476lf) { m *= 2.0lf; e -= 1; }
  double t = (m - 1.0lf) / (m + 1.0lf), t2 = t * t, s = 0.0lf, p = t;
  for (int k = 1; k <= 23; k += 2) { s += p / double(k); p *= t2; }
  return double(e) - bias + 2.0lf * s * 1.4426950408889634lf;
}
double mg_sind(double x) {
  if (isnan(x) || isinf(x)) return 0.0lf / 0.0lf;
  double k = round(x * 0.6366197723675814lf);
  double r = (x - k * 1.5707963267341256lf) - k * 6.077100506506192e-11lf, r2 = r * r;
  int q = int(mod(k, 4.0lf));
  double s = r, c = 1.0lf, ts = r, tc = 1.0lf;
  for (int i = 1; i <= 10; i++) {
    ts *= -r2 / double((2 * i) * (2 * i + 1)); s += ts;
    tc *= -r2 / double((2 * i - 1) * (2 * i)); c += tc;
  }
  return q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
}
double mg_pos_powd(double x, double y) { // x > 0, finite; y finite
  if (trunc(y) == y && abs(y) <= 64.0lf) {
    double r = 1.0lf, b = x;
    for (int n = int(abs(y)); n > 0; n >>= 1) { if ((n & 1) != 0) r *= b; b *= b; }
    return y < 0.0lf ? 1.0lf / r : r;
  }
  return mg_exp2d(y * mg_log2d(x));
}
)";

const Dialect& glsl_dialect() {
  static const Dialect d = [] {
    Dialect d;
    d.name = "GLSL";
    d.bitcast = [](DType from, DType to, const std::string& x) -> std::string {
      bool from_float = is_float(from);
      DType f = from_float ? from : to, i = from_float ? to : from;
      std::string u = is_unsigned(i) ? "Uint" : "Int";
      if (f == DType::Float32)
        return from_float ? "floatBitsTo" + u + "(" + x + ")"
                          : "(" + std::string(is_unsigned(i) ? "uint" : "int") + "BitsToFloat(" + x + "))";
      if (f == DType::Float64)
        return from_float ? "doubleBitsTo" + u + "64(" + x + ")"
                          : (is_unsigned(i) ? "uint64BitsToDouble(" : "int64BitsToDouble(") + x + ")";
      return ""; // float16 computes in float
    };
    d.type = glsl_type;
    d.load = [](DType t, const std::string& b, const std::string& i) {
      // a gated load may have a negative constant index (never read): GLSL rejects it at compile time
      std::string e =
          b + "[" +
          (i.rfind("(-", 0) == 0 && i.find_first_not_of("(-0123456789)") == std::string::npos ? "0" : i) +
          "]";
      if (t == DType::Bool) return "(" + e + "!=uint8_t(0))";
      if (t == DType::Float16) return "float(" + e + ")";
      if (t == DType::BFloat16) return "uintBitsToFloat(uint(" + e + ")<<16)";
      return e;
    };
    d.store = [](DType t, const std::string& b, const std::string& i, const std::string& v) {
      std::string e = b + "[" + i + "] = ";
      if (t == DType::Bool) return e + "uint8_t(" + v + "?1:0);";
      if (t == DType::Float16) return e + "float16_t(" + v + ");";
      if (t == DType::BFloat16) return e + "bf16_bits(" + v + ");";
      return e + v + ";";
    };
    // GLSL indexes an array with a 32-bit int only (an int64_t index does not compile). Int64 index
    // math (a view reaching past 2^31 elements) stays int64 up to the final index, which is then
    // exact as an int for every element of a buffer of at most 2^31 elements; VkProgram::run
    // refuses a larger buffer ("indices past 2^31") instead of letting the index wrap.
    d.index = [](DType t, const std::string& i) { return t == DType::Int64 ? "int(" + i + ")" : i; };
    d.cast = [](DType t, const std::string& x) {
      if (t == DType::Float16) return "float(float16_t(" + x + "))";
      if (t == DType::BFloat16) return "uintBitsToFloat(uint(bf16_bits(float(" + x + ")))<<16)";
      return glsl_type(t) + "(" + x + ")";
    };
    // GLSL's exp2, log2, sin and pow take float only; fmod is written out (GLSL's mod floors)
    d.math = [](const std::string& f, DType t, const std::vector<std::string>& a) {
      bool dbl = t == DType::Float64 && f != "sqrt" && f != "trunc";
      bool c_like = f == "pow" || f == "fmod" || f == "log2"; // C's, not GLSL's
      std::string s = dbl || c_like ? "mg_" + f + (dbl ? "d(" : "f(") : f + "(";
      for (size_t i = 0; i < a.size(); i++)
        s += (i ? ", " : "") + a[i];
      return s + ")";
    };
    d.alu = [](const UOp& u, const std::vector<std::string>& a) -> std::string {
      // GLSL has no arithmetic on bool: & and * are &&, | and + are ||, ^ is ^^
      if (u.dtype == DType::Bool && (u.op == Ops::AND || u.op == Ops::MUL))
        return "(" + a[0] + "&&" + a[1] + ")";
      if (u.dtype == DType::Bool && (u.op == Ops::OR || u.op == Ops::ADD))
        return "(" + a[0] + "||" + a[1] + ")";
      if (u.dtype == DType::Bool && u.op == Ops::XOR) return "(" + a[0] + "^^" + a[1] + ")";
      if (u.dtype == DType::Bool && u.op == Ops::MAX) return "(" + a[0] + "||" + a[1] + ")";
      if (!u.src.empty() && u.src[0]->dtype == DType::Bool && u.op == Ops::CMPLT)
        return "(!" + a[0] + "&&" + a[1] + ")";
      return "";
    };
    d.rem = [](const std::string& a, const std::string& b) {
      return "(" + a + "-(" + a + "/" + b + ")*" + b + ")";
    };
    d.half_in_float = true;
    d.special = [](LaunchDim l) {
      return std::string("int(") + (l.local ? "gl_LocalInvocationID." : "gl_WorkGroupID.") + "xyz"[l.axis] +
             ")";
    };
    d.inf = "uintBitsToFloat(0x7f800000u)";
    d.nan = "uintBitsToFloat(0x7fc00000u)";
    d.int64_suffix = "l";
    d.uint64_suffix = "ul";
    d.double_suffix = "lf";
    d.typed_literals = true;
    d.barrier = "memoryBarrierShared(); barrier();";
    d.shared_in_body = false;
    d.header = [](const KernelParts& k) {
      std::ostringstream os;
      os << "#version 450\n// " << k.fn << "\n";
      os << "#extension GL_EXT_shader_explicit_arithmetic_types : require\n";
      os << "#extension GL_EXT_shader_8bit_storage : require\n#extension GL_EXT_shader_16bit_storage : "
            "require\n";
      os << "layout(local_size_x = " << (k.local_size.size() > 0 ? k.local_size[0].value() : 1)
         << ", local_size_y = " << (k.local_size.size() > 1 ? k.local_size[1].value() : 1)
         << ", local_size_z = " << (k.local_size.size() > 2 ? k.local_size[2].value() : 1) << ") in;\n";
      for (auto& [i, t] : k.globals)
        os << "layout(std430, set = 0, binding = " << i << ") " << (i == 0 ? "" : "readonly ") << "buffer B"
           << i << " { " << storage_type(t) << " data" << i << "[]; };\n";
      for (auto& s : k.shared)
        os << "shared " << s << ";\n";
      if (k.body.find("bf16_bits(") != std::string::npos)
        os << "uint16_t bf16_bits(float f) { uint u = floatBitsToUint(f); return isnan(f) ? uint16_t((u >> "
              "16) | "
              "0x40u) : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }\n";
      if (k.body.find("mg_") != std::string::npos) {
        static const std::string math =
            kFloat64Math + c_math("float", "f", "mg_pos_powf") + c_math("double", "d", "mg_pos_powd");
        os << math;
      }
      os << "void main() {\n" << k.body << "}\n";
      return os.str();
    };
    return d;
  }();
  return d;
}

// GLSL -> SPIR-V words, or an error with glslang's log.
std::vector<uint32_t> glsl_to_spirv(const std::string& fn, const std::string& src) {
  static std::once_flag once;
  std::call_once(once, [] { glslang_initialize_process(); });
  glslang_input_t in{};
  in.language = GLSLANG_SOURCE_GLSL;
  in.stage = GLSLANG_STAGE_COMPUTE;
  in.client = GLSLANG_CLIENT_VULKAN;
  in.client_version = GLSLANG_TARGET_VULKAN_1_2;
  in.target_language = GLSLANG_TARGET_SPV;
  in.target_language_version = GLSLANG_TARGET_SPV_1_5;
  in.code = src.c_str();
  in.default_version = 450;
  in.default_profile = GLSLANG_NO_PROFILE;
  in.messages = static_cast<glslang_messages_t>(GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT);
  in.resource = glslang_default_resource();
  std::unique_ptr<glslang_shader_t, void (*)(glslang_shader_t*)> sh(glslang_shader_create(&in),
                                                                    glslang_shader_delete);
  auto fail = [&](const char* stage, const char* log) {
    throw std::runtime_error(std::string("VULKAN: kernel ") + fn + " did not compile (" + stage + "):\n" +
                             log);
  };
  if (!glslang_shader_preprocess(sh.get(), &in)) fail("preprocess", glslang_shader_get_info_log(sh.get()));
  if (!glslang_shader_parse(sh.get(), &in)) fail("parse", glslang_shader_get_info_log(sh.get()));
  std::unique_ptr<glslang_program_t, void (*)(glslang_program_t*)> prog(glslang_program_create(),
                                                                        glslang_program_delete);
  glslang_program_add_shader(prog.get(), sh.get());
  if (!glslang_program_link(prog.get(), in.messages)) fail("link", glslang_program_get_info_log(prog.get()));
  glslang_program_SPIRV_generate(prog.get(), GLSLANG_STAGE_COMPUTE);
  const uint32_t* w = glslang_program_SPIRV_get_ptr(prog.get());
  return std::vector<uint32_t>(w, w + glslang_program_SPIRV_get_size(prog.get()));
}

// SPIRV-Tools: validation (every module, before it runs) and disassembly (:src).
std::string spirv_tool(const std::vector<uint32_t>& words, bool disassemble) {
  spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
  spv_diagnostic diag = nullptr;
  spv_text text = nullptr;
  spv_result_t r =
      disassemble
          ? spvBinaryToText(ctx, words.data(), words.size(),
                            SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT,
                            &text, &diag)
          : spvValidateBinary(ctx, words.data(), words.size(), &diag);
  std::string out = r == SPV_SUCCESS ? (text ? std::string(text->str, text->length) : "")
                                     : std::string(diag && diag->error ? diag->error : "SPIR-V tools failed");
  if (text) spvTextDestroy(text);
  if (diag) spvDiagnosticDestroy(diag);
  spvContextDestroy(ctx);
  if (r != SPV_SUCCESS)
    throw std::runtime_error(std::string("VULKAN: SPIR-V ") + (disassemble ? "disassembly" : "validation") +
                             " failed: " + out);
  return out;
}

std::string vk_error(VkResult r) {
  switch (r) {
  case VK_ERROR_INCOMPATIBLE_DRIVER:
    return "no Vulkan driver (VK_ERROR_INCOMPATIBLE_DRIVER): is mesa-vulkan-drivers installed?";
  case VK_ERROR_OUT_OF_HOST_MEMORY:
    return "out of host memory";
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    return "out of device memory";
  case VK_ERROR_INITIALIZATION_FAILED:
    return "initialization failed";
  case VK_ERROR_DEVICE_LOST:
    return "device lost";
  default:
    return "Vulkan error " + std::to_string(static_cast<int>(r));
  }
}
void check(VkResult r, const std::string& what) {
  if (r != VK_SUCCESS) throw std::runtime_error("VULKAN: " + what + ": " + vk_error(r));
}

// The test hook: MG_VULKAN_FAIL_AT=<step> fails that step before the driver is asked.
void fail_point(const char* step, const std::string& what) {
  const char* at = std::getenv("MG_VULKAN_FAIL_AT");
  if (at && std::strcmp(at, step) == 0)
    throw std::runtime_error("VULKAN: " + what + ": failed on purpose (MG_VULKAN_FAIL_AT=" + step +
                             ", a test hook)");
}

// One Vulkan handle and how to release it. Members are destroyed in the reverse order of their
// declaration, also when a constructor throws part-way, so declaring them in the order they are
// made releases each before what it was made from (a pool before its device, the device before
// the instance).
template <typename H> class Handle {
public:
  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  // Runs `create` (a vkCreate* or vkAllocate* call writing the handle) as step `step`, throws if it
  // fails, and owns what it made; `release` frees it.
  template <typename Create>
  void make(const char* step, const std::string& what, Create create, std::function<void(H)> release) {
    reset();
    fail_point(step, what);
    H h = VK_NULL_HANDLE;
    check(create(&h), what);
    h_ = h, release_ = std::move(release);
    live_handles++;
  }
  void reset() {
    if (h_ == VK_NULL_HANDLE) return;
    release_(h_);
    h_ = VK_NULL_HANDLE;
    live_handles--;
  }
  operator H() const { return h_; }
  const H* ptr() const { return &h_; }

private:
  H h_ = VK_NULL_HANDLE;
  std::function<void(H)> release_;
};

// A storage buffer: its memory, the buffer bound to it (released first), and the mapping (freeing
// mapped memory unmaps it).
struct VkBuf {
  Handle<VkDeviceMemory> memory;
  Handle<VkBuffer> buffer;
  void* mapped = nullptr;
  size_t size = 0;
};

// The element size of each storage buffer a kernel declares, by binding, read from the lines
// glsl_dialect's header writes: "layout(std430, set = 0, binding = i) ... buffer Bi { T datai[]; };".
std::vector<size_t> item_sizes(const std::string& src) {
  static const std::map<std::string, size_t> sizes{
      {"uint8_t", 1}, {"int8_t", 1}, {"uint16_t", 2}, {"int16_t", 2},  {"float16_t", 2}, {"int", 4},
      {"uint", 4},    {"float", 4},  {"int64_t", 8},  {"uint64_t", 8}, {"double", 8}};
  std::vector<size_t> r;
  for (size_t at = 0; (at = src.find("binding = ", at)) != std::string::npos; at++) {
    size_t type = src.find("{ ", at), end = type == std::string::npos ? type : src.find(' ', type + 2);
    auto it = end == std::string::npos ? sizes.end() : sizes.find(src.substr(type + 2, end - type - 2));
    r.push_back(it == sizes.end() ? 1 : it->second); // not known: counted as bytes, the strictest
  }
  return r;
}

struct Context {
  Handle<VkInstance> instance;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  Handle<VkDevice> device;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t family = 0, memory_type = 0;
  Handle<VkCommandPool> pool;
  std::string description;
  VkPhysicalDeviceLimits limits{};
  std::mutex m; // one submission at a time on the queue

  Context() {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "moongrad";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    instance.make(
        "instance", "creating an instance", [&](VkInstance* h) { return vkCreateInstance(&ici, nullptr, h); },
        [](VkInstance h) { vkDestroyInstance(h, nullptr); });
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance, &n, nullptr);
    if (n == 0) throw std::runtime_error("VULKAN: no Vulkan device (is mesa-vulkan-drivers installed?)");
    std::vector<VkPhysicalDevice> devs(n);
    vkEnumeratePhysicalDevices(instance, &n, devs.data());
    phys = devs[0];
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(phys, &props);
    limits = props.limits;
    description = props.deviceName;
    description += " / Vulkan " + std::to_string(VK_VERSION_MAJOR(props.apiVersion)) + "." +
                   std::to_string(VK_VERSION_MINOR(props.apiVersion)) + "." +
                   std::to_string(VK_VERSION_PATCH(props.apiVersion));
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nf, nullptr);
    std::vector<VkQueueFamilyProperties> fams(nf);
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nf, fams.data());
    bool found = false;
    for (uint32_t i = 0; i < nf && !found; i++)
      if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i, found = true;
    if (!found) throw std::runtime_error("VULKAN: the device has no compute queue");
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    found = false;
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t i = 0; i < mp.memoryTypeCount && !found; i++)
      if ((mp.memoryTypes[i].propertyFlags & want) == want) memory_type = i, found = true;
    if (!found) throw std::runtime_error("VULKAN: the device has no host-visible memory");
    // the small types the shaders use, where the device has them
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &f11;
    vkGetPhysicalDeviceFeatures2(phys, &f2);
    float prio = 1;
    VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = &f2;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    device.make(
        "device", "creating a device", [&](VkDevice* h) { return vkCreateDevice(phys, &dci, nullptr, h); },
        [](VkDevice h) { vkDestroyDevice(h, nullptr); });
    vkGetDeviceQueue(device, family, 0, &queue);
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = family;
    VkDevice d = device;
    pool.make(
        "command_pool", "creating a command pool",
        [&](VkCommandPool* h) { return vkCreateCommandPool(d, &pci, nullptr, h); },
        [d](VkCommandPool h) { vkDestroyCommandPool(d, h, nullptr); });
  }
};

class VkProgram : public Program {
public:
  // `items`: the element size of each storage buffer, by binding
  VkProgram(Context& c, const std::string& fn, const std::vector<uint32_t>& spirv, std::vector<size_t> items)
      : c_(c), fn_(fn), items_(std::move(items)), bindings_(static_cast<uint32_t>(items_.size())) {
    uint32_t bindings = bindings_;
    VkDevice d = c.device;
    VkShaderModuleCreateInfo smci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smci.codeSize = spirv.size() * 4;
    smci.pCode = spirv.data();
    module_.make(
        "shader_module", "creating a shader module",
        [&](VkShaderModule* h) { return vkCreateShaderModule(d, &smci, nullptr, h); },
        [d](VkShaderModule h) { vkDestroyShaderModule(d, h, nullptr); });
    std::vector<VkDescriptorSetLayoutBinding> b(bindings);
    for (uint32_t i = 0; i < bindings; i++)
      b[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo lci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    lci.bindingCount = bindings;
    lci.pBindings = b.data();
    set_layout_.make(
        "descriptor_layout", "creating a descriptor layout",
        [&](VkDescriptorSetLayout* h) { return vkCreateDescriptorSetLayout(d, &lci, nullptr, h); },
        [d](VkDescriptorSetLayout h) { vkDestroyDescriptorSetLayout(d, h, nullptr); });
    VkPipelineLayoutCreateInfo plci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    plci.setLayoutCount = 1;
    plci.pSetLayouts = set_layout_.ptr();
    layout_.make(
        "pipeline_layout", "creating a pipeline layout",
        [&](VkPipelineLayout* h) { return vkCreatePipelineLayout(d, &plci, nullptr, h); },
        [d](VkPipelineLayout h) { vkDestroyPipelineLayout(d, h, nullptr); });
    VkComputePipelineCreateInfo cpci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpci.stage.module = module_;
    cpci.stage.pName = "main";
    cpci.layout = layout_;
    pipeline_.make(
        "pipeline", "creating a pipeline",
        [&](VkPipeline* h) { return vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &cpci, nullptr, h); },
        [d](VkPipeline h) { vkDestroyPipeline(d, h, nullptr); });
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max<uint32_t>(bindings, 1)};
    VkDescriptorPoolCreateInfo dpci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpci.maxSets = 1;
    dpci.poolSizeCount = 1;
    dpci.pPoolSizes = &ps;
    dpool_.make(
        "descriptor_pool", "creating a descriptor pool",
        [&](VkDescriptorPool* h) { return vkCreateDescriptorPool(d, &dpci, nullptr, h); },
        [d](VkDescriptorPool h) { vkDestroyDescriptorPool(d, h, nullptr); });
    VkDescriptorSetAllocateInfo dsai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dsai.descriptorPool = dpool_;
    dsai.descriptorSetCount = 1;
    dsai.pSetLayouts = set_layout_.ptr();
    fail_point("descriptor_set", "allocating a descriptor set"); // freed with its pool
    check(vkAllocateDescriptorSets(d, &dsai, &set_), "allocating a descriptor set");
    VkCommandBufferAllocateInfo cbai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cbai.commandPool = c.pool;
    cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cbai.commandBufferCount = 1;
    cmd_.make( // the pool is shared with other programs' runs: used under the context's lock
        "command_buffer", "allocating a command buffer",
        [&](VkCommandBuffer* h) {
          std::lock_guard<std::mutex> lk(c.m);
          return vkAllocateCommandBuffers(d, &cbai, h);
        },
        [&c](VkCommandBuffer h) {
          std::lock_guard<std::mutex> lk(c.m);
          vkFreeCommandBuffers(c.device, c.pool, 1, &h);
        });
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    fence_.make(
        "fence", "creating a fence", [&](VkFence* h) { return vkCreateFence(d, &fci, nullptr, h); },
        [d](VkFence h) { vkDestroyFence(d, h, nullptr); });
  }
  VkProgram(const VkProgram&) = delete;
  VkProgram& operator=(const VkProgram&) = delete;
  void run(void** bufs, size_t n, const Launch& l) override {
    for (uint32_t i = 0; i < bindings_ && i < n; i++)
      if (size_t elems = static_cast<VkBuf*>(bufs[i])->size / items_[i]; elems > (size_t{1} << 31))
        throw std::runtime_error(
            "VULKAN: indices past 2^31 are not supported: kernel " + fn_ + "'s buffer " + std::to_string(i) +
            " holds " + std::to_string(elems) +
            " elements, and GLSL indexes a buffer with a 32-bit int (at most 2^31 elements)");
    std::lock_guard<std::mutex> lk(c_.m);
    std::vector<VkDescriptorBufferInfo> infos(bindings_);
    std::vector<VkWriteDescriptorSet> writes(bindings_);
    for (uint32_t i = 0; i < bindings_ && i < n; i++) {
      infos[i] = {static_cast<VkBuf*>(bufs[i])->buffer, 0, VK_WHOLE_SIZE};
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = set_;
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(c_.device, std::min<uint32_t>(bindings_, static_cast<uint32_t>(n)), writes.data(),
                           0, nullptr);
    uint32_t g[3] = {1, 1, 1};
    for (size_t i = 0; i < 3 && i < l.global_size.size(); i++)
      g[i] = static_cast<uint32_t>(l.global_size[i]);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmd_, &bi), "recording");
    vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
    vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set_, 0, nullptr);
    vkCmdDispatch(cmd_, g[0], g[1], g[2]);
    // the shader's writes made visible to the host, which reads the mapped memory after the fence
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
    check(vkEndCommandBuffer(cmd_), "recording");
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = cmd_.ptr();
    check(vkQueueSubmit(c_.queue, 1, &si, fence_), "submitting a kernel");
    check(vkWaitForFences(c_.device, 1, fence_.ptr(), VK_TRUE, UINT64_MAX), "running a kernel");
    vkResetFences(c_.device, 1, fence_.ptr());
  }

private:
  Context& c_;
  std::string fn_;
  std::vector<size_t> items_;
  uint32_t bindings_;
  // in the order they are made: released in reverse, by a throw in the constructor too
  Handle<VkShaderModule> module_;
  Handle<VkDescriptorSetLayout> set_layout_;
  Handle<VkPipelineLayout> layout_;
  Handle<VkPipeline> pipeline_;
  Handle<VkDescriptorPool> dpool_;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
  Handle<VkCommandBuffer> cmd_;
  Handle<VkFence> fence_;
};

class VulkanDevice : public Device {
public:
  std::string name() const override { return "VULKAN"; }
  std::string unavailable() const override { return runtime_.why_not(); }
  Target target() const override {
    Target t;
    t.gpu = true;
    t.max_local = 256;
    t.max_groups = 65535;
    t.max_shared = 16384;
    t.max_thread_iterations = 65535; // lavapipe's loop limiter (kept for every Vulkan device: safe)
    if (unavailable().empty()) {
      const auto& lim = ctx().limits;
      t.max_local = std::min<int64_t>(lim.maxComputeWorkGroupInvocations, 1024);
      t.max_groups = std::min({lim.maxComputeWorkGroupCount[0], lim.maxComputeWorkGroupCount[1],
                               lim.maxComputeWorkGroupCount[2]});
      t.max_shared = lim.maxComputeSharedMemorySize;
      for (int k = 0; k < 3; k++)
        t.max_local_axis[k] = lim.maxComputeWorkGroupSize[k];
    }
    return t;
  }
  std::string fingerprint() const override { return "VULKAN glslang " + ctx().description; }
  void* alloc(size_t bytes) override {
    Context& c = ctx();
    VkDevice d = c.device;
    auto b = std::make_unique<VkBuf>(); // what is made is released if a later step throws
    b->size = bytes;
    std::string size = std::to_string(bytes) + " bytes";
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = bytes;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    b->buffer.make(
        "buffer", "creating a buffer of " + size,
        [&](VkBuffer* h) { return vkCreateBuffer(d, &bci, nullptr, h); },
        [d](VkBuffer h) { vkDestroyBuffer(d, h, nullptr); });
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d, b->buffer, &req);
    if (!(req.memoryTypeBits & (1u << c.memory_type)))
      throw std::runtime_error("VULKAN: no host-visible memory type for a storage buffer");
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = c.memory_type;
    b->memory.make(
        "memory", "allocating " + size,
        [&](VkDeviceMemory* h) { return vkAllocateMemory(d, &mai, nullptr, h); },
        [d](VkDeviceMemory h) { vkFreeMemory(d, h, nullptr); });
    fail_point("bind", "binding memory");
    check(vkBindBufferMemory(d, b->buffer, b->memory, 0), "binding memory");
    fail_point("map", "mapping memory");
    check(vkMapMemory(d, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), "mapping memory");
    void* key = b.get();
    std::lock_guard<std::mutex> lk(m_);
    bufs_[key] = std::move(b);
    return key;
  }
  void free(void* p, size_t) override {
    std::unique_ptr<VkBuf> b; // released as it goes: the buffer, then its memory (unmapped with it)
    std::lock_guard<std::mutex> lk(m_);
    auto it = bufs_.find(p);
    if (it == bufs_.end()) return;
    b = std::move(it->second);
    bufs_.erase(it);
  }
  void copyin(void* dst, const void* src, size_t n) override {
    if (n) std::memcpy(static_cast<VkBuf*>(dst)->mapped, src, n);
  }
  void copyout(void* dst, const void* src, size_t n) override {
    if (n) std::memcpy(dst, static_cast<const VkBuf*>(src)->mapped, n);
  }
  std::string render(const std::string& fn, const std::vector<UOpRef>& linear, bool) override {
    return render_cstyle(glsl_dialect(), fn, linear, false);
  }
  std::string compiled_text(const std::string& fn, const std::string& src) override {
    std::vector<uint32_t> words;
    {
      std::lock_guard<std::mutex> lk(compile_m_);
      words = glsl_to_spirv(fn, src);
    }
    spirv_tool(words, false);
    return spirv_tool(words, true);
  }
  int compile_count() const override { return compiles_; }
  std::unique_ptr<Program> compile(const std::string& fn, const std::string& src) override {
    std::vector<uint32_t> words;
    {
      std::lock_guard<std::mutex> lk(compile_m_); // glslang keeps some state per process
      words = glsl_to_spirv(fn, src);
    }
    spirv_tool(words, false); // every module is validated before it runs
    compiles_++;
    return std::make_unique<VkProgram>(ctx(), fn, words, item_sizes(src));
  }

private:
  Context& ctx() const { return runtime_.get(); }
  LazyRuntime<Context> runtime_;
  std::mutex m_, compile_m_;
  std::map<void*, std::unique_ptr<VkBuf>> bufs_;
  std::atomic<int> compiles_{0};
};

const bool registered = register_device("VULKAN", [] { return std::make_unique<VulkanDevice>(); });

} // namespace
} // namespace mg
