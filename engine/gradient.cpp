#include "engine/gradient.h"

#include <cmath>
#include <functional>
#include <numbers>
#include <unordered_map>
#include <unordered_set>

#include "engine/device.h"
#include "engine/errors.h"
#include "engine/tensor.h"

namespace mg {

namespace {

std::vector<CustomGradFn>& custom_grads() {
  static std::vector<CustomGradFn> fns;
  return fns;
}

using Grads = std::vector<std::optional<Tensor>>; // one entry per source of the node
// A rule gets the gradient flowing into a node and the node; it returns the gradient for
// each of the node's sources (nullopt: that source gets none).
using Rule = std::function<Grads(const Tensor& g, const UOpRef& ret)>;

Tensor src(const UOpRef& u, size_t i) { return Tensor(u->src[i]); }
Tensor like(const Tensor& t, double v) { return Tensor::full(t.shape(), v, t.dtype()); }

// The gradient rules, one per differentiable primitive. Elementwise ops see operands of the
// same shape (broadcasting is an EXPAND in the graph), so only EXPAND has to sum.
const std::unordered_map<Ops, Rule>& rules() {
  static const std::unordered_map<Ops, Rule> r = {
      {Ops::ADD,
       [](const Tensor& g, const UOpRef&) {
         return Grads{g, g};
       }},
      {Ops::SUB,
       [](const Tensor& g, const UOpRef&) {
         return Grads{g, g.neg()};
       }},
      {Ops::NEG, [](const Tensor& g, const UOpRef&) { return Grads{g.neg()}; }},
      {Ops::MUL,
       [](const Tensor& g, const UOpRef& u) {
         return Grads{g.mul(src(u, 1)), g.mul(src(u, 0))};
       }},
      // d(1/x) = -1/x^2 = -ret*ret
      {Ops::RECIP,
       [](const Tensor& g, const UOpRef& u) {
         Tensor r(u);
         return Grads{g.neg().mul(r).mul(r)};
       }},
      {Ops::SQRT,
       [](const Tensor& g, const UOpRef& u) { return Grads{g.mul(Tensor(u).mul(like(g, 2)).reciprocal())}; }},
      {Ops::EXP2, [](const Tensor& g,
                     const UOpRef& u) { return Grads{g.mul(Tensor(u)).mul(like(g, std::numbers::ln2))}; }},
      {Ops::LOG2,
       [](const Tensor& g, const UOpRef& u) {
         return Grads{g.mul(src(u, 0).mul(like(g, std::numbers::ln2)).reciprocal())};
       }},
      // d sin(x) = cos(x) = sin(pi/2 - x)
      {Ops::SIN,
       [](const Tensor& g, const UOpRef& u) {
         return Grads{g.mul(like(g, std::numbers::pi / 2).sub(src(u, 0)).sin())};
       }},
      // d a^b: b*a^(b-1) for a, a^b*log(a) for b (0 where a^b is 0, as PyTorch does)
      {Ops::POW,
       [](const Tensor& g, const UOpRef& u) {
         Tensor a = src(u, 0), b = src(u, 1), r(u);
         Tensor da = g.mul(b).mul(a.pow(b.sub(like(b, 1))));
         Tensor db = r.eq(like(r, 0)).where(like(g, 0), g.mul(r).mul(a.log()));
         return Grads{da, db};
       }},
      // max(a, b): the larger one gets it all, a tie splits it
      {Ops::MAX,
       [](const Tensor& g, const UOpRef& u) {
         Tensor a = src(u, 0), b = src(u, 1), half = g.mul(like(g, 0.5)), zero = like(g, 0);
         return Grads{a.gt(b).where(g, a.eq(b).where(half, zero)),
                      b.gt(a).where(g, a.eq(b).where(half, zero))};
       }},
      {Ops::WHERE,
       [](const Tensor& g, const UOpRef& u) {
         Tensor c = src(u, 0), zero = like(g, 0);
         return Grads{std::nullopt, c.where(g, zero), c.where(zero, g)};
       }},
      {Ops::CAST, [](const Tensor& g, const UOpRef& u) { return Grads{g.cast(u->src[0]->dtype)}; }},
      {Ops::CONTIGUOUS, [](const Tensor& g, const UOpRef&) { return Grads{g}; }},
      // a copy's gradient is copied back to where its source lives
      // (a COPY joins host-memory devices only, so the copy back is one too)
      {Ops::COPY,
       [](const Tensor& g, const UOpRef& u) { return Grads{g.copy_to(src(u, 0).device()).value()}; }},
      // a realized value: its buffer gets none, the graph it was computed from gets it all
      {Ops::REALIZED,
       [](const Tensor& g, const UOpRef&) {
         return Grads{std::nullopt, g};
       }},
      // src[0] gets none: its inputs get theirs from the function, or through it where the
      // function leaves them to the automatic rules
      {Ops::CUSTOM_GRAD,
       [](const Tensor& g, const UOpRef& u) {
         std::vector<Tensor> inputs;
         for (size_t i = 1; i < u->src.size(); i++)
           inputs.push_back(src(u, i));
         auto given = custom_grads().at(static_cast<size_t>(u->iarg()))(g, inputs);
         Grads out{std::nullopt};
         bool rest = false; // some input left to the automatic rules
         for (size_t i = 0; i < inputs.size(); i++) {
           out.push_back(i < given.size() ? given[i] : std::nullopt);
           rest |= !out.back();
         }
         if (rest) {
           // every input is a target, so the walk stops at each: a path from one input through
           // another would otherwise be counted here and again through the other's gradient
           std::vector<UOpRef> all;
           for (auto& t : inputs)
             all.push_back(t.uop);
           auto auto_grads = gradient(u->src[0], g.uop, all);
           for (size_t i = 1; i < out.size(); i++)
             if (!out[i] && auto_grads[i - 1]) out[i] = Tensor(*auto_grads[i - 1]);
         }
         for (size_t i = 1; i < out.size(); i++)
           if (out[i] && out[i]->shape() != inputs[i - 1].shape())
             user_error("custom gradient: input " + std::to_string(i) + " has shape " +
                        shape_str(inputs[i - 1].shape()) + " but its gradient " + shape_str(out[i]->shape()));
         return out;
       }},
      // reductions keep their dims in the graph, so the gradient broadcasts straight back
      {Ops::REDUCE_AXIS,
       [](const Tensor& g, const UOpRef& u) {
         Tensor x = src(u, 0);
         const ReduceArg& ra = u->rarg();
         if (ra.op == Ops::ADD) return Grads{g.expand(x.shape())};
         if (ra.op == Ops::MAX) { // split between the elements that reached the max
           Tensor hit = x.eq(Tensor(u).expand(x.shape())).cast(g.dtype());
           Tensor count =
               Tensor(UOp::make(Ops::REDUCE_AXIS, g.dtype(), {hit.uop}, ReduceArg{Ops::ADD, ra.axes}));
           return Grads{hit.mul(g.mul(count.reciprocal()).expand(x.shape()))};
         }
         internal_error(std::string("no gradient rule for a ") + name(ra.op) + " reduction");
       }},
      // no gradient flows through these: the result is piecewise constant, or not a number
      {Ops::TRUNC, nullptr},
      {Ops::CMPLT, nullptr},
      {Ops::CMPNE, nullptr},
      {Ops::IDIV, nullptr},
      {Ops::MOD, nullptr},
      {Ops::AND, nullptr},
      {Ops::OR, nullptr},
      {Ops::XOR, nullptr},
      {Ops::SHL, nullptr},
      {Ops::SHR, nullptr},
      {Ops::DETACH, nullptr},
      {Ops::BITCAST, nullptr},
      // movement ops: the inverse movement
      {Ops::RESHAPE, [](const Tensor& g, const UOpRef& u) { return Grads{g.reshape(u->src[0]->shape)}; }},
      {Ops::PERMUTE,
       [](const Tensor& g, const UOpRef& u) {
         const auto& order = std::get<std::vector<int64_t>>(u->arg);
         std::vector<int64_t> inv(order.size());
         for (size_t i = 0; i < order.size(); i++)
           inv[order[i]] = static_cast<int64_t>(i);
         return Grads{g.permute(inv)};
       }},
      {Ops::EXPAND,
       [](const Tensor& g, const UOpRef& u) {
         const Shape& from = u->src[0]->shape;
         std::vector<int64_t> axes;
         for (size_t i = 0; i < from.size(); i++)
           if (from[i] != u->shape[i]) axes.push_back(static_cast<int64_t>(i));
         // sum in a wide enough type (a float16 gradient summed over a batch overflows)
         Tensor s = g.cast(sum_acc_dtype(g.dtype())).sum(axes, true).cast(g.dtype());
         return Grads{s};
       }},
      {Ops::PAD,
       [](const Tensor& g, const UOpRef& u) {
         auto p = unflatten_pairs(u->sarg());
         for (size_t i = 0; i < p.size(); i++)
           p[i] = {p[i].first, u->shape[i] - p[i].second};
         return Grads{g.shrink(p)};
       }},
      {Ops::SHRINK,
       [](const Tensor& g, const UOpRef& u) {
         auto p = int_pairs(unflatten_pairs(u->sarg()));
         for (size_t i = 0; i < p.size(); i++)
           p[i] = {p[i].first, u->src[0]->shape[i] - p[i].second};
         return Grads{g.pad(p)};
       }},
      {Ops::FLIP,
       [](const Tensor& g, const UOpRef& u) {
         const auto& f = std::get<std::vector<int64_t>>(u->arg);
         std::vector<int64_t> axes;
         for (size_t i = 0; i < f.size(); i++)
           if (f[i]) axes.push_back(static_cast<int64_t>(i));
         return Grads{g.flip(axes)};
       }},
  };
  return r;
}

// A gradient does not flow through an op whose rule is nullptr (comparisons, integer math, bit
// ops, DETACH) nor one with no rule at all.
bool blocks_gradient(Ops op) {
  auto it = rules().find(op);
  return it != rules().end() && !it->second;
}

} // namespace

bool& grad_enabled() {
  static bool on = true;
  return on;
}

bool needs_grad(const UOpRef& root) {
  std::unordered_set<const UOp*> seen{root.get()};
  std::vector<const UOp*> todo{root.get()};
  while (!todo.empty()) {
    const UOp* u = todo.back();
    todo.pop_back();
    if (u->op == Ops::BUFFER && u->buffer()->requires_grad() > 0) return true;
    if (blocks_gradient(u->op)) continue;
    for (auto& s : u->src)
      if (seen.insert(s.get()).second) todo.push_back(s.get());
  }
  return false;
}

UOpRef keep_for_grad(const UOpRef& graph, const UOpRef& view) {
  if (graph == view) return view;
  if (graph->op == Ops::REALIZED)
    return graph->src[0] == view ? graph : UOp::make(Ops::REALIZED, view->dtype, {view, graph->src[1]});
  // an assign is an action on its buffer: the buffer is the tensor from now on
  if (graph->op == Ops::CONTIGUOUS && std::holds_alternative<std::shared_ptr<Buffer>>(graph->arg))
    return view;
  if (!grad_enabled() || Buffer::buffers_requiring_grad() == 0 || !needs_grad(graph)) return view;
  return UOp::make(Ops::REALIZED, view->dtype, {view, graph});
}

int register_custom_grad(CustomGradFn fn) {
  custom_grads().push_back(std::move(fn));
  return static_cast<int>(custom_grads().size()) - 1;
}

UOpRef custom_grad(const UOpRef& value, const std::vector<UOpRef>& inputs, int id) {
  if (id < 0 || static_cast<size_t>(id) >= custom_grads().size())
    user_error("custom gradient: no function with id " + std::to_string(id));
  std::vector<UOpRef> src{value};
  src.insert(src.end(), inputs.begin(), inputs.end());
  return UOp::make(Ops::CUSTOM_GRAD, value->dtype, src, static_cast<int64_t>(id));
}

std::vector<std::optional<UOpRef>> gradient(const UOpRef& root, const UOpRef& root_grad,
                                            const std::vector<UOpRef>& targets) {
  if (root_grad->shape != root->shape)
    user_error("gradient: the seed has shape " + shape_str(root_grad->shape) + " but the output has " +
               shape_str(root->shape));
  std::unordered_set<const UOp*> is_target;
  for (auto& t : targets)
    is_target.insert(t.get());
  // Post-order walk (iterative: graphs can be deep), keeping the nodes on a path to a target.
  std::vector<UOpRef> order;
  std::unordered_map<const UOp*, bool> reaches; // node -> some target is at or below it
  std::vector<std::pair<UOpRef, size_t>> stack{{root, 0}};
  reaches.reserve(1024);
  while (!stack.empty()) {
    auto& [u, i] = stack.back();
    if (i == 0 && reaches.count(u.get())) { // already finished through another path
      stack.pop_back();
      continue;
    }
    bool stop = is_target.count(u.get()) || blocks_gradient(u->op);
    if (!stop && i < u->src.size()) {
      UOpRef s = u->src[i++];
      if (!reaches.count(s.get())) stack.push_back({s, 0});
      continue;
    }
    bool r = is_target.count(u.get()) > 0;
    if (!stop)
      for (auto& s : u->src)
        r |= reaches[s.get()];
    reaches[u.get()] = r;
    if (r) order.push_back(u);
    stack.pop_back();
  }
  std::unordered_map<const UOp*, Tensor> grads;
  grads.emplace(root.get(), Tensor(root_grad));
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const UOpRef& u = *it;
    auto g = grads.find(u.get());
    if (g == grads.end() || is_target.count(u.get())) continue;
    auto rule = rules().find(u->op);
    if (rule == rules().end())
      user_error(std::string("no gradient through ") + name(u->op) + " (shape " + shape_str(u->shape) + ")");
    if (!rule->second) continue; // blocks: nothing flows on
    Grads gs = rule->second(g->second, u);
    for (size_t i = 0; i < u->src.size() && i < gs.size(); i++) {
      const UOpRef& s = u->src[i];
      if (!gs[i] || !reaches[s.get()]) continue;
      if (auto e = grads.find(s.get()); e != grads.end())
        e->second = e->second.add(*gs[i]);
      else
        grads.emplace(s.get(), *gs[i]);
    }
  }
  std::vector<std::optional<UOpRef>> out;
  for (auto& t : targets) {
    auto g = grads.find(t.get());
    out.push_back(g == grads.end() ? std::nullopt : std::optional<UOpRef>(g->second.uop));
  }
  return out;
}

} // namespace mg
