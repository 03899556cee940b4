#include "engine/schedule_cache.h"

#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "engine/counters.h"
#include "engine/device.h"
#include "engine/machine.h"
#include "engine/settings.h"

namespace mg {

namespace {

uint64_t hash_str(std::string_view s) { return std::hash<std::string_view>{}(s); }

// A buffer view as data: movement ops (bottom up) over buffer number `slot` (the graph's buffers
// first, then the schedule's fresh ones), rebuilt over another graph's buffers on a hit.
struct ViewTemplate {
  size_t slot = 0;
  std::vector<std::tuple<Ops, DType, Arg>> chain;
};

struct FreshBuffer {
  std::string device;
  DType dtype;
  size_t size;
};

struct CachedItem {
  UOpRef ast;
  std::vector<size_t> slots;
  const char* reason;
  std::vector<std::pair<UOpRef, int64_t>> var_vals;
};

struct Entry {
  std::vector<uint64_t> sig;
  std::vector<FreshBuffer> fresh;
  std::vector<CachedItem> items;
  std::vector<ViewTemplate> views; // one per output
  struct Pin {
    size_t at; // key.nodes[at], or outs[at]
    ViewTemplate view;
    bool forever; // an assign, its target for good (UOp::pin_cached); else for this epoch
  };
  std::vector<Pin> pins, out_pins;
  bool new_epoch = false; // the schedule writes a buffer in place: values cached before are stale
};

// Entries by key hash. A loop makes one graph over and over; a program that makes ever new ones
// (a sequence grown a token at a time) would fill it, so it starts over past this many entries or
// this many words of keys (an MNIST training step's is about 8k, 1,400 nodes).
constexpr size_t kMaxEntries = 256, kMaxKeyWords = size_t{4} << 20;
std::unordered_map<size_t, std::vector<Entry>>& entries() {
  static auto* m = new std::unordered_map<size_t, std::vector<Entry>>(); // leaked: ASTs outlive statics
  return *m;
}
size_t entry_count = 0, key_words = 0;

// The template of a buffer view, or nullopt where it is not movement ops over a known buffer.
std::optional<ViewTemplate> view_template(const UOpRef& v,
                                          const std::unordered_map<const Buffer*, size_t>& slot_of) {
  ViewTemplate t;
  const UOp* u = v.get();
  std::vector<const UOp*> ups;
  while (is_movement(u->op)) {
    ups.push_back(u);
    u = u->src[0].get();
  }
  if (u->op != Ops::BUFFER) return std::nullopt;
  auto it = slot_of.find(u->buffer().get());
  if (it == slot_of.end()) return std::nullopt;
  t.slot = it->second;
  for (auto i = ups.rbegin(); i != ups.rend(); ++i)
    t.chain.emplace_back((*i)->op, (*i)->dtype, (*i)->arg);
  return t;
}

UOpRef build(const ViewTemplate& t, const std::vector<std::shared_ptr<Buffer>>& slots) {
  const std::shared_ptr<Buffer>& b = slots[t.slot];
  UOpRef u = UOp::make(Ops::BUFFER, b->dtype, {}, b);
  for (auto& [op, dt, arg] : t.chain)
    u = UOp::make(op, dt, {u}, arg);
  return u;
}

} // namespace

GraphKey graph_key(const std::vector<UOpRef>& resolved, const char* why) {
  GraphKey k;
  k.roots = resolved;
  std::unordered_map<const UOp*, uint64_t> index;
  std::unordered_map<const Buffer*, uint64_t> buf_index;
  auto& sig = k.sig;
  // what else decides the schedule: the reason given, the default device, the machine (its
  // vector width and caches decide packing) and NOOPT
  sig.push_back(hash_str(why));
  sig.push_back(hash_str(default_device()));
  sig.push_back(hash_str(machine().describe()));
  sig.push_back(settings().noopt);
  // An assign's unique tag (the CONST that keeps two equal assigns apart) is new every step: it
  // counts by its place alone.
  std::unordered_set<const UOp*> tags;
  auto buffer = [&](const std::shared_ptr<Buffer>& b) {
    auto [it, fresh] = buf_index.try_emplace(b.get(), k.bufs.size());
    if (fresh) k.bufs.push_back(b);
    sig.push_back(it->second);
    sig.push_back(b->size);
    sig.push_back(static_cast<uint64_t>(b->dtype));
    sig.push_back(hash_str(b->device));
    sig.push_back(b->allocated()); // a first write to it starts no new epoch (schedule.cpp)
  };
  for (const UOpRef& root : resolved) {
    std::vector<std::pair<const UOp*, size_t>> stack;
    if (!index.count(root.get())) stack.push_back({root.get(), 0});
    while (!stack.empty()) {
      auto& [u, i] = stack.back();
      if (i < u->src.size()) {
        const UOp* s = u->src[i++].get();
        if (u->op == Ops::CONTIGUOUS && i == 2 && s->op == Ops::CONST) tags.insert(s);
        if (!index.count(s)) stack.push_back({s, 0});
        continue;
      }
      // copies between devices and bound Variables (a new key per value) are scheduled afresh
      if (u->op == Ops::COPY || u->op == Ops::BIND) return GraphKey{};
      if (index.count(u)) { // reached twice on the stack before it was done
        stack.pop_back();
        continue;
      }
      index.emplace(u, k.nodes.size());
      k.nodes.push_back(u);
      sig.push_back((static_cast<uint64_t>(u->op) << 32) | static_cast<uint64_t>(u->dtype));
      sig.push_back(u->src.size());
      for (auto& s : u->src)
        sig.push_back(index.at(s.get()));
      if (u->op == Ops::BUFFER || std::holds_alternative<std::shared_ptr<Buffer>>(u->arg)) {
        buffer(u->buffer()); // a buffer, or an assign's target
      } else if (tags.count(u)) {
        sig.push_back(~uint64_t{0});
      } else {
        // by value: int64 and double args hash to their bits; strings, shapes and views to a
        // 64-bit hash
        sig.push_back(u->arg.index());
        sig.push_back(hash_arg(u->arg));
      }
      stack.pop_back();
    }
    sig.push_back(index.at(root.get()));
  }
  uint64_t h = sig.size();
  for (uint64_t v : sig)
    h = hash_mix(h, v);
  k.hash = h;
  k.cacheable = true;
  return k;
}

bool replay_schedule(const GraphKey& key, const std::vector<UOpRef>& outs, std::vector<UOpRef>* views,
                     std::vector<ScheduleItem>& items) {
  auto it = entries().find(key.hash);
  const Entry* e = nullptr;
  if (it != entries().end())
    for (const Entry& x : it->second)
      if (x.sig == key.sig) e = &x;
  if (!e) return false;
  global_counters().schedules_cached++;
  std::vector<std::shared_ptr<Buffer>> slots = key.bufs;
  for (const FreshBuffer& f : e->fresh)
    slots.push_back(std::make_shared<Buffer>(f.device, f.dtype, f.size));
  items.clear();
  for (const CachedItem& c : e->items) {
    ScheduleItem si{c.ast, {}, c.reason, c.var_vals, nullptr};
    for (size_t s : c.slots)
      si.bufs.push_back(slots[s]);
    items.push_back(std::move(si));
  }
  if (views) {
    views->clear();
    for (const ViewTemplate& t : e->views)
      views->push_back(build(t, slots));
  }
  if (e->new_epoch) UOp::mutation_epoch()++;
  auto pin = [&](const UOp* u, const Entry::Pin& p) {
    if (p.forever)
      u->pin_cached(build(p.view, slots));
    else
      u->set_cached(build(p.view, slots));
  };
  for (const Entry::Pin& p : e->pins)
    pin(key.nodes[p.at], p);
  for (const Entry::Pin& p : e->out_pins)
    pin(outs[p.at].get(), p);
  return true;
}

void remember_schedule(const GraphKey& key, const std::vector<UOpRef>& outs, const std::vector<UOpRef>* views,
                       const std::vector<ScheduleItem>& items, bool new_epoch) {
  if (!views || views->size() != outs.size()) return;
  Entry e;
  e.sig = key.sig;
  e.new_epoch = new_epoch;
  std::unordered_map<const Buffer*, size_t> slot_of;
  for (size_t i = 0; i < key.bufs.size(); i++)
    slot_of.emplace(key.bufs[i].get(), i);
  auto slot = [&](const std::shared_ptr<Buffer>& b) {
    auto [it, fresh] = slot_of.try_emplace(b.get(), key.bufs.size() + e.fresh.size());
    if (fresh) e.fresh.push_back({b->device, b->dtype, b->size});
    return it->second;
  };
  for (const ScheduleItem& item : items) {
    if (item.host || !item.ast) return;
    CachedItem c{item.ast, {}, item.reason, item.var_vals};
    for (auto& b : item.bufs)
      c.slots.push_back(slot(b));
    e.items.push_back(std::move(c));
  }
  for (const UOpRef& v : *views) {
    auto t = view_template(v, slot_of);
    if (!t) return;
    e.views.push_back(std::move(*t));
  }
  // the values the schedule left cached (those it cached before a new epoch read as none)
  auto pinned = [&](const UOp* u, size_t at, std::vector<Entry::Pin>& to) {
    UOpRef c = u->op == Ops::REALIZED ? nullptr : u->cached();
    if (!c) return true;
    auto t = view_template(c, slot_of);
    if (t) to.push_back({at, std::move(*t), u->realized_epoch == 0});
    return t.has_value();
  };
  for (size_t i = 0; i < key.nodes.size(); i++)
    if (key.nodes[i]->op != Ops::BUFFER && !pinned(key.nodes[i], i, e.pins)) return;
  for (size_t i = 0; i < outs.size(); i++)
    if (!pinned(outs[i].get(), i, e.out_pins)) return;
  if (entry_count >= kMaxEntries || key_words + e.sig.size() > kMaxKeyWords) {
    entries().clear();
    entry_count = key_words = 0;
  }
  entry_count++;
  key_words += e.sig.size();
  entries()[key.hash].push_back(std::move(e));
}

} // namespace mg
