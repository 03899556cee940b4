-- Bad input gives a Lua error (catchable with pcall) that names the shapes, dtypes or values
-- involved, and moongrad stays alive afterwards.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test, errors = H.test, H.errors

local a = Tensor { { 1, 2, 3 }, { 4, 5, 6 } }

test("broadcasting mismatch names both shapes", function()
  errors(function() return a + Tensor { 1, 2, 3, 4 } end, "(2, 3)", "(4,)")
  errors(function() return a:add(Tensor { 1, 2 }) end, "(2, 3)", "(2,)")
end)

test("reshape to a different element count names the shapes", function()
  errors(function() return a:reshape(4) end, "(2, 3)", "(4,)")
  errors(function() return a:reshape(4, 2) end, "(2, 3)", "(4, 2)")
end)

test("errors carry the Lua source position", function()
  local msg = errors(function() return a:reshape(5) end)
  assert(msg:find("test_errors.lua:%d+:"), "no file:line in " .. msg)
end)

test("ragged and malformed tables", function()
  errors(function() return Tensor { { 1, 2 }, { 3 } } end, "ragged", "t[2]")
  errors(function() return Tensor { { 1, 2 }, 3 } end, "ragged", "t[2]")
  errors(function() return Tensor { 1, nil, 3 } end, "holes")
  errors(function() return Tensor { 1, "x" } end, "t[2]", "string")
  errors(function() return Tensor("abc") end, "string")
end)

test("axes out of range", function()
  errors(function() return a:sum(2) end, "axis 2", "(2, 3)")
  errors(function() return a:permute(0, 0) end, "(0, 0)")
  errors(function() return a:softmax(5) end, "(2, 3)")
  errors(function() return a:flip(3) end, "axis 3")
end)

test("bad indices", function()
  errors(function() return a[2] end, "index 2", "size 2")
  errors(function() return a[{ 0, 0, 0 }] end, "(2, 3)")
  errors(function() return a[{ { 0, 2, 0 } }] end, "step 0")
  errors(function() return a["nope"] end, "nope")
  errors(function() return a[true] end, "boolean")
end)

test("matmul shape mismatch", function()
  errors(function() return a:matmul(a) end, "(2, 3)")
end)

test("dtypes and options", function()
  errors(function() return a:cast("float33") end, "float33")
  errors(function() return dtypes.float33 end, "float33")
  errors(function() return Tensor.zeros(2, { dtyp = "float32" }) end, "dtyp")
  errors(function() return a:sum { axis = 0, keepdims = true } end, "keepdims", "keepdim")
  errors(function() return a:sum(0, true, nil, 1) end, "too many")
  errors(function() return a:max_pool2d { kernal = 3 } end, "kernal", "kernel_size")
  errors(function() return a:sum(0, { axis = 1 }) end, "axis", "twice")
end)

test("scalar and type errors", function()
  errors(function() return a + "x" end, "string")
  errors(function() return a:item() end, "(2, 3)")
  errors(function() return a:no_such_method() end, "no_such_method")
  errors(function() a.foo = 2 end, "foo")
  errors(function() a[{ 0, 5 }] = 2 end, "index 5")
end)

test("gelu, binary_crossentropy_logits and attention options name what is wrong", function()
  errors(function() return a:gelu("erf") end, "gelu", "approximate", "'none'", "'tanh'", "'erf'")
  errors(function() return a:gelu { approximate = true } end, "approximate", "true")
  local x, y = Tensor.randn(2, 4), Tensor.rand(2, 4)
  errors(function() return x:binary_crossentropy_logits(y, { pos_weight = Tensor { 1, 2, 3 } }) end,
    "pos_weight", "(3,)", "(2, 4)")
  errors(function() return x:binary_crossentropy_logits(y, { pos_weight = "2" }) end, "pos_weight", "string")
  local q, k, v = Tensor.randn(2, 3, 4), Tensor.randn(2, 5, 4), Tensor.randn(2, 5, 3)
  local sdpa = function(...) return q:scaled_dot_product_attention(...) end
  errors(function() return sdpa(k, v, { attn_mask = Tensor.ones(3, 4, { dtype = "bool" }) }) end,
    "attn_mask", "(3, 4)", "(2, 3, 5)")
  errors(function() return sdpa(k, v, { attn_mask = Tensor.zeros(4, 3, 5) }) end, "attn_mask", "(4, 3, 5)", "(2, 3, 5)")
  errors(function() return sdpa(k, v, { attn_mask = Tensor.ones(3, 5, { dtype = "bool" }), is_causal = true }) end,
    "attn_mask", "is_causal")
  errors(function() return sdpa(k, v, { attn_mask = Tensor.ones(3, 5, { dtype = "int32" }) }) end, "attn_mask", "int32")
  errors(function() return sdpa(k, v, { is_causal = 1 }) end, "is_causal", "number")
  errors(function() return sdpa(v, v) end, "query", "(2, 3, 4)", "(2, 5, 3)")
  errors(function() return sdpa(k, q) end, "key", "value", "(2, 5, 4)", "(2, 3, 4)")
  errors(function() return sdpa(k) end, "value", "nil")
end)

test("Context restores settings after an error", function()
  local before = getdebug()
  errors(function() Context({ DEBUG = 2 }, function() error("inner failure") end) end, "inner failure")
  assert(getdebug() == before, "DEBUG was not restored")
  errors(function() Context({ NOT_A_SETTING = 1 }, function() end) end, "NOT_A_SETTING")
end)

test("the state is still usable after errors", function()
  H.same((a + 1):sum():item(), 27)
end)

H.done()
