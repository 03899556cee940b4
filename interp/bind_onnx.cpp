// require "mgonnx": ONNX files read with ONNX's own protobuf classes and model checker (Debian's
// libonnx-dev), turned into Lua tables and Tensors. The only file that includes the ONNX headers.
// What the nodes compute is Lua's business (stdlib/onnx.lua and the handlers in onnx_ops*.lua).
//
//   read_value(path [, kind]) -> value    a serialized TensorProto (the .pb files of the test data),
//                                         SequenceProto (a list) or OptionalProto (the value or nil)
//   load(path)         -> model table     {producer=, ir_version=, opset={[domain]=version},
//                                          graph={name=, inputs=, outputs=, initializers=, nodes=}}
//   dtype(code [, what]) -> name          a TensorProto element type as a dtype name
//   Strings                               the metatable of string tensors
// A graph's inputs and outputs are {name=, kind=, dtype=, shape={dim or "N", ...}, elem=} (a
// symbolic dim as its name, an unknown one as "?"; a sequence's or optional's element type as
// elem); nodes are {op=, name=, domain=, inputs={...}, outputs={...}, attrs={name=value}} with
// attribute values as Lua numbers, strings, lists, Tensors, graphs or type tables. A tensor of
// strings is a Lua list with its shape (moongrad's dtypes have no strings). Weights stored in
// external data files are read from the model's folder.
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "engine/tensor.h"
#include "interp/lua_state.h"

namespace mg::lua {

namespace {

DType dtype_of(int t, const std::string& what) {
  using TP = onnx::TensorProto;
  switch (t) {
  case TP::FLOAT:
    return DType::Float32;
  case TP::DOUBLE:
    return DType::Float64;
  case TP::FLOAT16:
    return DType::Float16;
  case TP::BFLOAT16:
    return DType::BFloat16;
  case TP::INT8:
    return DType::Int8;
  case TP::UINT8:
    return DType::UInt8;
  case TP::INT16:
    return DType::Int16;
  case TP::UINT16:
    return DType::UInt16;
  case TP::INT32:
    return DType::Int32;
  case TP::UINT32:
    return DType::UInt32;
  case TP::INT64:
    return DType::Int64;
  case TP::UINT64:
    return DType::UInt64;
  case TP::BOOL:
    return DType::Bool;
  default:
    break;
  }
  std::string type = TP::DataType_IsValid(t) ? TP::DataType_Name(static_cast<TP::DataType>(t)) : "";
  if (type.empty()) type = "number " + std::to_string(t) + " (not one ONNX defines)";
  throw std::invalid_argument(what + ": element type " + type +
                              " is not supported (moongrad has no strings or complex numbers)");
}

// Little-endian bytes of n elements of d from one typed repeated field: each value's low bytes.
// The count is checked before anything is allocated: a file that is not a tensor can claim any shape.
template <class Field> std::string field_bytes(const Field& f, DType d, int64_t n, const std::string& what) {
  if (f.size() != n)
    throw std::invalid_argument(what + ": " + std::to_string(f.size()) + " values for " + std::to_string(n) +
                                " elements (not a TensorProto, or a damaged one)");
  std::string out(static_cast<size_t>(n) * itemsize(d), '\0');
  for (int i = 0; i < f.size(); i++) {
    auto v = f.Get(i);
    std::memcpy(out.data() + static_cast<size_t>(i) * itemsize(d), &v, itemsize(d));
  }
  return out;
}

// The same from whichever field holds dtype d (raw_data is used as is).
std::string typed_bytes(const onnx::TensorProto& t, DType d, int64_t n, const std::string& what) {
  switch (d) {
  case DType::Float32:
    return field_bytes(t.float_data(), d, n, what);
  case DType::Float64:
    return field_bytes(t.double_data(), d, n, what);
  case DType::Int64:
    return field_bytes(t.int64_data(), d, n, what);
  case DType::UInt64:
  case DType::UInt32:
    return field_bytes(t.uint64_data(), d, n, what);
  default: // int32 and everything narrower (float16 and bfloat16 as their bits) live in int32_data
    return field_bytes(t.int32_data(), d, n, what);
  }
}

// The bytes of a tensor stored outside the model (data_location EXTERNAL): the file named by
// `location`, relative to the model's folder, from `offset`, `length` bytes (all of it if absent).
std::string external_bytes(const onnx::TensorProto& t, const std::string& dir, const std::string& what) {
  auto number = [&](const std::string& key, const std::string& v) {
    int64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size() || n < 0)
      throw std::invalid_argument(what + ": external data " + key + " '" + v + "' is not a byte count");
    return n;
  };
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") offset = number("offset", kv.value());
    if (kv.key() == "length") length = number("length", kv.value());
  }
  if (location.empty()) throw std::invalid_argument(what + ": external data without a location");
  if (location[0] == '/' || location.find("..") != std::string::npos)
    throw std::invalid_argument(what + ": external data location '" + location +
                                "' must be a path inside the model's folder");
  if (dir.empty()) throw std::invalid_argument(what + ": external data, but no model folder to find it in");
  std::string path = dir + "/" + location;
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f)
    throw std::invalid_argument(what + ": cannot open external data " + path + " (" + std::strerror(errno) +
                                ")");
  int64_t size = f.tellg();
  if (length < 0) length = size - offset;
  if (offset < 0 || length < 0 || offset + length > size)
    throw std::invalid_argument(what + ": external data " + path + " has " + std::to_string(size) +
                                " bytes, too few for offset " + std::to_string(offset) + " and length " +
                                std::to_string(length));
  std::string bytes(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  f.read(bytes.data(), length);
  return bytes;
}

// dir: the model's folder, where external data files are found
Tensor tensor_of(const onnx::TensorProto& t, const std::string& what, const std::string& dir = "") {
  DType d = dtype_of(t.data_type(), what);
  Shape shape(t.dims().begin(), t.dims().end());
  int64_t n = checked_numel(shape); // data sizes are checked against it before allocating
  bool external = t.data_location() == onnx::TensorProto::EXTERNAL;
  if (external || t.has_raw_data()) {
    std::string ext = external ? external_bytes(t, dir, what) : std::string();
    const std::string& raw = external ? ext : t.raw_data();
    if (raw.size() != static_cast<size_t>(n) * itemsize(d))
      throw std::invalid_argument(what + ": " + std::to_string(raw.size()) + " bytes of data for shape " +
                                  shape_str(shape) + " of " + name(d));
    return Tensor::from_bytes(raw.data(), raw.size(), shape, d);
  }
  std::string bytes = typed_bytes(t, d, n, what);
  return Tensor::from_bytes(bytes.data(), bytes.size(), shape, d);
}

constexpr const char* kStringsMeta = "onnx.Strings";

// A TensorProto as a Lua value: a Tensor, or for STRING data (which moongrad's dtypes lack) a Lua
// list of the strings with its `shape`, whose metatable is onnx.Strings.
void push_value(lua_State* L, const onnx::TensorProto& t, const std::string& what,
                const std::string& dir = "") {
  if (t.data_type() != onnx::TensorProto::STRING) return push_tensor(L, tensor_of(t, what, dir));
  Shape shape(t.dims().begin(), t.dims().end());
  int64_t n = checked_numel(shape);
  if (t.string_data_size() != n)
    throw std::invalid_argument(what + ": " + std::to_string(t.string_data_size()) + " strings for " +
                                std::to_string(n) + " elements");
  lua_createtable(L, static_cast<int>(n), 1);
  for (int i = 0; i < t.string_data_size(); i++) {
    lua_pushlstring(L, t.string_data(i).data(), t.string_data(i).size());
    lua_rawseti(L, -2, i + 1);
  }
  lua_createtable(L, static_cast<int>(shape.size()), 0);
  for (size_t i = 0; i < shape.size(); i++) {
    lua_pushinteger(L, shape[i]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "shape");
  luaL_setmetatable(L, kStringsMeta);
}

// A value's type into the table on top: kind ("tensor", "sequence", "optional", "map"), a tensor's
// dtype and shape, a sequence's or optional's element type as `elem` (a table of the same form).
void set_type(lua_State* L, const onnx::TypeProto& type, const std::string& what) {
  luaL_checkstack(L, 6, "onnx type");
  auto kind = [&](const char* k) {
    lua_pushstring(L, k);
    lua_setfield(L, -2, "kind");
  };
  auto elem = [&](const onnx::TypeProto& e) {
    lua_newtable(L);
    set_type(L, e, what);
    lua_setfield(L, -2, "elem");
  };
  if (type.has_tensor_type()) {
    kind("tensor");
    const auto& tt = type.tensor_type();
    int et = tt.elem_type();
    lua_pushstring(L, et == onnx::TensorProto::UNDEFINED ? "?"
                      : et == onnx::TensorProto::STRING  ? "string"
                                                         : name(dtype_of(et, what)));
    lua_setfield(L, -2, "dtype");
    if (tt.has_shape()) {
      lua_createtable(L, tt.shape().dim_size(), 0);
      for (int i = 0; i < tt.shape().dim_size(); i++) {
        const auto& dim = tt.shape().dim(i);
        if (dim.has_dim_value())
          lua_pushinteger(L, dim.dim_value());
        else
          lua_pushstring(L, dim.has_dim_param() && !dim.dim_param().empty() ? dim.dim_param().c_str() : "?");
        lua_rawseti(L, -2, i + 1);
      }
      lua_setfield(L, -2, "shape");
    }
  } else if (type.has_sequence_type()) {
    kind("sequence");
    elem(type.sequence_type().elem_type());
  } else if (type.has_optional_type()) {
    kind("optional");
    elem(type.optional_type().elem_type());
  } else {
    kind(type.has_map_type() ? "map" : "other");
  }
}

void push_value_info(lua_State* L, const onnx::ValueInfoProto& v) {
  lua_createtable(L, 0, 4);
  lua_pushstring(L, v.name().c_str());
  lua_setfield(L, -2, "name");
  set_type(L, v.type(), v.name());
}

void push_graph(lua_State* L, const onnx::GraphProto& g, const std::string& dir);

void push_attribute(lua_State* L, const onnx::AttributeProto& a, const std::string& where,
                    const std::string& dir) {
  using AP = onnx::AttributeProto;
  auto list = [&](int n, auto push_one) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
      push_one(i);
      lua_rawseti(L, -2, i + 1);
    }
  };
  switch (a.type()) {
  case AP::INT:
    lua_pushinteger(L, a.i());
    return;
  case AP::FLOAT:
    lua_pushnumber(L, a.f());
    return;
  case AP::STRING:
    lua_pushlstring(L, a.s().data(), a.s().size());
    return;
  case AP::TENSOR:
    push_value(L, a.t(), where + " attribute " + a.name(), dir);
    return;
  case AP::GRAPH:
    push_graph(L, a.g(), dir);
    return;
  case AP::INTS:
    return list(a.ints_size(), [&](int i) { lua_pushinteger(L, a.ints(i)); });
  case AP::FLOATS:
    return list(a.floats_size(), [&](int i) { lua_pushnumber(L, a.floats(i)); });
  case AP::STRINGS:
    return list(a.strings_size(),
                [&](int i) { lua_pushlstring(L, a.strings(i).data(), a.strings(i).size()); });
  case AP::TENSORS:
    return list(a.tensors_size(), [&](int i) { push_value(L, a.tensors(i), where, dir); });
  case AP::GRAPHS:
    return list(a.graphs_size(), [&](int i) { push_graph(L, a.graphs(i), dir); });
  case AP::TYPE_PROTO:
    lua_newtable(L);
    set_type(L, a.tp(), where + " attribute " + a.name());
    return;
  default:
    throw std::invalid_argument(where + ": attribute " + a.name() + " has type " +
                                AP::AttributeType_Name(a.type()) + ", which is not supported");
  }
}

void push_strings(lua_State* L, const google::protobuf::RepeatedPtrField<std::string>& s) {
  lua_createtable(L, s.size(), 0);
  for (int i = 0; i < s.size(); i++) {
    lua_pushlstring(L, s[i].data(), s[i].size());
    lua_rawseti(L, -2, i + 1);
  }
}

void push_graph(lua_State* L, const onnx::GraphProto& g, const std::string& dir) {
  luaL_checkstack(L, 8, "onnx graph");
  lua_createtable(L, 0, 5);
  lua_pushstring(L, g.name().c_str());
  lua_setfield(L, -2, "name");
  lua_createtable(L, 0, g.initializer_size());
  for (const auto& t : g.initializer()) {
    push_value(L, t, "initializer " + t.name(), dir);
    lua_setfield(L, -2, t.name().c_str());
  }
  lua_setfield(L, -2, "initializers");
  // graph inputs that are initializers too are weights with a default, not inputs to feed
  auto push_infos = [&](const auto& infos, const char* field) {
    lua_createtable(L, infos.size(), 0);
    int k = 0;
    for (const auto& v : infos) {
      push_value_info(L, v);
      lua_rawseti(L, -2, ++k);
    }
    lua_setfield(L, -2, field);
  };
  push_infos(g.input(), "inputs");
  push_infos(g.output(), "outputs");
  lua_createtable(L, g.node_size(), 0);
  for (int i = 0; i < g.node_size(); i++) {
    const auto& n = g.node(i);
    std::string where =
        "node " + std::to_string(i + 1) + " (" + n.op_type() + (n.name().empty() ? "" : " " + n.name()) + ")";
    lua_createtable(L, 0, 6);
    lua_pushstring(L, n.op_type().c_str());
    lua_setfield(L, -2, "op");
    lua_pushstring(L, n.name().c_str());
    lua_setfield(L, -2, "name");
    lua_pushstring(L, n.domain().c_str());
    lua_setfield(L, -2, "domain");
    push_strings(L, n.input());
    lua_setfield(L, -2, "inputs");
    push_strings(L, n.output());
    lua_setfield(L, -2, "outputs");
    lua_createtable(L, 0, n.attribute_size());
    for (const auto& a : n.attribute()) {
      push_attribute(L, a, where, dir);
      lua_setfield(L, -2, a.name().c_str());
    }
    lua_setfield(L, -2, "attrs");
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "nodes");
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void push_optional(lua_State* L, const onnx::OptionalProto& o, const std::string& what);

// A SequenceProto as a Lua list of its elements (tensors, sequences or optionals).
void push_sequence(lua_State* L, const onnx::SequenceProto& q, const std::string& what) {
  luaL_checkstack(L, 4, "onnx sequence");
  using SP = onnx::SequenceProto;
  auto list = [&](const auto& items, auto push_one) {
    lua_createtable(L, items.size(), 0);
    int k = 0;
    for (const auto& item : items) {
      push_one(item);
      lua_rawseti(L, -2, ++k);
    }
  };
  switch (q.elem_type()) {
  case SP::TENSOR:
    return list(q.tensor_values(), [&](const auto& t) { push_value(L, t, what); });
  case SP::SEQUENCE:
    return list(q.sequence_values(), [&](const auto& e) { push_sequence(L, e, what); });
  case SP::OPTIONAL:
    return list(q.optional_values(), [&](const auto& e) { push_optional(L, e, what); });
  case SP::UNDEFINED: // an empty sequence
    lua_newtable(L);
    return;
  default:
    throw std::invalid_argument(what + ": sequences of maps or sparse tensors are not supported");
  }
}

// An OptionalProto as its value, or nothing (nil) when it holds none.
void push_optional(lua_State* L, const onnx::OptionalProto& o, const std::string& what) {
  using OP = onnx::OptionalProto;
  if (o.elem_type() == OP::TENSOR && o.has_tensor_value())
    push_value(L, o.tensor_value(), what);
  else if (o.elem_type() == OP::SEQUENCE && o.has_sequence_value())
    push_sequence(L, o.sequence_value(), what);
  else if (o.elem_type() == OP::OPTIONAL && o.has_optional_value())
    push_optional(L, o.optional_value(), what);
  else if (o.elem_type() == OP::MAP || o.elem_type() == OP::SPARSE_TENSOR)
    throw std::invalid_argument(what + ": optionals of maps or sparse tensors are not supported");
  else
    lua_pushnil(L);
}

// read_value(path, kind): the .pb file as a TensorProto ("tensor"), SequenceProto ("sequence") or
// OptionalProto ("optional"); the file does not say which, the model's input or output type does.
// dtype(code, what) -> the dtype name of a TensorProto element type (a Cast's `to`), or an error
int onnx_dtype(lua_State* L) {
  std::string what = luaL_optstring(L, 2, "element type");
  lua_pushstring(L, name(dtype_of(static_cast<int>(luaL_checkinteger(L, 1)), what)));
  return 1;
}

int onnx_read_value(lua_State* L) {
  std::string path = luaL_checkstring(L, 1);
  std::string kind = luaL_optstring(L, 2, "tensor");
  std::string bytes = read_file(path);
  auto parse = [&](auto& proto) {
    if (!proto.ParseFromString(bytes))
      throw std::invalid_argument(path + ": not a serialized " + kind + " proto");
  };
  if (kind == "tensor") {
    onnx::TensorProto t;
    parse(t);
    push_value(L, t, path);
  } else if (kind == "sequence") {
    onnx::SequenceProto q;
    parse(q);
    push_sequence(L, q, path);
  } else if (kind == "optional") {
    onnx::OptionalProto o;
    parse(o);
    push_optional(L, o, path);
  } else {
    throw std::invalid_argument("kind '" + kind + "' is not one of tensor, sequence, optional");
  }
  return 1;
}

std::string folder_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

int onnx_load(lua_State* L) {
  std::string path = luaL_checkstring(L, 1);
  std::string bytes = read_file(path);
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes))
    throw std::invalid_argument(path + ": not an ONNX model (damaged or truncated)");
  try {
    onnx::checker::check_model(path); // by path: external data files are checked beside the model
  } catch (const std::exception& e) {
    throw std::invalid_argument(path + ": the ONNX checker refuses the model: " + e.what());
  }
  lua_createtable(L, 0, 5);
  lua_pushstring(L, m.producer_name().c_str());
  lua_setfield(L, -2, "producer");
  lua_pushstring(L, m.producer_version().c_str());
  lua_setfield(L, -2, "producer_version");
  lua_pushinteger(L, m.ir_version());
  lua_setfield(L, -2, "ir_version");
  lua_createtable(L, 0, m.opset_import_size());
  for (const auto& o : m.opset_import()) {
    lua_pushinteger(L, o.version());
    lua_setfield(L, -2, o.domain().empty() ? "ai.onnx" : o.domain().c_str());
  }
  lua_setfield(L, -2, "opset");
  push_graph(L, m.graph(), folder_of(path));
  lua_setfield(L, -2, "graph");
  return 1;
}

const Binding kOnnxFns[] = {
    {"onnx.read_value", onnx_read_value}, {"onnx.load", onnx_load}, {"onnx.dtype", onnx_dtype}};

} // namespace

int open_mgonnx(lua_State* L) {
  lua_newtable(L);
  set_bindings(L, -1, kOnnxFns);
  luaL_newmetatable(L, kStringsMeta); // string tensors' metatable: onnx.Strings in Lua
  lua_setfield(L, -2, "Strings");
  return 1;
}

} // namespace mg::lua
