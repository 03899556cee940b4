-- How many rows the CPU matmul tile should have on this machine: each matmul timed with the
-- hand-coded opts (rows as the heuristic picks, 8 on AVX-512) and with 4 and 2 rows instead,
-- everything else alike, best of 3 x 3 runs in turns (show.try_opts). engine/codegen/heuristic.cpp
-- sizes the rows by the vector registers alone (16 accumulators with AVX-512: 8 rows of 32), as
-- measured on a Zen 4, where 8x32 ran a 1024^3 matmul 1.7x faster than a tile of 8 accumulators.
-- On a 2-core Intel Xeon (AVX-512, Emerald Rapids) 4 rows first ran 1.2-1.7x faster on every
-- unpacked case here: clang chose 256-bit vectors for that core, so 8 rows of 32 spilled. Since
-- the C renderer asks for 512 bits where rows fill them (c_renderer.cpp, preferred_vector_bits),
-- 8 rows are the fastest in every row there (2026-11-27: 256^3 0.24 ms against 0.25 and 0.33).
--   MG_THREADS=1 build/moongrad bench/tile_rows.lua      (MG_VECTOR_WIDTH=8: the AVX2 profile)
local cases = {
  { "1024^3 (B packed)", function() return Tensor.rand(1024, 1024):realize():matmul(Tensor.rand(1024, 1024):realize()) end },
  { "512^3", function() return Tensor.rand(512, 512):realize():matmul(Tensor.rand(512, 512):realize()) end },
  { "256^3", function() return Tensor.rand(256, 256):realize():matmul(Tensor.rand(256, 256):realize()) end },
  { "36 x 64x32 @ 32x2304", function() return Tensor.rand(36, 64, 32):realize():matmul(Tensor.rand(36, 32, 2304):realize()) end },
  { "36 x 2304x64 @ 64x32", function() return Tensor.rand(36, 64, 2304):realize():transpose(1, 2):matmul(Tensor.rand(36, 64, 32):realize()) end },
  { "16 x 64x256 @ 256x2304", function() return Tensor.rand(16, 64, 256):realize():matmul(Tensor.rand(16, 256, 2304):realize()) end },
}
print(Device.machine())
print(("%-24s %-44s %9s %9s %9s"):format("matmul", "hand-coded opts", "default", "4 rows", "2 rows"))
for _, c in ipairs(cases) do
  local x = c[2]()
  local def = show.try_opts(x)
  -- the rows: the UPCAST of 8 (or fewer) on the dim that is not the row (the row is the widest)
  local widest, rows_at = 0, nil
  for i, o in ipairs(def.opts) do
    local op, amt = o:match("(%u+)%(%d+, (%d+)%)")
    if op == "UPCAST" and tonumber(amt) > widest then widest = tonumber(amt) end
  end
  for i, o in ipairs(def.opts) do
    local op, amt = o:match("(%u+)%(%d+, (%d+)%)")
    if op == "UPCAST" and tonumber(amt) < widest then rows_at = i end
  end
  local function with_rows(rows)
    local opts = {}
    for i, o in ipairs(def.opts) do
      local op, ax, amt = o:match("(%u+)%((%d+), (%d+)%)")
      opts[i] = { op, tonumber(ax), i == rows_at and rows or tonumber(amt) }
    end
    return opts
  end
  local best = {}
  for _ = 1, 3 do
    for _, rows in ipairs({ 0, 4, 2 }) do
      local opts = nil -- the hand-coded ones
      if rows > 0 then opts = with_rows(rows) end
      local ok, r = pcall(show.try_opts, x, opts, 3)
      if ok then best[rows] = math.min(best[rows] or math.huge, r.seconds) end
    end
  end
  local function ms(rows) return best[rows] and ("%7.2fms"):format(best[rows] * 1e3) or "     -   " end
  print(("%-24s %-44s %9s %9s %9s"):format(c[1], table.concat(def.opts, " "), ms(0), rows_at and ms(4) or "", rows_at and ms(2) or ""))
end
