-- 09_transformer.lua: Project 9 of the guide. A GPT from scratch: a character-level transformer
-- trained on the King James Bible (the Debian package bible-kjv, written to data/bible/kjv.txt by
-- ./setup.sh), in plain Lua over moongrad's nn, then made to write with a key/value cache.
--   moongrad scripts/09_transformer.lua               2000 steps (nanoGPT's documented CPU run)
--   moongrad scripts/09_transformer.lua --steps 300 --max-loss 2.3   a shorter run (what CTest runs)
--   1. the data: the vocabulary (the file's distinct bytes), the 90/10 split, random batches
--   2. the model: embeddings, 4 pre-norm blocks (attention, MLP), the head; its parameters
--   3. training under TinyJit: AdamW in two groups, warm-up then cosine, clipping at norm 1
--   4. train and validation loss; save, reload into a fresh model, the same validation loss
--   5. generation with a KV cache, one TinyJit capture for every position; checked against
--      the plain forward pass, and no kernel compiled after the first tokens
-- The last line is for bench/gpt.sh, which runs the same model in PyTorch (bench/gpt.py).
local lesson = require "lesson"
local mgio = require "mgio"

local opts = { steps = 2000, seed = 1337, max_loss = false, prompt = "In the beginning", gen = 200 }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    k = k and k:gsub("-", "_")
    if not k or opts[k] == nil or arg[i + 1] == nil then
      error("unknown argument " .. arg[i] .. " (--steps N, --seed N, --max-loss X, --prompt TEXT, --gen N)")
    end
    opts[k] = (k ~= "prompt" and tonumber(arg[i + 1])) or arg[i + 1]
    i = i + 2
  end
end

-- nanoGPT's documented CPU configuration (README, "I only have a macbook"), with dropout 0.
local cfg = { block = 64, batch = 12, n_layer = 4, n_head = 4, n_embd = 128,
  lr = 1e-3, min_lr = 1e-4, warmup = 100, decay_steps = 2000, betas = { 0.9, 0.99 }, weight_decay = 0.1,
  clip = 1.0, eval_batches = 20 }

------------------------------------------------------------------------------
lesson.section("1. The data: the King James Bible, one character at a time")

local path = mgio.data_dir .. "/bible/kjv.txt"
local f = io.open(path, "rb")
if not f then error(path .. " is missing: run ./setup.sh (it installs bible-kjv and writes the file once)") end
local text = f:read("a")
f:close()
-- The vocabulary: the distinct bytes of the file, sorted. A character's id is its place there.
local chars, id_of = {}, {}
for b = 0, 255 do
  local c = string.char(b)
  if text:find(c, 1, true) then
    chars[#chars + 1] = c
    id_of[c] = string.char(#chars - 1)
  end
end
cfg.vocab = #chars
local ids = text:gsub(".", id_of) -- the text as ids, one byte each
local n_train = math.floor(#ids * 0.9)
local split = { train = ids:sub(1, n_train), val = ids:sub(n_train + 1) }
print(("%s: %d characters, %d distinct: %s"):format(path, #text, cfg.vocab,
  table.concat(chars):gsub("\n", "\\n")))
print(("train: the first 90%% (%d), validation: the last 10%% (%d)"):format(#split.train, #split.val))
assert(cfg.vocab < 100 and #ids == #text)

local function encode(s)
  for i = 1, #s do
    local c = s:sub(i, i)
    if not id_of[c] then
      error(("the character %q (byte %d) is not in the vocabulary, the text's %d characters: %s"):format(c, c:byte(),
        #chars, (table.concat(chars):gsub("\n", "\\n"))), 0)
    end
  end
  return s:gsub(".", id_of)
end
local function decode(s) return (s:gsub(".", function(c) return chars[c:byte() + 1] end)) end
-- the prompt is checked now, not after minutes of training
if #opts.prompt > cfg.block then
  error(("the prompt has %d characters; the model sees at most %d (the block)"):format(#opts.prompt, cfg.block), 0)
end
if #opts.prompt == 0 then error("the prompt is empty: generation starts from at least one character", 0) end
if opts.gen < 4 then -- the speed is timed after the first 3 characters (compiles, warm-up)
  error(("--gen %s: write at least 4 characters (the speed is timed after the first 3)"):format(opts.gen), 0)
end
local prompt = encode(opts.prompt)

-- batches(split, seed): a function returning (x, y), each (batch, block) uint8: x from random
-- offsets, y the same characters shifted by one (the next character at every position). The
-- offsets come from a 63-bit LCG, so bench/gpt.py draws the very same batches.
local function batches(which, seed)
  local data, s = split[which], seed
  return function()
    local xs, ys = {}, {}
    for b = 1, cfg.batch do
      s = (s * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
      local o = (s >> 17) % (#data - cfg.block)
      xs[b], ys[b] = data:sub(o + 1, o + cfg.block), data:sub(o + 2, o + cfg.block + 1)
    end
    return Tensor.frombytes(table.concat(xs), { cfg.batch, cfg.block }, "uint8"),
        Tensor.frombytes(table.concat(ys), { cfg.batch, cfg.block }, "uint8")
  end
end
local x0, y0 = batches("train", opts.seed)()
print(("a batch: x and y are (%d, %d); row 1 reads %q"):format(cfg.batch, cfg.block,
  decode(string.char(table.unpack(x0:tolist()[1])))))

------------------------------------------------------------------------------
lesson.section("2. The model: a GPT in plain Lua")

local function init_normal(t, std) t:assign(Tensor.randn(t.shape) * std):realize() end -- nanoGPT's init

-- The key/value cache of one layer for generation at batch 1: keys and values preallocated for
-- the whole block. The position is a bound Variable (start_pos, symbolic shapes): the new key and
-- value are stored into the slice at start_pos in place, and attention reads the slice of the
-- positions written so far, (start_pos+1) long. The kernels take start_pos as a parameter, so one
-- compiled kernel serves every position and TinyJit replays one capture.
local KVCache = {}
KVCache.__index = KVCache
function KVCache.new(n_head, block, head_size)
  local z = function() return Tensor.zeros(1, n_head, block, head_size):contiguous():realize() end
  return setmetatable({ k = z(), v = z(), H = n_head, D = head_size }, KVCache)
end
function KVCache:update(k, v, sp)
  local H, D = self.H, self.D
  self.k:shrink({ { 0, 1 }, { 0, H }, { sp, sp + 1 }, { 0, D } }):assign(k):realize() -- cache[:, :, sp] = k
  self.v:shrink({ { 0, 1 }, { 0, H }, { sp, sp + 1 }, { 0, D } }):assign(v):realize()
  local written = { { 0, 1 }, { 0, H }, { 0, sp + 1 }, { 0, D } }           -- cache[:, :, :sp+1]
  return self.k:shrink(written), self.v:shrink(written)
end

local Attention = nn.class("Attention")
function Attention:init(c)
  self.n_head = c.n_head
  self.qkv = nn.Linear(c.n_embd, 3 * c.n_embd, { bias = false })
  self.proj = nn.Linear(c.n_embd, c.n_embd, { bias = false })
end
function Attention:forward(x, cache, pos)
  local B, T, C = table.unpack(x.shape)
  local function heads(t) return t:reshape(B, T, self.n_head, C // self.n_head):transpose(1, 2) end -- (B, H, T, C/H)
  local qkv = self.qkv(x)
  -- the cache is written (realized) before attention reads it: q, k and v come from one buffer
  if cache then qkv = qkv:realize() end
  local q, k, v = table.unpack(qkv:split(C, -1))
  q, k, v = heads(q), heads(k), heads(v)
  local y
  if cache then -- one new token: attend to every position written so far
    local K, V = cache:update(k, v, pos)
    y = q:scaled_dot_product_attention(K, V)
  else -- a whole sequence: each position attends to itself and the ones before it
    y = q:scaled_dot_product_attention(k, v, { is_causal = true })
  end
  return self.proj(y:transpose(1, 2):reshape(B, T, C))
end

-- As nanoGPT's train.py (bias=False), the linear layers have no bias; the LayerNorms keep theirs
-- (nn.LayerNorm, as PyTorch 1.13's). gelu is tinygrad's tanh form (bench/gpt.py uses the same).
local Block = nn.class("Block")
function Block:init(c)
  self.ln1, self.attn = nn.LayerNorm(c.n_embd), Attention(c)
  self.ln2 = nn.LayerNorm(c.n_embd)
  self.fc = nn.Linear(c.n_embd, 4 * c.n_embd, { bias = false })
  self.fc_proj = nn.Linear(4 * c.n_embd, c.n_embd, { bias = false })
end
function Block:forward(x, cache, pos)
  if cache then x = x:realize() end -- computed once, not again by each layer's cache write
  x = x + self.attn(self.ln1(x), cache, pos)                -- pre-norm attention, residual
  return x + self.fc_proj(self.fc(self.ln2(x)):gelu())      -- pre-norm MLP (4x, GELU), residual
end

local GPT = nn.class("GPT")
function GPT:init(c)
  self.cfg = c
  self.wte, self.wpe = nn.Embedding(c.vocab, c.n_embd), nn.Embedding(c.block, c.n_embd)
  self.blocks = {}
  for i = 1, c.n_layer do self.blocks[i] = Block(c) end
  self.ln_f = nn.LayerNorm(c.n_embd)
  -- nanoGPT's init: N(0, 0.02), the projections into the residual stream scaled by 1/sqrt(2 layers)
  for _, p in ipairs({ self.wte.weight, self.wpe.weight }) do init_normal(p, 0.02) end
  for _, b in ipairs(self.blocks) do
    init_normal(b.attn.qkv.weight, 0.02)
    init_normal(b.fc.weight, 0.02)
    init_normal(b.attn.proj.weight, 0.02 / math.sqrt(2 * c.n_layer))
    init_normal(b.fc_proj.weight, 0.02 / math.sqrt(2 * c.n_layer))
  end
end
-- idx (B, T) ids -> logits (B, T, vocab). With caches and pos (generation): T = 1 at position pos,
-- a bound Variable; its position embedding is the row at pos.
function GPT:forward(idx, caches, pos)
  local pe = pos and self.wpe.weight:shrink({ { pos, pos + 1 }, { 0, self.cfg.n_embd } })
    or self.wpe(Tensor.arange(idx.shape[2]))
  local x = self.wte(idx) + pe
  for i, b in ipairs(self.blocks) do x = b(x, caches and caches[i], pos) end
  return self.ln_f(x):matmul(self.wte.weight.T) -- the head is the embedding table (tied, as GPT-2)
end

Tensor.manual_seed(opts.seed)
local model = GPT(cfg)
local params = state.get_parameters(model)
local n_params, decay, no_decay = 0, {}, {}
for _, p in ipairs(params) do
  n_params = n_params + p:numel()
  table.insert(p.ndim >= 2 and decay or no_decay, p) -- nanoGPT decays the matrices only
end
print(("block %d, %d layers, %d heads, width %d, vocabulary %d"):format(cfg.block, cfg.n_layer, cfg.n_head, cfg.n_embd,
  cfg.vocab))
print(("%d parameter tensors, %d numbers (%d matrices, weight-decayed; %d norm vectors, not)"):format(#params,
  n_params, #decay, #no_decay))
local C = cfg.n_embd
-- embeddings; per block qkv 3C^2, proj C^2, MLP 8C^2 and two LayerNorms 4C; the last LayerNorm
assert(#decay == 2 + 4 * cfg.n_layer and
  n_params == (cfg.vocab + cfg.block) * C + cfg.n_layer * (12 * C * C + 4 * C) + 2 * C)

------------------------------------------------------------------------------
lesson.section(("3. Training: %d steps of %d x %d characters"):format(opts.steps, cfg.batch, cfg.block))

local opt = optim.OptimizerGroup(
  optim.AdamW(decay, { lr = cfg.lr, b1 = cfg.betas[1], b2 = cfg.betas[2], weight_decay = cfg.weight_decay }),
  optim.AdamW(no_decay, { lr = cfg.lr, b1 = cfg.betas[1], b2 = cfg.betas[2], weight_decay = 0 }))
-- nanoGPT's schedule: linear warm-up, then cosine from lr to min_lr over decay_steps
local function lr_at(it)
  if it < cfg.warmup then return cfg.lr * (it + 1) / (cfg.warmup + 1) end
  if it > cfg.decay_steps then return cfg.min_lr end
  local r = (it - cfg.warmup) / (cfg.decay_steps - cfg.warmup)
  return cfg.min_lr + 0.5 * (1 + math.cos(math.pi * r)) * (cfg.lr - cfg.min_lr)
end

-- The step: forward, loss, backward, clip, update. Under TinyJit its kernels are captured on the
-- second call and replayed after. The learning rate is set outside: it is a tensor the captured
-- kernels read, so a new value changes nothing in them (Lua inside the step runs only twice).
local function loss_of(m, x, y) return m(x):sparse_categorical_crossentropy(y) end
local train_step = TinyJit(function(x, y)
  local loss = loss_of(model, x, y)
  loss:backward()
  optim.clip_grad_norm(params, cfg.clip)
  opt:step(loss)
  return loss
end)

local sample = batches("train", opts.seed)
local bar = datasets.progress(opts.steps, "train")
local times, loss_first, loss_avg, log = {}, nil, nil, nil
local losses = {} -- the smoothed loss of each step, plotted below
local t_train = show.clock()
for it = 0, opts.steps - 1 do
  opt:set_lr(lr_at(it))
  local x, y = sample()
  local t0, loss = show.clock(), nil
  if it == 3 then -- a replayed step, with every kernel it runs logged (and timed: not counted below)
    local l
    log, l = show.kernel_log(function() return train_step(x, y) end)
    loss = l:item()
  else
    loss = train_step(x, y):item()
    if it > 3 then times[#times + 1] = show.clock() - t0 end -- after the compile and the capture
  end
  loss_first = loss_first or loss
  loss_avg = loss_avg and 0.95 * loss_avg + 0.05 * loss or loss
  losses[it + 1] = loss_avg
  bar:update(it + 1, { loss = loss_avg })
end
bar:done()
lesson.plot("line", nil, losses, { title = "GPT training loss (smoothed)", xlabel = "step", ylabel = "loss" })
local train_s = show.clock() - t_train
table.sort(times)
local step_ms = #times > 0 and times[(#times + 1) // 2] * 1e3 or 0 / 0
print(("trained in %.1f s, a step %.1f ms (median); loss %.4f -> %.4f (smoothed)"):format(train_s, step_ms,
  loss_first, loss_avg))
assert(math.abs(loss_first - math.log(cfg.vocab)) < 0.1, "the first loss is about ln(vocabulary): uniform guesses")
if log then -- the kernels of that step, the same kernel (name and shape) added up, costliest first
  local by, total = {}, 0
  for _, k in ipairs(log) do
    local key = k.name .. " (" .. table.concat(k.shape, ", ") .. ")"
    by[key] = by[key] or { key = key, n = 0, s = 0, flops = 0 }
    by[key].n, by[key].s, by[key].flops = by[key].n + 1, by[key].s + k.seconds, by[key].flops + k.flops
    total = total + k.seconds
  end
  local rows = {}
  for _, r in pairs(by) do rows[#rows + 1] = r end
  table.sort(rows, function(a, b) return a.s > b.s end)
  print(("one step = %d kernels (forward, backward, clipping, the AdamW update), %.1f ms in them; the costliest:")
    :format(#log, total * 1e3))
  for i = 1, math.min(8, #rows) do
    local r = rows[i]
    print(("  %-44s x%-3d %7.2f ms %5.1f%% %6.1f GFLOPS"):format(r.key, r.n, r.s * 1e3, 100 * r.s / total,
      r.s > 0 and r.flops / r.s * 1e-9 or 0))
  end
end

------------------------------------------------------------------------------
lesson.section(("4. Loss on %d batches of each split; save, reload, the same loss"):format(cfg.eval_batches))

-- The mean loss over eval_batches fixed batches (the same ones for every model: a fresh sampler
-- with a fixed seed), forward only and jitted.
local function evaluate(m, which)
  Tensor.no_grad = true
  local step = TinyJit(function(x, y) return loss_of(m, x, y):realize() end)
  local sample_eval, sum = batches(which, opts.seed + 1000), 0
  for _ = 1, cfg.eval_batches do sum = sum + step(sample_eval()):item() end
  Tensor.no_grad = false
  return sum / cfg.eval_batches
end
local train_loss, val_loss = evaluate(model, "train"), evaluate(model, "val")
print(("train loss %.4f, val loss %.4f (uniform guessing: ln %d = %.4f)"):format(train_loss, val_loss, cfg.vocab,
  math.log(cfg.vocab)))
if opts.max_loss then
  assert(val_loss <= opts.max_loss, ("the validation loss %.4f is above %.4f"):format(val_loss, opts.max_loss))
  print(("(below %g, as this run requires)"):format(opts.max_loss))
end

local base = os.tmpname()
local file = base .. ".safetensors"
local sd = state.get_state_dict(model)
state.safe_save(sd, file)
local n_saved, size = 0, io.open(file, "rb"):seek("end")
for _ in pairs(sd) do n_saved = n_saved + 1 end
local fresh = GPT(cfg)
state.load_state_dict(fresh, state.safe_load(file))
os.remove(file)
os.remove(base)
local val_again = evaluate(fresh, "val")
print(("saved %d tensors (%d bytes), reloaded into a fresh GPT: val loss %.4f"):format(n_saved, size, val_again))
assert(val_again == val_loss, ("the reloaded model's val loss %.6f differs from the trained one's %.6f"):format(val_again,
  val_loss))

------------------------------------------------------------------------------
lesson.section(("5. Writing %d characters (greedy) with a key/value cache"):format(opts.gen))

-- One token in, the next token out: the model over one position, reading and writing the caches.
-- The position is the Variable start_pos, bound anew each call: TinyJit replays one capture.
Tensor.no_grad = true
local m = fresh
local caches = {}
for i = 1, cfg.n_layer do caches[i] = KVCache.new(cfg.n_head, cfg.block, cfg.n_embd // cfg.n_head) end
local gen_step = TinyJit(function(tok, pos)
  local logits = m(tok, caches, pos)
  local nxt = logits:argmax(-1)
  Tensor.realize_all({ logits, nxt })
  return nxt, logits
end)
local start_pos = Variable("start_pos", 0, cfg.block - 1)
local function feed(id, p)
  return gen_step(Tensor({ { id } }, "uint8"), start_pos:bind(p))
end

-- The context: the prompt, then each new character. When the cache is full (block positions),
-- the last block/2 characters are fed again from position 0 (the positions are learned, so a
-- window cannot just slide), and writing goes on.
local seq, pos, nxt = { prompt:byte(1, -1) }, 0, nil
local first_window, window_logits -- what the cache predicted in its first full window
local compiled, compiled_late, warm = GlobalCounters.kernels_compiled, 0, 3
local t_gen
for i = 1, #seq do
  nxt = feed(seq[i], pos)
  pos = pos + 1
end
local generated = 0
while generated < opts.gen do
  local id = nxt:item()
  seq[#seq + 1], generated = id, generated + 1
  if generated == warm then t_gen, compiled = show.clock(), GlobalCounters.kernels_compiled end
  if pos == cfg.block then
    if not first_window then first_window = { table.unpack(seq, 1, cfg.block + 1) } end
    pos = 0
    for j = #seq - cfg.block // 2, #seq - 1 do
      nxt = feed(seq[j], pos)
      pos = pos + 1
    end
  end
  local logits
  nxt, logits = feed(id, pos)
  pos = pos + 1
  if pos == cfg.block and not window_logits then window_logits = logits:tolist()[1][1] end
end
local gen_s = show.clock() - t_gen
compiled_late = GlobalCounters.kernels_compiled - compiled
local gen_tok_s = (opts.gen - warm) / gen_s
local out = decode(string.char(table.unpack(seq)))
print((("%q"):format(out):gsub("\\\n", "\n")))
print(("%.0f characters/s after the first %d (%d kernels compiled after them)"):format(gen_tok_s, warm, compiled_late))
assert(compiled_late == 0, ("generation compiled %d kernels after the first %d tokens"):format(compiled_late, warm))

-- The check: the plain forward pass over the first full window (all positions at once, causal
-- mask) predicts every character the cache produced, and the same logits at the last position.
if first_window and window_logits then
  local w = Tensor.frombytes(string.char(table.unpack(first_window, 1, cfg.block)), { 1, cfg.block }, "uint8")
  local full = m(w):realize()
  local pred = full:argmax(-1):tolist()[1]
  for t = #prompt, cfg.block do
    assert(pred[t] == first_window[t + 1], ("position %d: the plain forward predicts %q, the cache wrote %q")
      :format(t - 1, chars[pred[t] + 1], chars[first_window[t + 1] + 1]))
  end
  local last = full[{ 0, cfg.block - 1 }]:tolist()
  local diff = 0
  for j = 1, cfg.vocab do diff = math.max(diff, math.abs(last[j] - window_logits[j])) end
  print(("the plain forward over the first %d characters agrees: the same %d predictions, logits within %.1e")
    :format(cfg.block, cfg.block - #prompt + 1, diff))
  assert(diff < 1e-3, ("the cached logits differ from the plain forward's by %g"):format(diff))
end
Tensor.no_grad = false

print("\nAll checks passed.")
print(("gpt: steps=%d step_ms=%.2f train_loss=%.4f val_loss=%.4f gen_tok_s=%.1f compiles_after_warmup=%d"):format(
  opts.steps, step_ms, train_loss, val_loss, gen_tok_s, compiled_late))
