"""The PyTorch peer of scripts/09_transformer.lua: the same GPT, configuration, data, split, batches
(the same 63-bit LCG draws the same offsets), learning-rate schedule, clipping and evaluation, and
greedy generation at batch 1 with a key/value cache and the same refill when the block is full.
usage: /usr/bin/python3 bench/gpt.py THREADS [--steps N] [--seed N] [--gen N] [--prompt TEXT]
Prints the same last line as the Lua script:
  gpt: steps=N step_ms=MEDIAN train_loss=T val_loss=V gen_tok_s=G
Differences that are PyTorch 1.13's, not the model's: attention is written out (1.13 has no
scaled_dot_product_attention), and the cache is a real slice (k_cache[:, :, pos] = k)."""
import argparse, math, os, sys, time
threads = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 1
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(threads)  # before torch loads
import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("threads", type=int)
ap.add_argument("--steps", type=int, default=2000)
ap.add_argument("--seed", type=int, default=1337)
ap.add_argument("--gen", type=int, default=200)
ap.add_argument("--prompt", default="In the beginning")
opts = ap.parse_args()
torch.set_num_threads(threads)

cfg = dict(block=64, batch=12, n_layer=4, n_head=4, n_embd=128, lr=1e-3, min_lr=1e-4, warmup=100,
           decay_steps=2000, betas=(0.9, 0.99), weight_decay=0.1, clip=1.0, eval_batches=20)
B, T = cfg["batch"], cfg["block"]

# ---------------------------------------------------------------- data
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(os.environ.get("MG_DATA_DIR", os.path.join(here, "..", "data")), "bible", "kjv.txt")
text = open(path, "rb").read()
chars = sorted(set(text))
vocab = len(chars)
lut = bytes(range(256)).maketrans(bytes(chars), bytes(range(vocab)))
ids = text.translate(lut)
n_train = math.floor(len(ids) * 0.9)
split = {"train": ids[:n_train], "val": ids[n_train:]}

def batches(which, seed):
    data, s = split[which], seed
    def draw():
        nonlocal s
        xs, ys = [], []
        for _ in range(B):
            s = (s * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
            o = (s >> 17) % (len(data) - T)
            xs.append(data[o:o + T]); ys.append(data[o + 1:o + T + 1])
        to = lambda rows: torch.frombuffer(bytearray(b"".join(rows)), dtype=torch.uint8).view(B, T).long()
        return to(xs), to(ys)
    return draw

# ---------------------------------------------------------------- model
class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head = c["n_head"]
        self.qkv = nn.Linear(c["n_embd"], 3 * c["n_embd"], bias=False)
        self.proj = nn.Linear(c["n_embd"], c["n_embd"], bias=False)

    def forward(self, x, cache=None, pos=None):
        b, t, C = x.shape
        heads = lambda z: z.view(b, t, self.n_head, C // self.n_head).transpose(1, 2)
        q, k, v = (heads(z) for z in self.qkv(x).split(C, dim=-1))
        if cache is not None:  # one token at position pos: write it, attend to 0..pos
            cache[0][:, :, pos] = k[:, :, 0]
            cache[1][:, :, pos] = v[:, :, 0]
            k, v = cache[0][:, :, :pos + 1], cache[1][:, :, :pos + 1]
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
            att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).tril().logical_not(), float("-inf"))
        y = att.softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, C))

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(c["n_embd"]), Attention(c), nn.LayerNorm(c["n_embd"])
        self.fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=False)
        self.fc_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=False)

    def forward(self, x, cache=None, pos=None):
        x = x + self.attn(self.ln1(x), cache, pos)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))  # moongrad's gelu is the tanh form

class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c["n_embd"]), nn.Embedding(c["block"], c["n_embd"])
        self.blocks = nn.ModuleList([Block(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(c["n_embd"])
        for p in (self.wte.weight, self.wpe.weight): nn.init.normal_(p, 0.0, 0.02)
        for b in self.blocks:
            nn.init.normal_(b.attn.qkv.weight, 0.0, 0.02); nn.init.normal_(b.fc.weight, 0.0, 0.02)
            nn.init.normal_(b.attn.proj.weight, 0.0, 0.02 / math.sqrt(2 * c["n_layer"]))
            nn.init.normal_(b.fc_proj.weight, 0.0, 0.02 / math.sqrt(2 * c["n_layer"]))

    def forward(self, idx, caches=None, pos=None):
        p = torch.arange(idx.shape[1]) if pos is None else torch.tensor([pos])
        x = self.wte(idx) + self.wpe(p)
        for i, b in enumerate(self.blocks): x = b(x, caches and caches[i], pos)
        return self.ln_f(x) @ self.wte.weight.T  # tied head

torch.manual_seed(opts.seed)
model = GPT(cfg)
params = list(model.parameters())
decay = [p for p in params if p.dim() >= 2]
no_decay = [p for p in params if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                         {"params": no_decay, "weight_decay": 0.0}], lr=cfg["lr"], betas=cfg["betas"])

def lr_at(it):
    if it < cfg["warmup"]: return cfg["lr"] * (it + 1) / (cfg["warmup"] + 1)
    if it > cfg["decay_steps"]: return cfg["min_lr"]
    r = (it - cfg["warmup"]) / (cfg["decay_steps"] - cfg["warmup"])
    return cfg["min_lr"] + 0.5 * (1 + math.cos(math.pi * r)) * (cfg["lr"] - cfg["min_lr"])

def loss_of(m, x, y): return F.cross_entropy(m(x).view(-1, vocab), y.view(-1))

# ---------------------------------------------------------------- training
sample, times = batches("train", opts.seed), []
model.train()
for it in range(opts.steps):
    for g in opt.param_groups: g["lr"] = lr_at(it)
    x, y = sample()
    t0 = time.perf_counter()
    loss = loss_of(model, x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, cfg["clip"])
    opt.step()
    loss = loss.item()
    if it > 3: times.append(time.perf_counter() - t0)
    if (it + 1) % max(1, opts.steps // 10) == 0: print(f"step {it + 1}/{opts.steps} loss {loss:.4f}", flush=True)
times.sort()
step_ms = times[(len(times) - 1) // 2] * 1e3 if times else float("nan")

@torch.no_grad()
def evaluate(which):
    model.eval()
    draw = batches(which, opts.seed + 1000)
    return sum(loss_of(model, *draw()).item() for _ in range(cfg["eval_batches"])) / cfg["eval_batches"]
train_loss, val_loss = evaluate("train"), evaluate("val")
print(f"train loss {train_loss:.4f}, val loss {val_loss:.4f}; a step {step_ms:.2f} ms (median)")

# ---------------------------------------------------------------- generation
@torch.no_grad()
def generate():
    hd = cfg["n_embd"] // cfg["n_head"]
    caches = [(torch.zeros(1, cfg["n_head"], T, hd), torch.zeros(1, cfg["n_head"], T, hd)) for _ in model.blocks]
    feed = lambda tok, pos: model(torch.tensor([[tok]]), caches, pos)[0, -1].argmax().item()
    seq, pos, nxt, warm, t0 = list(opts.prompt.encode().translate(lut)), 0, None, 3, None
    for tok in seq:
        nxt = feed(tok, pos); pos += 1
    for generated in range(1, opts.gen + 1):
        seq.append(nxt)
        if generated == warm: t0 = time.perf_counter()
        if pos == T:  # the cache is full: the last block/2 characters again from position 0
            pos = 0
            for tok in seq[-T // 2 - 1:-1]:
                feed(tok, pos); pos += 1
        nxt = feed(seq[-1], pos); pos += 1
    rate = (opts.gen - warm) / (time.perf_counter() - t0)
    return bytes(chars[i] for i in seq).decode(), rate
out, gen_tok_s = generate()
print(repr(out))
print(f"gpt: steps={opts.steps} step_ms={step_ms:.2f} train_loss={train_loss:.4f} val_loss={val_loss:.4f} gen_tok_s={gen_tok_s:.1f}")
