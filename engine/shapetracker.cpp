#include "engine/shapetracker.h"
#include "engine/errors.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <stdexcept>

namespace mg {

std::vector<int64_t> strides_for_shape(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 0);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = shape[i] == 1 ? 0 : acc;
    acc *= shape[i].vmax();
  }
  return st;
}

UOpRef view_uop(const ShapeTracker& st) {
  return UOp::make(Ops::VIEW, DType::Void, {}, std::make_shared<const ShapeTracker>(st));
}

std::vector<std::pair<sint, sint>> unflatten_pairs(const Shape& v) {
  std::vector<std::pair<sint, sint>> r;
  for (size_t i = 0; i + 1 < v.size(); i += 2)
    r.emplace_back(v[i], v[i + 1]);
  return r;
}
std::vector<std::pair<int64_t, int64_t>> int_pairs(const std::vector<std::pair<sint, sint>>& p) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (auto& [a, b] : p)
    r.emplace_back(a.value(), b.value());
  return r;
}

namespace {
void no_symbolic_mask(const Shape& s, const char* what) {
  if (is_symbolic(s))
    throw std::runtime_error(std::string(what) + " of a view with a symbolic size " + shape_str(s) +
                             " needs a mask, which moongrad keeps in numbers: not supported yet");
}
} // namespace

View View::create(Shape shape, std::optional<std::vector<int64_t>> strides, sint offset,
                  std::optional<Mask> mask) {
  View v;
  v.shape = std::move(shape);
  v.strides = strides ? *strides : strides_for_shape(v.shape);
  v.offset = offset;
  for (size_t i = 0; i < v.shape.size(); i++)
    if (v.shape[i] == 1) v.strides[i] = 0;
  if (mask) {
    no_symbolic_mask(v.shape, "masking");
    bool empty = false, full = true;
    for (size_t i = 0; i < v.shape.size(); i++) {
      auto [lo, hi] = (*mask)[i];
      if (lo >= hi) empty = true;
      if (lo != 0 || hi != v.shape[i]) full = false;
    }
    if (empty) {
      // nothing is valid: normalise so equal empty views compare equal
      mask = Mask(v.shape.size(), {0, 0});
      v.strides.assign(v.shape.size(), 0);
      v.offset = 0;
    } else if (full) {
      mask.reset();
    } else {
      // a dim whose mask admits one index needs no stride: fold it into the offset
      for (size_t i = 0; i < v.shape.size(); i++)
        if ((*mask)[i].second - (*mask)[i].first == 1 && v.strides[i] != 0) {
          v.offset = v.offset + (*mask)[i].first * v.strides[i];
          v.strides[i] = 0;
        }
    }
  }
  v.mask = std::move(mask);
  v.contiguous = v.offset == 0 && !v.mask && v.strides == strides_for_shape(v.shape);
  return v;
}

int64_t View::size() const { return max_numel(shape); }

std::optional<View> View::reshape(const Shape& ns) const {
  if (ns == shape) return *this;
  bool sym = is_symbolic(shape) || is_symbolic(ns); // laid out at the largest size: only dims that map 1:1
  if ((contiguous && !sym) || std::find(ns.begin(), ns.end(), 0) != ns.end())
    return create(ns); // empty: nothing to map
  // a whole buffer seen in a symbolic shape: laid out at each dim's largest value
  if (contiguous && !is_symbolic(shape) && prod(shape) == max_numel(ns)) return create(ns);
  auto strip = [](const Shape& s) {
    Shape r;
    for (auto d : s)
      if (d != 1) r.push_back(d);
    return r;
  };
  if (mask) {
    if (strip(ns) != strip(shape)) return reshape_masked(ns);
    // Only size-1 dims inserted or removed: carry the per-dim mask and strides across.
    if ((*mask)[0].first >= (*mask)[0].second) {
      // nothing is valid; a 0-d shape has no dim to carry that mask, so it needs its own view
      if (ns.empty()) return std::nullopt;
      return create(ns, std::nullopt, 0, Mask(ns.size(), {0, 0}));
    }
    std::vector<int64_t> st;
    Mask m;
    size_t j = 0;
    for (auto d : ns) {
      if (d == 1) {
        st.push_back(0);
        m.push_back({0, 1});
        continue;
      }
      while (shape[j] == 1)
        j++;
      st.push_back(strides[j]);
      m.push_back((*mask)[j]);
      j++;
    }
    return create(ns, st, offset, m);
  }
  // Merge old dims into segments that are contiguous among themselves, then split them anew. A
  // symbolic dim is a segment of its own, kept whole.
  std::vector<std::pair<sint, int64_t>> segs; // (size, stride of last dim)
  for (size_t i = 0; i < shape.size(); i++) {
    if (shape[i] == 1) continue;
    if (!segs.empty() && segs.back().first.is_const() && shape[i].is_const() &&
        segs.back().second == strides[i] * shape[i].value()) {
      segs.back().first = segs.back().first * shape[i];
      segs.back().second = strides[i];
    } else
      segs.push_back({shape[i], strides[i]});
  }
  std::vector<int64_t> st(ns.size(), 0);
  size_t k = 0;
  sint rem = segs.empty() ? sint(1) : segs[0].first;
  for (size_t i = 0; i < ns.size(); i++) {
    if (ns[i] == 1) continue;
    if (k >= segs.size()) return std::nullopt;
    if (!rem.is_const() || !ns[i].is_const()) {
      if (!(rem == ns[i])) return std::nullopt;
      rem = 1;
    } else {
      if (rem.value() % ns[i].value() != 0) return std::nullopt;
      rem = rem.value() / ns[i].value();
    }
    st[i] = segs[k].second * rem.value();
    if (rem == 1 && ++k < segs.size()) rem = segs[k].first;
  }
  return create(ns, st, offset);
}

// A masked view reshaped by groups: each run of old dims whose sizes multiply to a run of new dims
// is either one dim to one (its mask and stride carried) or dims the mask leaves whole, contiguous
// among themselves, split and merged as an unmasked view's (a stacked tensor's batch of tiles seen
// as blocks of images, its stacked dims masked as before). Else no single view holds it.
std::optional<View> View::reshape_masked(const Shape& ns) const {
  for (auto& d : shape)
    if (!d.is_const()) return std::nullopt;
  for (auto& d : ns)
    if (!d.is_const()) return std::nullopt;
  if ((*mask)[0].first >= (*mask)[0].second) return std::nullopt; // empty: the caller's rules
  std::vector<int64_t> st(ns.size(), 0);
  Mask m(ns.size(), {0, 1});
  size_t i = 0, j = 0;
  while (i < shape.size() || j < ns.size()) {
    if (j < ns.size() && ns[j] == 1) {
      j++;
      continue;
    }
    if (i < shape.size() && shape[i] == 1) {
      i++;
      continue;
    }
    if (i >= shape.size() || j >= ns.size()) return std::nullopt;
    int64_t po = shape[i].value(), pn = ns[j].value();
    size_t i2 = i + 1, j2 = j + 1;
    while (po != pn) {
      if (po < pn) {
        if (i2 >= shape.size()) return std::nullopt;
        po *= shape[i2++].value();
      } else {
        if (j2 >= ns.size()) return std::nullopt;
        pn *= ns[j2++].value();
      }
    }
    std::vector<size_t> olds; // the group's old dims larger than 1
    for (size_t k = i; k < i2; k++)
      if (shape[k] != 1) olds.push_back(k);
    std::vector<size_t> news;
    for (size_t k = j; k < j2; k++)
      if (ns[k] != 1) news.push_back(k);
    if (olds.size() == 1 && news.size() == 1) {
      st[news[0]] = strides[olds[0]];
      m[news[0]] = (*mask)[olds[0]];
    } else {
      for (size_t k : olds)
        if ((*mask)[k].first != 0 || (*mask)[k].second != shape[k].value()) return std::nullopt;
      for (size_t k = 0; k + 1 < olds.size(); k++)
        if (strides[olds[k]] != strides[olds[k + 1]] * shape[olds[k + 1]].value()) return std::nullopt;
      int64_t stride = strides[olds.back()];
      for (auto k = news.rbegin(); k != news.rend(); ++k) {
        st[*k] = stride;
        m[*k] = {0, ns[*k].value()};
        stride *= ns[*k].value();
      }
    }
    i = i2, j = j2;
  }
  return create(ns, st, offset, m);
}

View View::permute(const std::vector<int64_t>& order) const {
  Shape s;
  std::vector<int64_t> st;
  Mask m;
  for (auto i : order) {
    s.push_back(shape[i]);
    st.push_back(strides[i]);
    if (mask) m.push_back((*mask)[i]);
  }
  return create(s, st, offset, mask ? std::optional<Mask>(m) : std::nullopt);
}

View View::expand(const Shape& ns) const {
  std::optional<Mask> m = mask;
  for (size_t i = 0; i < ns.size(); i++)
    if (m && shape[i] != ns[i])
      (*m)[i] = (*m)[i].first < (*m)[i].second ? std::pair<int64_t, int64_t>{0, ns[i]}
                                               : std::pair<int64_t, int64_t>{0, 0};
  return create(ns, strides, offset, m);
}

View View::pad(const std::vector<std::pair<int64_t, int64_t>>& arg) const {
  Shape ns = shape;
  no_symbolic_mask(shape, "padding");
  Mask m(shape.size());
  sint off = offset;
  for (size_t i = 0; i < shape.size(); i++) {
    auto [b, a] = arg[i];
    ns[i] = shape[i] + b + a;
    auto [lo, hi] = mask ? (*mask)[i] : std::pair<int64_t, int64_t>{0, shape[i]};
    m[i] = {lo + b, hi + b};
    off = off - b * strides[i];
  }
  return create(ns, strides, off, m);
}

View View::shrink(const std::vector<std::pair<sint, sint>>& arg) const {
  Shape ns = shape;
  std::optional<Mask> m;
  if (mask) m = Mask(shape.size());
  sint off = offset;
  for (size_t i = 0; i < shape.size(); i++) {
    auto& [b, e] = arg[i];
    ns[i] = e - b;
    off = off + b * strides[i];
    if (mask) {
      int64_t lo = std::max((*mask)[i].first, b.value()) - b.value(),
              hi = std::min((*mask)[i].second, e.value()) - b.value();
      (*m)[i] = {lo, std::max(lo, hi)};
    }
  }
  return create(ns, strides, off, m);
}

View View::flip(const std::vector<bool>& axes) const {
  std::vector<int64_t> st = strides;
  std::optional<Mask> m = mask;
  sint off = offset;
  for (size_t i = 0; i < shape.size(); i++) {
    if (!axes[i]) continue;
    off = off + (shape[i] - 1) * st[i];
    st[i] = -st[i];
    if (m) (*m)[i] = {shape[i] - (*m)[i].second, shape[i] - (*m)[i].first};
  }
  return create(shape, st, off, m);
}

std::string View::to_string() const {
  std::ostringstream os;
  os << "View(shape=" << shape_str(shape) << ", strides=" << shape_str(strides) << ", offset=" << offset.str()
     << ", mask=";
  if (mask) {
    os << "(";
    for (size_t i = 0; i < mask->size(); i++)
      os << (i ? ", " : "") << "(" << (*mask)[i].first << ", " << (*mask)[i].second << ")";
    os << (mask->size() == 1 ? ",)" : ")");
  } else
    os << "None";
  os << ", contiguous=" << (contiguous ? "True" : "False") << ")";
  return os.str();
}

int64_t ShapeTracker::size() const { return views.back().size(); }

size_t ShapeTracker::hash() const {
  size_t h = 0xabc;
  auto mixh = [&](size_t x) { h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  auto mix = [&](int64_t v) { mixh(std::hash<int64_t>{}(v)); };
  for (auto& v : views) {
    for (auto& s : v.shape)
      mixh(s.hash());
    for (auto s : v.strides)
      mix(s);
    mixh(v.offset.hash());
    if (v.mask)
      for (auto [a, b] : *v.mask)
        mix(a), mix(b);
    mix(-7);
  }
  return h;
}

ShapeTracker ShapeTracker::reshape(const Shape& s) const {
  ShapeTracker r = *this;
  if (auto v = views.back().reshape(s))
    r.views.back() = *v;
  else if (is_symbolic(s) || is_symbolic(shape()))
    throw std::runtime_error("cannot reshape " + shape_str(shape()) + " to " + shape_str(s) +
                             ": a symbolic dim can be moved, expanded or sliced, not merged or split");
  else
    r.views.push_back(View::create(s));
  return r.simplify();
}
ShapeTracker ShapeTracker::permute(const std::vector<int64_t>& o) const {
  ShapeTracker r = *this;
  r.views.back() = r.views.back().permute(o);
  return r.simplify();
}
ShapeTracker ShapeTracker::expand(const Shape& s) const {
  ShapeTracker r = *this;
  r.views.back() = r.views.back().expand(s);
  return r;
}
ShapeTracker ShapeTracker::pad(const std::vector<std::pair<int64_t, int64_t>>& a) const {
  ShapeTracker r = *this;
  r.views.back() = r.views.back().pad(a);
  return r;
}
ShapeTracker ShapeTracker::shrink(const std::vector<std::pair<sint, sint>>& a) const {
  ShapeTracker r = *this;
  r.views.back() = r.views.back().shrink(a);
  return r.simplify();
}
ShapeTracker ShapeTracker::flip(const std::vector<bool>& a) const {
  ShapeTracker r = *this;
  r.views.back() = r.views.back().flip(a);
  return r;
}

ShapeTracker ShapeTracker::apply(Ops op, const Arg& arg) const {
  switch (op) {
  case Ops::RESHAPE:
    return reshape(std::get<Shape>(arg));
  case Ops::PERMUTE:
    return permute(std::get<std::vector<int64_t>>(arg));
  case Ops::EXPAND:
    return expand(std::get<Shape>(arg));
  case Ops::PAD:
    return pad(int_pairs(unflatten_pairs(std::get<Shape>(arg))));
  case Ops::SHRINK:
    return shrink(unflatten_pairs(std::get<Shape>(arg)));
  case Ops::FLIP: {
    auto& v = std::get<std::vector<int64_t>>(arg);
    return flip(std::vector<bool>(v.begin(), v.end()));
  }
  default:
    internal_error(std::string("ShapeTracker::apply of ") + name(op));
  }
}

ShapeTracker ShapeTracker::simplify() const {
  if (views.size() < 2) return *this;
  const View &under = views[views.size() - 2], &top = views.back();
  ShapeTracker r = *this;
  // The lower view maps its flat index straight to memory: the top view alone says it all.
  if (under.contiguous) {
    r.views.erase(r.views.end() - 2);
    return r.simplify();
  }
  // The top view is a plain reshape of the lower one.
  if (top.contiguous) {
    if (auto v = under.reshape(top.shape)) {
      r.views.pop_back();
      r.views.back() = *v;
      return r.simplify();
    }
  }
  return r;
}

namespace {
std::pair<UOpRef, UOpRef> view_index(const View& v, const std::vector<UOpRef>& idxs, DType it) {
  UOpRef idx = v.offset.uop(it);
  UOpRef valid = UOp::cconst(DType::Bool, 1);
  for (size_t i = 0; i < v.shape.size(); i++)
    if (v.strides[i] != 0 && v.shape[i] != 1) idx = idx + idxs[i] * static_cast<double>(v.strides[i]);
  if (v.mask)
    for (size_t i = 0; i < v.shape.size(); i++) {
      auto [lo, hi] = (*v.mask)[i];
      if (lo >= hi) return {UOp::cconst(it, 0), UOp::cconst(DType::Bool, 0)};
      if (lo > 0)
        valid = uand(valid, alu(Ops::CMPLT, {UOp::cconst(it, static_cast<double>(lo - 1)), idxs[i]}));
      if (hi < v.shape[i].value()) valid = uand(valid, lt(idxs[i], static_cast<double>(hi)));
    }
  return {idx, valid};
}
} // namespace

std::pair<UOpRef, UOpRef> ShapeTracker::to_indexed(const std::vector<UOpRef>& idxs, DType it) const {
  auto [idx, valid] = view_index(views.back(), idxs, it);
  for (size_t k = views.size() - 1; k-- > 0;) {
    const View& v = views[k];
    std::vector<UOpRef> sub(v.shape.size());
    int64_t acc = 1;
    for (size_t i = v.shape.size(); i-- > 0;) {
      sub[i] = mod(idiv(idx, static_cast<double>(acc)), static_cast<double>(v.shape[i].value()));
      acc *= v.shape[i].value();
    }
    auto [i2, v2] = view_index(v, sub, it);
    idx = i2;
    valid = uand(valid, v2);
  }
  return {idx, valid};
}

int64_t ShapeTracker::offset_of(const std::vector<int64_t>& idx0) const {
  std::vector<int64_t> idx = idx0;
  for (size_t k = views.size(); k-- > 0;) {
    const View& v = views[k];
    int64_t off = v.offset.value();
    for (size_t i = 0; i < v.shape.size(); i++) {
      if (v.mask && (idx[i] < (*v.mask)[i].first || idx[i] >= (*v.mask)[i].second)) return -1;
      off += idx[i] * v.strides[i];
    }
    if (k == 0) return off;
    const Shape& below = views[k - 1].shape;
    idx.assign(below.size(), 0);
    for (size_t i = below.size(); i-- > 0;) {
      idx[i] = off % below[i].value();
      off /= below[i].value();
    }
  }
  return -1;
}

int64_t ShapeTracker::max_index_value() const {
  int64_t m = 0;
  for (auto& v : views) {
    int64_t hi = std::max(std::abs(v.offset.vmin()), std::abs(v.offset.vmax()));
    for (size_t i = 0; i < v.shape.size(); i++)
      hi += std::abs(v.strides[i]) * std::max<int64_t>(v.shape[i].vmax() - 1, 0);
    m = std::max({m, hi, v.size()});
  }
  return m;
}

std::string ShapeTracker::to_string() const {
  std::string s = "ShapeTracker(views=(";
  for (auto& v : views)
    s += v.to_string() + ",";
  return s + "))";
}

} // namespace mg
