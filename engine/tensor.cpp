// Tensor creation, realizing and reading back.
#include "engine/tensor.h"
#include "engine/errors.h"
#include "engine/rng.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include <unistd.h>

#include "engine/device.h"
#include "engine/float_format.h"
#include "engine/gradient.h"
#include "engine/realize.h"
#include "engine/schedule.h"
#include "engine/settings.h"
#include "engine/shapetracker.h"
#include "engine/viz.h"

namespace mg {

int64_t checked_numel(const Shape& s) {
  int64_t n = 1;
  for (auto& sd : s) {
    int64_t d = sd.vmax();
    if (d < 0) user_error("negative dimension in shape " + shape_str(s));
    // 2^48 elements is far beyond any machine's memory; the cap keeps n * itemsize from wrapping
    if (__builtin_mul_overflow(n, d, &n) || n > (int64_t(1) << 48))
      user_error("shape " + shape_str(s) + " has too many elements");
  }
  return n;
}

namespace {

// Writes v as dtype d at p.
void store_as(DType d, void* p, double v) {
  switch (d) {
  case DType::Bool:
    *static_cast<bool*>(p) = v != 0;
    break;
  case DType::Int8:
    *static_cast<int8_t*>(p) = static_cast<int8_t>(v);
    break;
  case DType::UInt8:
    *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v);
    break;
  case DType::Int16:
    *static_cast<int16_t*>(p) = static_cast<int16_t>(v);
    break;
  case DType::UInt16:
    *static_cast<uint16_t*>(p) = static_cast<uint16_t>(v);
    break;
  case DType::Int32:
    *static_cast<int32_t*>(p) = static_cast<int32_t>(v);
    break;
  case DType::UInt32:
    *static_cast<uint32_t*>(p) = static_cast<uint32_t>(v);
    break;
  case DType::Int64:
    *static_cast<int64_t*>(p) = static_cast<int64_t>(v);
    break;
  case DType::UInt64:
    *static_cast<uint64_t*>(p) = static_cast<uint64_t>(v);
    break;
  case DType::Float16:
    *static_cast<_Float16*>(p) = static_cast<_Float16>(v);
    break;
  case DType::BFloat16: {
    uint16_t h = f32_to_bf16(static_cast<float>(v));
    std::memcpy(p, &h, 2);
    break;
  }
  case DType::Float32:
    *static_cast<float*>(p) = static_cast<float>(v);
    break;
  case DType::Float64:
    *static_cast<double*>(p) = v;
    break;
  default:
    internal_error("store_as void");
  }
}

double load_as(DType d, const void* p) {
  switch (d) {
  case DType::Bool:
    return *static_cast<const bool*>(p);
  case DType::Int8:
    return *static_cast<const int8_t*>(p);
  case DType::UInt8:
    return *static_cast<const uint8_t*>(p);
  case DType::Int16:
    return *static_cast<const int16_t*>(p);
  case DType::UInt16:
    return *static_cast<const uint16_t*>(p);
  case DType::Int32:
    return *static_cast<const int32_t*>(p);
  case DType::UInt32:
    return *static_cast<const uint32_t*>(p);
  case DType::Int64:
    return static_cast<double>(*static_cast<const int64_t*>(p));
  case DType::UInt64:
    return static_cast<double>(*static_cast<const uint64_t*>(p));
  case DType::Float16:
    return static_cast<double>(*static_cast<const _Float16*>(p));
  case DType::BFloat16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bf16_to_f32(h);
  }
  case DType::Float32:
    return *static_cast<const float*>(p);
  case DType::Float64:
    return *static_cast<const double*>(p);
  default:
    internal_error("load_as void");
  }
}

// An integer or bool element's exact value: sign-extended when signed, zero-extended when not.
int64_t load_bits(DType d, const void* p) {
  if (d != DType::Int64 && d != DType::UInt64) return static_cast<int64_t>(load_as(d, p)); // exact below 2^53
  int64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

Tensor buffer_tensor(std::shared_ptr<Buffer> b, const Shape& shape) {
  DType d = b->dtype;
  Tensor t(UOp::make(Ops::BUFFER, d, {}, std::move(b)));
  return t.reshape(shape);
}

// Counter-based generator (splitmix64 of seed and counter): any element is reproducible alone.
uint64_t rng_seed = 0, rng_counter = 0;
uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double uniform01() { // 24 random bits: exactly representable in float32, in [0, 1)
  uint64_t r = splitmix(splitmix(rng_seed) ^ rng_counter++);
  return static_cast<double>(r >> 40) / static_cast<double>(1ULL << 24);
}
} // namespace

// The walk from the root stops at a COPY: its value lives on the device it names, whatever lies
// below it.
std::optional<std::string> Tensor::home() const {
  std::unordered_set<const UOp*> seen;
  std::vector<const UOp*> todo{uop.get()};
  while (!todo.empty()) {
    const UOp* u = todo.back();
    todo.pop_back();
    if (u->op == Ops::BUFFER) return u->buffer()->device;
    if (u->op == Ops::COPY) return std::get<std::string>(u->arg);
    for (auto it = u->src.rbegin(); it != u->src.rend(); ++it)
      if (seen.insert(it->get()).second) todo.push_back(it->get());
  }
  return std::nullopt;
}

std::string Tensor::device() const { return home().value_or(default_device()); }

Tensor Tensor::from_data(const std::vector<double>& data, const Shape& shape, DType dtype,
                         const std::string& device) {
  int64_t n = checked_numel(shape);
  if (static_cast<int64_t>(data.size()) != n)
    user_error("data has " + std::to_string(data.size()) + " elements but shape " + shape_str(shape) +
               " needs " + std::to_string(n));
  if (dtype == DType::Void) user_error("cannot make a tensor of dtype void");
  auto b =
      std::make_shared<Buffer>(device.empty() ? default_device() : device, dtype, static_cast<size_t>(n));
  std::vector<unsigned char> bytes(b->nbytes());
  for (int64_t i = 0; i < n; i++)
    store_as(dtype, bytes.data() + i * itemsize(dtype), data[i]);
  b->copyin(bytes.data());
  return buffer_tensor(std::move(b), shape);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, const std::string& device) {
  int64_t n = checked_numel(shape);
  return buffer_tensor(std::make_shared<Buffer>(device.empty() ? default_device() : device, dtype, n), shape);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, const std::string&) {
  checked_numel(shape);
  Tensor c(UOp::cconst(dtype, value));
  if (shape.empty()) return c;
  return c.reshape(Shape(shape.size(), 1)).expand(shape);
}

Tensor Tensor::arange(double start, double stop, double step, std::optional<DType> dtype) {
  if (step == 0) user_error("arange step cannot be 0");
  DType d = dtype.value_or(std::floor(start) == start && std::floor(stop) == stop && std::floor(step) == step
                               ? default_int
                               : default_float);
  double count = std::ceil((stop - start) / step);
  if (!std::isfinite(count)) user_error("arange: start, stop and step must be finite numbers");
  // the cumsum below views n values as n x (2n - 1) windows: n must stay far below 2^31
  if (!(count <= double(int64_t(1) << 30)))
    user_error("arange of " + std::to_string(static_cast<long long>(std::min(count, 9e18))) +
               " values: at most 2^30 are supported");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  if (n == 0) return Tensor::empty({0}, d);
  // values = cumsum of [step]*n, shifted: composed from full + cumsum, as tinygrad does
  Tensor s = full({n}, step, d).cumsum(0).cast(d);
  return s.add(from_scalar({start - step, is_float(d) ? DType::Float32 : DType::Int32}, s));
}

Tensor Tensor::eye(int64_t n, DType dtype) {
  if (n < 0) user_error("eye size must be >= 0");
  if (n == 0) return Tensor::empty({0, 0}, dtype);
  // ones in column 0 of an (n, n+1) grid, flattened: every (n+1)-th element is 1
  return full({n, 1}, 1, dtype).pad({{0, 0}, {0, n}}).flatten().shrink({{0, n * n}}).reshape({n, n});
}

RngState rng_state() { return {rng_seed, rng_counter}; }
void set_rng_state(RngState s) { rng_seed = s.seed, rng_counter = s.counter; }

void Tensor::manual_seed(uint64_t seed) {
  rng_seed = seed;
  rng_counter = 0;
}

// n doubles drawn on the host; more than the machine's memory is an error, not an overcommit
// that the kernel later kills
static std::vector<double> host_values(int64_t n, const Shape& shape) {
  double ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (double(n) * sizeof(double) > ram)
    user_error("random values for shape " + shape_str(shape) + " need more memory than this machine has");
  return std::vector<double>(static_cast<size_t>(n));
}

Tensor Tensor::rand(const Shape& shape, DType dtype) {
  int64_t n = checked_numel(shape);
  std::vector<double> v = host_values(n, shape);
  for (auto& x : v)
    x = uniform01();
  return from_data(v, shape, is_float(dtype) ? dtype : default_float).cast(dtype);
}

Tensor Tensor::randn(const Shape& shape, DType dtype) {
  int64_t n = checked_numel(shape);
  std::vector<double> v = host_values(n, shape);
  for (int64_t i = 0; i < n; i += 2) { // Box-Muller, two normals per pair of uniforms
    double u1 = 1.0 - uniform01(), u2 = uniform01();
    double r = std::sqrt(-2.0 * std::log(u1));
    v[i] = r * std::cos(2 * M_PI * u2);
    if (i + 1 < n) v[i + 1] = r * std::sin(2 * M_PI * u2);
  }
  return from_data(v, shape, is_float(dtype) ? dtype : default_float).cast(dtype);
}

Tensor Tensor::contiguous() const {
  // Already a buffer, or a reshape of one: nothing to copy. Only the node and a reshape's source
  // are looked up, not the whole graph below (resolve_realized walks all of it, and a Winograd
  // convolution calls this a dozen times on one growing graph: 4% of a step). A node that only a
  // deeper resolve would find computed gets a CONTIGUOUS that the scheduler resolves the same way.
  UOpRef r = uop->cached() ? uop->cached() : uop;
  if (r->op == Ops::RESHAPE)
    if (UOpRef below = r->src[0]->cached()) r = r->replace_src({below});
  if (r->op == Ops::BUFFER || (r->op == Ops::RESHAPE && r->src[0]->op == Ops::BUFFER))
    return Tensor(keep_for_grad(uop, r));
  return Tensor(UOp::make(Ops::CONTIGUOUS, dtype(), {uop}));
}

// ---------------------------------------------------------------- running

namespace {
// Region assigns (a view of a buffer assigned) not realized yet, in the order they were made, with
// the buffer each writes. Held weakly: a dropped graph's assign is forgotten with it.
struct RegionAssign {
  std::__weak_ptr<const UOp, __gnu_cxx::_S_single> assign;
  std::weak_ptr<Buffer> buffer;
};
std::vector<RegionAssign>& region_assigns() {
  static std::vector<RegionAssign> pending;
  return pending;
}

// Runs, one by one in the order they were made, the pending region assigns into buffers that the
// graphs of `outs` read, other than as an assign's own target: the graph reads the buffer with
// them done. Without this, print(buf) after buf:shrink(...):assign(v) showed the old values until
// the view itself was realized.
void run_region_assigns_read_by(const std::vector<UOpRef>& outs) {
  auto& pending = region_assigns();
  std::erase_if(pending, [](const RegionAssign& r) {
    UOpRef u = r.assign.lock();
    return !u || u->cached() || r.buffer.expired();
  });
  if (pending.empty()) return;
  std::unordered_set<const Buffer*> written, read;
  for (auto& r : pending)
    written.insert(r.buffer.lock().get());
  std::unordered_set<const UOp*> seen;
  std::vector<const UOp*> stack;
  for (auto& o : outs)
    stack.push_back(o.get());
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second) continue;
    if (u->op == Ops::BUFFER && written.count(u->buffer().get())) read.insert(u->buffer().get());
    bool region = u->op == Ops::CONTIGUOUS && u->src.size() == 3; // its src[2]: the target's view
    for (size_t i = 0; i < (region ? 2 : u->src.size()); i++)
      stack.push_back(u->src[i].get());
  }
  if (read.empty()) return;
  std::vector<UOpRef> first;
  std::erase_if(pending, [&](const RegionAssign& r) {
    if (!read.count(r.buffer.lock().get())) return false;
    first.push_back(r.assign.lock());
    return true;
  });
  for (auto& u : first) {
    Tensor t(u);
    t.realize(boundary::assign);
  }
}
} // namespace

void note_region_assign(const UOpRef& assign, const std::shared_ptr<Buffer>& buffer) {
  region_assigns().push_back({assign, buffer});
}

void Tensor::realize_all(const std::vector<Tensor*>& ts, const char* why) {
  std::vector<UOpRef> outs;
  for (auto* t : ts)
    outs.push_back(t->uop);
  run_region_assigns_read_by(outs);
  int dbg = settings().debug;
  if (dbg >= 4)
    for (auto& u : outs)
      std::printf("--- tensor graph\n%s", print_tree(u).c_str());
  auto t0 = std::chrono::steady_clock::now();
  int64_t compiled0 = global_counters().kernels_compiled;
  std::vector<UOpRef> views;
  std::vector<ScheduleItem> items;
  std::vector<KernelRun> runs;
  double schedule_ms = 0;
  int64_t cached0 = global_counters().schedules_cached;
  try {
    items = create_schedule(outs, &views, why ? why : boundary::explicit_realize);
    schedule_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    runs = run_schedule(items);
    if (settings().viz) viz_record(outs, items, runs);
  } catch (...) {
    if (settings().viz) viz_record(outs, items, {}); // the graphs of a realize that failed help most
    // a schedule that failed part way (a kernel on two devices), or kernels that did not run,
    // cached buffers that were never written: forget them
    UOp::mutation_epoch()++;
    throw;
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < ts.size(); i++)
    ts[i]->uop = keep_for_grad(outs[i], views[i]);
  if (dbg >= 1 && !runs.empty()) {
    double kt = 0;
    for (auto& r : runs)
      kt += r.seconds;
    std::printf("*** realize: %zu kernel%s (%lld compiled), %.3f ms scheduling%s, %.3f ms in kernels, %.3f "
                "ms total\n",
                runs.size(), runs.size() == 1 ? "" : "s",
                static_cast<long long>(global_counters().kernels_compiled - compiled0), schedule_ms,
                global_counters().schedules_cached > cached0 ? " (cached)" : "", kt * 1e3, ms);
  }
  std::fflush(stdout);
}

Tensor& Tensor::realize(const char* why) {
  realize_all({this}, why);
  return *this;
}

std::vector<ScheduleItem> Tensor::schedule() const { return preview_schedule({uop}); }

namespace {
// Every element of the realized tensor t, row-major, read through its view by `load`.
template <class T, class Load> std::vector<T> read_elements(Tensor& t, Load load) {
  t.realize(boundary::output);
  std::vector<T> out(static_cast<size_t>(t.numel()));
  if (out.empty()) return out;
  // After realize the graph is a view of one buffer (under a REALIZED that keeps the graph for
  // gradients): read through its ShapeTracker.
  std::vector<const UOp*> chain;
  const UOp* u = t.uop->op == Ops::REALIZED ? t.uop->src[0].get() : t.uop.get();
  while (is_movement(u->op))
    chain.push_back(u), u = u->src[0].get();
  if (u->op != Ops::BUFFER) internal_error("realized tensor is not a buffer view");
  ShapeTracker st = ShapeTracker::contiguous(u->shape);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    st = st.apply((*it)->op, (*it)->arg);
  Buffer& b = *u->buffer();
  std::vector<unsigned char> bytes(b.nbytes());
  b.copyout(bytes.data());
  std::vector<int64_t> idx(t.ndim(), 0);
  for (int64_t i = 0; i < t.numel(); i++) {
    int64_t off = st.offset_of(idx);
    out[i] = off < 0 ? T{0} : load(b.dtype, bytes.data() + off * itemsize(b.dtype));
    for (int64_t d = t.ndim() - 1; d >= 0; d--) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}
} // namespace

std::vector<double> Tensor::data() { return read_elements<double>(*this, load_as); }

std::vector<int64_t> Tensor::int_data() {
  if (is_float(dtype()))
    user_error(std::string("int_data: the tensor is ") + name(dtype()) + ", not an integer");
  return read_elements<int64_t>(*this, load_bits);
}

Tensor Tensor::from_ints(const std::vector<int64_t>& data, const Shape& shape, DType dtype,
                         const std::string& device) {
  if (is_float(dtype) || dtype == DType::Void) {
    std::vector<double> d(data.begin(), data.end());
    return from_data(d, shape, dtype, device);
  }
  int64_t n = checked_numel(shape);
  if (static_cast<int64_t>(data.size()) != n)
    user_error("data has " + std::to_string(data.size()) + " elements but shape " + shape_str(shape) +
               " needs " + std::to_string(n));
  size_t size = static_cast<size_t>(itemsize(dtype));
  std::string bytes(static_cast<size_t>(n) * size, '\0');
  for (int64_t i = 0; i < n; i++) {
    int64_t v = dtype == DType::Bool ? data[i] != 0 : data[i];
    std::memcpy(bytes.data() + i * size, &v, size); // little-endian: the low bytes, wrapped
  }
  return from_bytes(bytes.data(), bytes.size(), shape, dtype, device);
}

std::string Tensor::to_bytes() {
  Tensor c = contiguous();
  c.realize(boundary::output);
  const UOp* u = c.uop->op == Ops::REALIZED ? c.uop->src[0].get() : c.uop.get();
  if (u->op == Ops::RESHAPE) u = u->src[0].get();
  if (u->op != Ops::BUFFER) internal_error("contiguous realized tensor is not a buffer");
  std::string out(static_cast<size_t>(numel()) * itemsize(dtype()), '\0');
  if (!out.empty()) u->buffer()->copyout(out.data());
  return out;
}

Tensor Tensor::from_bytes(const void* data, size_t nbytes, const Shape& shape, DType dtype,
                          const std::string& device) {
  int64_t n = checked_numel(shape);
  if (dtype == DType::Void) user_error("cannot make a tensor of dtype void");
  if (static_cast<size_t>(n) * itemsize(dtype) != nbytes)
    user_error(std::to_string(nbytes) + " bytes do not make a " + name(dtype) + " tensor of shape " +
               shape_str(shape) + " (" + std::to_string(n * itemsize(dtype)) + " bytes)");
  auto b =
      std::make_shared<Buffer>(device.empty() ? default_device() : device, dtype, static_cast<size_t>(n));
  if (n > 0) b->copyin(data);
  return buffer_tensor(std::move(b), shape);
}

double Tensor::item() {
  if (numel() != 1) user_error("item() needs a tensor with one element, got shape " + shape_str(shape()));
  return data()[0];
}

namespace {
template <class T> using Fmt = std::function<std::string(T)>;

// numpy's layout: values right-aligned to one width, rows on their own lines, a blank line
// between 2-D blocks, the middle of long dims elided. With `shown`, collects the values that
// would be printed instead of printing them.
template <class T>
void fmt_rec(std::ostringstream& os, const std::vector<T>& v, const Shape& s, size_t dim, int64_t off,
             const Fmt<T>& fmt, bool elide, int indent, int width, std::vector<T>* shown = nullptr) {
  if (dim == s.size()) {
    if (shown) {
      shown->push_back(v[off]);
      return;
    }
    std::string f = fmt(v[off]);
    os << std::string(width > static_cast<int>(f.size()) ? width - f.size() : 0, ' ') << f;
    return;
  }
  int64_t stride = 1;
  for (size_t i = dim + 1; i < s.size(); i++)
    stride *= s[i];
  size_t below = s.size() - dim - 1; // dims under this one
  std::string sep = below == 0 ? ", " : "," + std::string(below, '\n') + std::string(indent + 1, ' ');
  os << "[";
  int64_t n = s[dim];
  for (int64_t i = 0; i < n; i++) {
    if (elide && n > 6 && i == 3) {
      os << "..." << sep;
      i = n - 3;
    }
    fmt_rec(os, v, s, dim + 1, off + i * stride, fmt, elide, indent + 1, width, shown);
    if (i + 1 < n) os << sep;
  }
  os << "]";
}
} // namespace

namespace {
// The values laid out as numpy does, each printed by `fmt` (made from the values shown).
template <class T>
void format_values(std::ostringstream& os, const std::vector<T>& v, const Shape& shape,
                   const std::function<Fmt<T>(const std::vector<T>&)>& make_fmt) {
  bool elide = v.size() > 1000;
  std::vector<T> shown;
  std::ostringstream scratch;
  fmt_rec<T>(scratch, v, shape, 0, 0, nullptr, elide, 7, 0, &shown);
  Fmt<T> fmt = make_fmt(shown);
  int width = 0;
  for (T x : shown)
    width = std::max(width, static_cast<int>(fmt(x).size()));
  fmt_rec<T>(os, v, shape, 0, 0, fmt, elide, 7, width);
}
} // namespace

std::string Tensor::to_string() {
  std::ostringstream os;
  os << "Tensor(";
  DType d = dtype();
  if (numel() == 0)
    os << "[]";           // as numpy: no rows of nothing, however many there would be
  else if (is_float(d)) { // as numpy: one format for the values shown, chosen from those values alone
    std::vector<double> v = data(); // realizes (replacing uop) before shape() is read
    format_values<double>(os, v, shape(),
                          [d](const std::vector<double>& shown) { return FloatFormat(shown, d); });
  } else { // integers exactly, from their bits
    std::vector<int64_t> v = int_data();
    format_values<int64_t>(os, v, shape(), [d](const std::vector<int64_t>&) {
      return [d](int64_t x) {
        if (d == DType::Bool) return std::string(x != 0 ? "true" : "false");
        return d == DType::UInt64 ? std::to_string(static_cast<uint64_t>(x)) : std::to_string(x);
      };
    });
  }
  os << ", shape=" << shape_str(shape()) << ", dtype=" << name(dtype()) << ", device=" << device() << ")";
  return os.str();
}

} // namespace mg
