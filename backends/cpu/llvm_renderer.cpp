// Linear UOps -> LLVM IR text, written directly as tinygrad's LLVM renderer does: the kernel
// as a function of its buffers (noalias), loops as blocks with a phi for the counter, and
// accumulators as stack slots that LLVM's mem2reg turns into registers. Opaque pointers (`ptr`).
// UPCAST copies that read or write consecutive elements become one load or store of a vector
// type (<4 x float>); LLVM's vectorizers do the rest (see the IR after O2).
#include "backends/cpu/llvm_renderer.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "backends/cpu/c_renderer.h"
#include "engine/codegen/linearize.h"
#include "engine/codegen/opts.h"
#include "engine/errors.h"

namespace mg {

namespace {

// The IR type of a value; bfloat16 computes in float.
const TypeNames kLlvmTypes{"i1",  "i8",  "i8",   "i16",   "i16",   "i32",   "i32",
                           "i64", "i64", "half", "float", "float", "double"};
std::string ll_type(DType t) { return type_in(t, kLlvmTypes, "the LLVM renderer"); }
// The IR type of a buffer element: bool as a byte, bfloat16 as its bits.
std::string mem_type(DType t) {
  if (t == DType::Bool) return "i8";
  return t == DType::BFloat16 ? "i16" : ll_type(t);
}

// LLVM's integers have no sign: an unsigned value prints as the signed one with its bits.
std::string int_literal(DType t, int64_t bits) {
  int w = itemsize(t) * 8;
  return std::to_string(w == 64 ? bits : (bits << (64 - w)) >> (64 - w));
}

std::string literal(DType t, double v) {
  char b[48];
  if (t == DType::Float16) { // half constants are written as their bits
    uint16_t h;
    _Float16 f = static_cast<_Float16>(v);
    std::memcpy(&h, &f, 2);
    std::snprintf(b, sizeof b, "0xH%04X", h);
    return b;
  }
  if (is_float(t)) { // hex of the double holding the value: exact, NaN and inf included
    double d = t == DType::Float64 ? v : static_cast<double>(static_cast<float>(v));
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    std::snprintf(b, sizeof b, "0x%016llX", static_cast<unsigned long long>(bits));
    return b;
  }
  if (t == DType::Bool) return v != 0 ? "true" : "false";
  return int_literal(t, int_bits(t, v));
}
std::string literal_of(const UOp& c) {
  if (is_float(c.dtype) || c.dtype == DType::Bool) return literal(c.dtype, c.const_value());
  return int_literal(c.dtype, c.const_bits());
}

struct LRender {
  std::ostringstream entry, body; // allocas and buffer pointers; the code
  std::unordered_map<const UOp*, std::string> val;
  std::unordered_map<const UOp*, DType> acc_type;
  int n = 0;
  std::string block = "start"; // the block being written
  struct Loop {
    std::string head, body, exit, counter, next_token;
  };
  std::unordered_map<const UOp*, Loop> loops;
  std::map<std::string, std::string> patches; // token -> the block a loop's back edge comes from
  const UOp* par = nullptr;
  bool vector_loop = false;             // a loop VECTORIZE marks: its back edge carries metadata !0
  std::unordered_set<const UOp*> tiles; // tile loops (linearize.h): their back edges carry !2
  std::unordered_set<const UOp*> gathers; // loops that would gather (linearize.h): !4
  std::map<std::string, bool> declared; // intrinsics used
  // Index arithmetic, which never overflows (the lowerer picks int64 where int32 could): marked
  // nsw, as C's signed arithmetic is, so LLVM sees consecutive addresses through the sign extension
  // and vectorizes the loads. Arithmetic on tensor values is left to wrap.
  std::unordered_set<const UOp*> index_math;
  // UPCAST copies that load or store consecutive elements, done as one vector load or store: a
  // member's group (leader: the first load, or the last store, in program order), lane and width.
  struct Lane {
    const UOp* leader;
    int64_t lane, width, first; // first: the group's lowest offset from the base
  };
  std::unordered_map<const UOp*, Lane> lanes;
  std::unordered_map<const UOp*, UOpRef> refs;                    // every node of the program, by address
  std::unordered_map<const UOp*, std::vector<const UOp*>> groups; // leader -> members by lane

  std::string tmp() { return "%v" + std::to_string(n++); }
  void line(const std::string& s) { body << "  " << s << "\n"; }
  void label(const std::string& l) {
    body << l << ":\n";
    block = l;
  }
  std::string emit(const std::string& expr) {
    std::string t = tmp();
    line(t + " = " + expr);
    return t;
  }
  std::string V(const UOpRef& u) {
    if (u->op == Ops::CONST) return literal_of(*u);
    if (u->op == Ops::DEFINE_ACC) return emit("load " + ll_type(u->dtype) + ", ptr " + val.at(u.get()));
    auto it = val.find(u.get());
    if (it == val.end())
      internal_error(std::string("LLVM renderer used ") + name(u->op) + " before defining it");
    return it->second;
  }
  std::string intrinsic(const std::string& f, DType t, int args) {
    std::string ty = ll_type(t), name = "llvm." + f + "." +
                                        (ty == "half"    ? "f16"
                                         : ty == "float" ? "f32"
                                                         : "f64");
    std::string decl = "declare " + ty + " @" + name + "(" + ty + (args == 2 ? ", " + ty : "") + ")";
    declared[decl] = true;
    return "@" + name;
  }
};

// The bfloat16 of float f, as the low 16 bits of an i32: rounded to nearest even, and a NaN kept a
// (quiet) NaN, which rounding could carry to inf.
std::string bf16_bits(LRender& r, const std::string& f) {
  std::string bits = r.emit("bitcast float " + f + " to i32"), hi = r.emit("lshr i32 " + bits + ", 16");
  std::string lsb = r.emit("and i32 " + hi + ", 1");
  std::string rounded =
      r.emit("lshr i32 " + r.emit("add i32 " + r.emit("add i32 " + bits + ", 32767") + ", " + lsb) + ", 16");
  std::string nan = r.emit("fcmp uno float " + f + ", 0.0");
  return r.emit("select i1 " + nan + ", i32 " + r.emit("or i32 " + hi + ", 64") + ", i32 " + rounded);
}

std::string cast(LRender& r, DType from, DType to, const std::string& x) {
  std::string ft = ll_type(from), tt = ll_type(to);
  if (to == DType::Bool)
    return is_float(from) ? r.emit("fcmp une " + ft + " " + x + ", 0.0")
                          : r.emit("icmp ne " + ft + " " + x + ", 0");
  if (to == DType::BFloat16) { // round to bfloat16 precision, kept in float
    std::string f = from == DType::BFloat16 || from == DType::Float32 ? x : cast(r, from, DType::Float32, x);
    return r.emit("bitcast i32 " + r.emit("shl i32 " + bf16_bits(r, f) + ", 16") + " to float");
  }
  if (from == DType::BFloat16) from = DType::Float32;
  ft = ll_type(from);
  if (ft == tt) return x;
  if (is_float(from) && is_float(to))
    return r.emit(std::string(itemsize(to) > itemsize(from) ? "fpext " : "fptrunc ") + ft + " " + x + " to " +
                  tt);
  if (is_float(from))
    return r.emit(std::string(is_unsigned(to) ? "fptoui " : "fptosi ") + ft + " " + x + " to " + tt);
  if (is_float(to))
    return r.emit(std::string(is_unsigned(from) || from == DType::Bool ? "uitofp " : "sitofp ") + ft + " " +
                  x + " to " + tt);
  int fb = from == DType::Bool ? 1 : itemsize(from) * 8, tb = itemsize(to) * 8;
  if (tb < fb) return r.emit("trunc " + ft + " " + x + " to " + tt);
  return r.emit(std::string(is_unsigned(from) || from == DType::Bool ? "zext " : "sext ") + ft + " " + x +
                " to " + tt);
}

std::string alu(LRender& r, const UOp& u, const std::vector<std::string>& a) {
  DType d = u.dtype, sd = u.src.empty() ? d : u.src[0]->dtype;
  bool f = is_float(d), fs = is_float(sd), un = is_unsigned(sd), nsw = r.index_math.count(&u) > 0;
  std::string t = ll_type(d), st = ll_type(sd == DType::BFloat16 ? DType::Float32 : sd);
  auto bin = [&](const char* op) { return r.emit(std::string(op) + " " + t + " " + a[0] + ", " + a[1]); };
  auto call = [&](const char* fn) {
    std::string args;
    for (size_t i = 0; i < a.size(); i++)
      args += (i ? ", " : "") + t + " " + a[i];
    return r.emit("call " + t + " " + r.intrinsic(fn, d, static_cast<int>(a.size())) + "(" + args + ")");
  };
  switch (u.op) {
  case Ops::NEG:
    return f ? r.emit("fneg " + t + " " + a[0]) : r.emit("sub " + t + " 0, " + a[0]);
  case Ops::EXP2:
    return call("exp2");
  case Ops::LOG2:
    return call("log2");
  case Ops::SIN:
    return call("sin");
  case Ops::SQRT:
    return call("sqrt");
  case Ops::TRUNC:
    return f ? call("trunc") : a[0];
  case Ops::POW:
    return call("pow");
  case Ops::RECIP:
    return r.emit("fdiv " + t + " " + literal(d, 1) + ", " + a[0]);
  case Ops::CAST:
    return cast(r, sd, d, a[0]);
  case Ops::BITCAST: // one size: an integer to an integer is the same IR type
    if (sd == DType::BFloat16 || d == DType::BFloat16 || sd == DType::Bool || d == DType::Bool)
      throw std::runtime_error(std::string("the LLVM renderer cannot BITCAST ") + name(sd) + " to " +
                               name(d));
    return st == t ? a[0] : r.emit("bitcast " + st + " " + a[0] + " to " + t);
  case Ops::ADD:
    return bin(f ? "fadd contract" : d == DType::Bool ? "or" : nsw ? "add nsw" : "add");
  case Ops::SUB:
    return bin(f ? "fsub contract" : nsw ? "sub nsw" : "sub");
  case Ops::MUL:
    return bin(f ? "fmul contract" : d == DType::Bool ? "and" : nsw ? "mul nsw" : "mul");
  case Ops::FDIV:
    return bin("fdiv");
  case Ops::IDIV:
  case Ops::MOD: {
    if (f) {
      if (u.op == Ops::MOD) return bin("frem");
      return r.emit("call " + t + " " + r.intrinsic("trunc", d, 1) + "(" + t + " " + bin("fdiv") + ")");
    }
    // division by 0 and -1 was made safe by pm_semantics
    return bin(u.op == Ops::IDIV ? (un ? "udiv" : "sdiv") : (un ? "urem" : "srem"));
  }
  case Ops::MAX: { // float MAX became a NaN-aware WHERE in pm_semantics
    std::string gt = r.emit(std::string(f                        ? "fcmp ogt "
                                        : un || d == DType::Bool ? "icmp ugt "
                                                                 : "icmp sgt ") +
                            t + " " + a[0] + ", " + a[1]);
    return r.emit("select i1 " + gt + ", " + t + " " + a[0] + ", " + t + " " + a[1]);
  }
  case Ops::CMPLT:
    return fs ? r.emit("fcmp olt " + st + " " + a[0] + ", " + a[1])
              : r.emit(std::string(un || sd == DType::Bool ? "icmp ult " : "icmp slt ") + st + " " + a[0] +
                       ", " + a[1]);
  case Ops::CMPNE:
    return fs ? r.emit("fcmp une " + st + " " + a[0] + ", " + a[1])
              : r.emit("icmp ne " + st + " " + a[0] + ", " + a[1]);
  case Ops::AND:
    return bin("and");
  case Ops::OR:
    return bin("or");
  case Ops::XOR:
    return bin("xor");
  case Ops::SHL: // the amount is in [0, bits) after pm_semantics
    return bin("shl");
  case Ops::SHR:
    return bin(is_unsigned(d) ? "lshr" : "ashr");
  case Ops::WHERE:
    return r.emit("select i1 " + a[0] + ", " + t + " " + a[1] + ", " + t + " " + a[2]);
  default:
    break;
  }
  throw std::runtime_error(std::string("the LLVM renderer does not support ") + name(u.op) + " yet");
}

// The address of the element an INDEX points at.
std::string address(LRender& r, const UOp& idx, const std::string& i) {
  DType t = idx.src[0]->dtype;
  return r.emit("getelementptr inbounds " + mem_type(t) + ", ptr " + r.V(idx.src[0]) + ", " +
                ll_type(idx.src[1]->dtype) + " " + i);
}

// An index as (base, constant offset): base + c, or the index itself with offset 0.
std::pair<const UOp*, int64_t> base_offset(const UOp* i) {
  if (i->op == Ops::ADD && i->src[1]->op == Ops::CONST)
    return {i->src[0].get(), static_cast<int64_t>(i->src[1]->const_value())};
  return {i, 0};
}

// Finds the loads (from inputs) and stores (to the output) that UPCAST made of consecutive
// elements in straight-line code: runs of 2 or more offsets from one base, in one stretch between
// loop markers, with no load from the output between a group's stores.
void find_vectors(LRender& r, const std::vector<UOpRef>& linear) {
  struct Key {
    const UOp *buf, *base;
    int segment;
    Ops op;
    bool operator<(const Key& o) const {
      return std::tie(buf, base, segment, op) < std::tie(o.buf, o.base, o.segment, o.op);
    }
  };
  std::map<Key, std::map<int64_t, std::pair<size_t, const UOp*>>> found; // offset -> (position, op)
  std::vector<int> segment(linear.size());
  int seg = 0;
  for (size_t i = 0; i < linear.size(); i++) {
    const UOp* u = linear[i].get();
    if (u->op == Ops::RANGE || u->op == Ops::ENDRANGE) seg++;
    segment[i] = seg;
    if (u->op != Ops::LOAD && u->op != Ops::STORE) continue;
    const UOp& idx = *u->src[0];
    DType t = idx.src[0]->dtype;
    if (idx.src.size() > 2 || t == DType::Bool || t == DType::BFloat16) continue; // gated, or converted
    bool input = idx.src[0]->iarg() > 0;
    if ((u->op == Ops::LOAD) != input) continue; // loads of inputs, stores to the output
    auto [base, off] = base_offset(idx.src[1].get());
    found[{idx.src[0].get(), base, seg, u->op}][off] = {i, u};
  }
  for (auto& [key, offs] : found) {
    for (auto it = offs.begin(); it != offs.end();) {
      std::vector<std::pair<size_t, const UOp*>> run{it->second};
      int64_t first = it->first, next = first + 1;
      for (++it; it != offs.end() && it->first == next; ++it, ++next)
        run.push_back(it->second);
      if (run.size() < 2) continue;
      size_t lo = run[0].first, hi = run[0].first;
      for (auto& [pos, u] : run)
        lo = std::min(lo, pos), hi = std::max(hi, pos);
      if (key.op == Ops::STORE) { // a load from the output between the stores would see them moved
        bool reads = false;
        for (size_t i = lo; i <= hi; i++)
          reads |= linear[i]->op == Ops::LOAD && linear[i]->src[0]->src[0].get() == key.buf;
        if (reads) continue;
      }
      const UOp* leader = linear[key.op == Ops::LOAD ? lo : hi].get();
      auto& members = r.groups[leader];
      for (size_t l = 0; l < run.size(); l++) {
        members.push_back(run[l].second);
        r.lanes[run[l].second] = {leader, static_cast<int64_t>(l), static_cast<int64_t>(run.size()), first};
      }
    }
  }
}

// The address of a group's first element: its base plus the lowest offset.
std::string group_address(LRender& r, const UOp& idx, int64_t first) {
  DType it = idx.src[1]->dtype;
  std::string base = r.V(r.refs.at(base_offset(idx.src[1].get()).first));
  if (first != 0) base = r.emit("add nsw " + ll_type(it) + " " + base + ", " + std::to_string(first));
  return address(r, idx, base);
}

// A group of loads as one vector load; each member's value is its lane.
void render_vector_load(LRender& r, const UOp* leader) {
  const auto& members = r.groups.at(leader);
  const UOp& idx = *leader->src[0];
  const LRender::Lane& l = r.lanes.at(leader);
  std::string et = mem_type(idx.src[0]->dtype), vt = "<" + std::to_string(l.width) + " x " + et + ">";
  std::string v = r.emit("load " + vt + ", ptr " + group_address(r, idx, l.first) + ", align " +
                         std::to_string(itemsize(idx.src[0]->dtype)));
  for (const UOp* m : members)
    r.val[m] = r.emit("extractelement " + vt + " " + v + ", i32 " + std::to_string(r.lanes.at(m).lane));
}

// A group of stores as one vector store of its members' values, at the last member.
void render_vector_store(LRender& r, const UOp* leader) {
  const auto& members = r.groups.at(leader);
  const UOp& idx = *members[0]->src[0];
  const LRender::Lane& l = r.lanes.at(leader);
  std::string et = mem_type(idx.src[0]->dtype), vt = "<" + std::to_string(l.width) + " x " + et + ">";
  std::string v = "poison";
  for (const UOp* m : members)
    v = r.emit("insertelement " + vt + " " + v + ", " + et + " " + r.V(r.refs.at(m->src[1].get())) +
               ", i32 " + std::to_string(r.lanes.at(m).lane));
  r.line("store " + vt + " " + v + ", ptr " + group_address(r, idx, l.first) + ", align " +
         std::to_string(itemsize(idx.src[0]->dtype)));
}

void render_load(LRender& r, const UOpRef& u) {
  if (auto it = r.lanes.find(u.get()); it != r.lanes.end()) {
    if (it->second.leader == u.get()) render_vector_load(r, u.get());
    return;
  }
  const UOp& idx = *u->src[0];
  DType t = idx.src[0]->dtype;
  std::string i = r.V(idx.src[1]), it = ll_type(idx.src[1]->dtype);
  bool gated = idx.src.size() > 2;
  // a gated load reads element 0 where the gate is off (in bounds), and the value is dropped
  if (gated) i = r.emit("select i1 " + r.V(idx.src[2]) + ", " + it + " " + i + ", " + it + " 0");
  std::string v = r.emit("load " + mem_type(t) + ", ptr " + address(r, idx, i));
  if (t == DType::Bool) v = r.emit("icmp ne i8 " + v + ", 0");
  if (t == DType::BFloat16)
    v = r.emit("bitcast i32 " + r.emit("shl i32 " + r.emit("zext i16 " + v + " to i32") + ", 16") +
               " to float");
  if (gated)
    v = r.emit("select i1 " + r.V(idx.src[2]) + ", " + ll_type(u->dtype) + " " + v + ", " +
               ll_type(u->dtype) + " " + literal(u->dtype, 0));
  r.val[u.get()] = v;
}

void render_store(LRender& r, const UOpRef& u) {
  if (auto it = r.lanes.find(u.get()); it != r.lanes.end()) {
    if (it->second.leader == u.get()) render_vector_store(r, u.get());
    return;
  }
  const UOp& idx = *u->src[0];
  DType t = idx.src[0]->dtype;
  std::string v = r.V(u->src[1]);
  std::string skip;
  if (idx.src.size() > 2) { // a padded dim: the store happens where the gate is on
    std::string on = "store" + std::to_string(r.n), after = "after" + std::to_string(r.n++);
    r.line("br i1 " + r.V(idx.src[2]) + ", label %" + on + ", label %" + after);
    r.label(on);
    skip = after;
  }
  if (t == DType::Bool) v = r.emit("zext i1 " + v + " to i8");
  if (t == DType::BFloat16) v = r.emit("trunc i32 " + bf16_bits(r, v) + " to i16");
  r.line("store " + mem_type(t) + " " + v + ", ptr " + address(r, idx, r.V(idx.src[1])));
  if (!skip.empty()) {
    r.line("br label %" + skip);
    r.label(skip);
  }
}

// for (i = lo; i < hi; i++): a head block with the counter's phi and the test, then the body.
void render_range(LRender& r, const UOpRef& u) {
  std::string id = std::to_string(r.n++), t = ll_type(u->dtype), size = r.V(u->src[0]);
  std::string lo = "0", hi = size;
  if (u.get() == r.par) { // this call's share: [size*core/ncores, size*(core+1)/ncores)
    std::string sz = t == "i64" ? size : r.emit("sext " + t + " " + size + " to i64");
    std::string core = r.emit("sext i32 %core to i64"), cores = r.emit("sext i32 %ncores to i64");
    std::string l = r.emit("sdiv i64 " + r.emit("mul i64 " + sz + ", " + core) + ", " + cores);
    std::string h = r.emit("sdiv i64 " + r.emit("mul i64 " + sz + ", " + r.emit("add i64 " + core + ", 1")) +
                           ", " + cores);
    lo = t == "i64" ? l : r.emit("trunc i64 " + l + " to " + t);
    hi = t == "i64" ? h : r.emit("trunc i64 " + h + " to " + t);
  }
  LRender::Loop L{"loop" + id, "body" + id, "exit" + id, "%i" + id, "@@latch" + id + "@@"};
  std::string from = r.block;
  r.line("br label %" + L.head);
  r.label(L.head);
  r.line(L.counter + " = phi " + t + " [ " + lo + ", %" + from + " ], [ %next" + id + ", %" + L.next_token +
         " ]");
  std::string more = r.emit("icmp slt " + t + " " + L.counter + ", " + hi);
  r.line("br i1 " + more + ", label %" + L.body + ", label %" + L.exit);
  r.label(L.body);
  r.val[u.get()] = L.counter;
  r.loops[u.get()] = L;
}

void render_endrange(LRender& r, const UOpRef& u) {
  const UOp* rng = u->src[0].get();
  const LRender::Loop& L = r.loops.at(rng);
  std::string id = L.counter.substr(2), t = ll_type(rng->dtype);
  r.line("%next" + id + " = add nsw " + t + " " + L.counter + ", 1");
  bool vector = rng->varg()[1] == kVector;
  r.vector_loop |= vector;
  r.line("br label %" + L.head +
         (vector                 ? ", !llvm.loop !0"
          : r.tiles.count(rng)   ? ", !llvm.loop !2"
          : r.gathers.count(rng) ? ", !llvm.loop !4"
                                 : ""));
  r.patches[L.next_token] = r.block;
  r.label(L.exit);
}

} // namespace

std::string render_llvm(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel) {
  LRender r;
  r.par = parallel ? parallel_loop(linear) : nullptr;
  r.tiles = tile_loops(linear);
  r.gathers = gather_loops(linear);
  int64_t buffers = 0;
  for (auto& u : linear) {
    r.refs[u.get()] = u;
    for (auto& s : u->src)
      r.refs.emplace(s.get(), s);
    if (u->op == Ops::INDEX)
      for (const UOp* d : toposort(u->src[1].get()))
        r.index_math.insert(d);
  }
  find_vectors(r, linear);
  for (auto& u : linear) {
    switch (u->op) {
    case Ops::CONST:
      break;
    case Ops::DEFINE_GLOBAL:
      buffers = std::max(buffers, u->iarg() + 1);
      r.val[u.get()] = "%data" + std::to_string(u->iarg());
      break;
    case Ops::INDEX:
      break;              // addressed where it is loaded or stored
    case Ops::DEFINE_VAR: // a Variable: the value loaded from its slot
      r.val[u.get()] = r.V(u->src[0]);
      break;
    case Ops::LOAD:
      render_load(r, u);
      break;
    case Ops::STORE:
      render_store(r, u);
      break;
    case Ops::RANGE:
      render_range(r, u);
      break;
    case Ops::ENDRANGE:
      render_endrange(r, u);
      break;
    case Ops::DEFINE_ACC: {
      std::string slot = "%acc" + std::to_string(r.n++), t = ll_type(u->dtype);
      r.entry << "  " << slot << " = alloca " << t << "\n";
      r.line("store " + t + " " + r.V(u->src[0]) + ", ptr " + slot);
      r.val[u.get()] = slot;
      break;
    }
    case Ops::ASSIGN:
      r.line("store " + ll_type(u->dtype) + " " + r.V(u->src[1]) + ", ptr " + r.val.at(u->src[0].get()));
      break;
    default: {
      if (u->op == Ops::SPECIAL || u->op == Ops::DEFINE_LOCAL || u->op == Ops::BARRIER)
        throw std::runtime_error(std::string("the LLVM renderer runs on the CPU and has no ") + name(u->op));
      std::vector<std::string> a;
      for (auto& s : u->src)
        a.push_back(r.V(s));
      r.val[u.get()] = alu(r, *u, a);
    }
    }
  }
  std::string body = r.body.str();
  for (auto& [token, block] : r.patches)
    for (size_t at; (at = body.find(token)) != std::string::npos;)
      body.replace(at, token.size(), block);
  std::ostringstream os;
  for (auto& [decl, _] : r.declared)
    os << decl << "\n";
  // The kernel takes its buffers as noalias parameters (C's restrict), so LLVM vectorizes without
  // checking at run time whether they overlap; the entry point unpacks them from bufs and is
  // what the device calls. Inlined, the parameters' noalias becomes alias metadata.
  std::string params, args;
  for (int64_t i = 0; i < buffers; i++) {
    params += "ptr noalias %data" + std::to_string(i) + ", ";
    args += "ptr %d" + std::to_string(i) + ", ";
  }
  os << "define internal void @" << fn << "_body(" << params
     << "i32 %core, i32 %ncores) alwaysinline nounwind #0 {\n"
     << "entry:\n"
     << r.entry.str() << "  br label %start\nstart:\n"
     << body << "  ret void\n}\n\n";
  os << "define void @" << fn << "(ptr %bufs, i32 %core, i32 %ncores) nounwind #0 {\nentry:\n";
  for (int64_t i = 0; i < buffers; i++)
    os << "  %p" << i << " = getelementptr inbounds ptr, ptr %bufs, i64 " << i << "\n  %d" << i
       << " = load ptr, ptr %p" << i << "\n";
  os << "  call void @" << fn << "_body(" << args << "i32 %core, i32 %ncores)\n  ret void\n}\n";
  // as clang marks C: floating-point exceptions are not observed, so LLVM may compute ahead; and
  // the vector width the C kernels are compiled for (backends/cpu/c_renderer.h)
  int bits = preferred_vector_bits(linear);
  os << "attributes #0 = { \"no-trapping-math\"=\"true\""
     << (bits ? " \"prefer-vector-width\"=\"" + std::to_string(bits) + "\"" : std::string()) << " }\n";
  // what clang's `#pragma clang loop vectorize(enable)` becomes
  if (r.vector_loop) os << "!0 = distinct !{!0, !1}\n!1 = !{!\"llvm.loop.vectorize.enable\", i1 true}\n";
  // and `#pragma clang loop unroll(disable)`
  if (!r.tiles.empty()) os << "!2 = distinct !{!2, !3}\n!3 = !{!\"llvm.loop.unroll.disable\"}\n";
  if (!r.gathers.empty())
    os << "!4 = distinct !{!4, !5}\n!5 = !{!\"llvm.loop.vectorize.enable\", i1 false}\n";
  return os.str();
}

} // namespace mg
