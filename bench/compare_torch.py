#!/usr/bin/env python3
"""Runs the rows of a `kiln bench` JSON file with PyTorch, eager and torch.compile, on the
same machine and device, and merges `torch_eager_ms` and `torch_compile_ms` into it, so
that every ratio comes from one machine. A run of `kiln bench --precision=bf16|f16` (the
JSON's `precision`) is compared with PyTorch under `torch.autocast` in that precision, the
weights and inputs f32 as kiln's are.

    kiln bench [--suite=fusion|models] --json kiln.json      # first, on this machine
    python3 bench/compare_torch.py kiln.json [-o merged.json] [--device cpu|cuda]

Each row is rebuilt from the argument shapes kiln recorded in the JSON (`arguments`; the
transformer rows' head count from their `description`), in f32 with TF32 off on CUDA
(kiln's f32 matmuls are full f32), timed like kiln times it (a warm-up, then the median
of `repeat` runs), with as many threads as kiln used. torch.compile's compile time is in
the warm-up, not the median. A row torch.compile cannot handle gets
`torch_compile_ms: null` and the reason in `torch_compile_error`. On CUDA each row also
gets `torch_eager_kernel_ms` and `torch_compile_kernel_ms`: the median over a few runs
under torch.profiler of the sum of the GPU's activity times (kernels, copies, memsets),
beside the wall-clock times, which also count PyTorch's CPU-side launch overhead.

The models suite's rows: `gpt2_block` (GPT-2 small's pre-norm block, causal attention,
tanh GELU) and `bert_layer` (BERT-base's post-norm encoder layer, erf GELU, LayerNorm eps
1e-12, an int mask [B,T] of which 0 marks padding, drawn like kiln's inputs as r % 10)
and `llama_block` (a LLaMA-style block as Hugging Face's LlamaDecoderLayer: RMSNorm, rotary
embeddings, grouped-query heads by repeat_interleave, SwiGLU, no biases) run forward under
no_grad; `gpt2_block_train` and `llama_block_train` (mse_loss against a target, backward,
torch.optim.AdamW with lr 1e-3 and weight decay 0.01, its default implementation) and
`mlp_train` / `mlp_train_step` (cross-entropy, backward, torch.optim.Adam, lr 1e-3) time
one whole step each; `resnet18` (torchvision's ResNet-18, written out here without
torchvision, in eval mode) runs forward under no_grad, and `cnn_train` (the Fashion-MNIST
CNN of examples/fashion_mnist.cc: cross-entropy, torch.optim.Adam, lr 1e-3) one whole
step. Attention is written as kiln's rows compute it (q kᵀ scaled, masked
with -1e9, softmax, times v); `--attention=sdpa` uses F.scaled_dot_product_attention
instead, PyTorch's fused kernels, as a PyTorch user would write it today.

The PyTorch rows run after kiln's, not interleaved with them: compare ratios from one
file, and rerun both where the machine is noisy. On the CPU, PyTorch allocates every
result afresh (256 MiB per tensor at full size) and the page faults of that memory are
part of its times, as they are for a user; kiln writes into an arena it reuses. PyTorch's
matmuls run on its own oneDNN/MKL, kiln's on the OpenBLAS named in `machine.blas`.
"""
import argparse
import json
import math
import re
import statistics
import sys
import time

ROWS = {"coscos", "chain2", "chain4", "chain8", "chain16", "chain8_bf16", "bias_gelu", "softmax_256", "softmax_4096",
        "softmax_32768", "softmax_4096_bf16", "layernorm", "residual_layernorm", "mlp_forward", "mlp_train_step",
        "gpt2_block", "gpt2_block_train", "bert_layer", "llama_block", "llama_block_train", "mlp_train", "resnet18",
        "cnn_train"}

# What AdamW's defaults are in PyTorch, and what kiln's gpt2_block_train uses.
ADAMW_LR, ADAMW_WEIGHT_DECAY = 1e-3, 0.01
# kiln's rows add this to masked scores rather than -inf (a fully masked row stays finite).
MASKED = -1e9


def fail(message):
    print("compare_torch.py: error: " + message, file=sys.stderr)
    sys.exit(1)


def load_kiln_json(path):
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail("cannot read %s: %s" % (path, e))
    if not isinstance(result, dict) or "rows" not in result or "machine" not in result:
        fail("%s is not a kiln bench JSON file (no 'machine' and 'rows')" % path)
    for row in result["rows"]:
        if "arguments" not in row:
            fail("%s: row %s has no 'arguments'; rerun kiln bench with this version" % (path, row.get("name")))
    return result


def heads_of(row):
    """The head count of a transformer row, from its description ("..., 12 heads, ...")."""
    found = re.search(r"(\d+) heads", row.get("description", ""))
    if not found:
        fail("row %s: its description names no head count ('N heads')" % row["name"])
    return int(found.group(1))


def attention(torch, q, k, v, heads, sdpa, hidden=None, bias=None):
    """softmax(q kᵀ / sqrt(D), masked) v over the heads of [B,T,C] q, k, v; `hidden` is a
    bool [T,T] of the scores to mask (causal), `bias` an additive [B,1,1,T] (padding)."""
    F = torch.nn.functional
    batch, seq, width = q.shape
    q, k, v = (t.view(batch, seq, heads, width // heads).transpose(1, 2) for t in (q, k, v))
    if sdpa:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=hidden is not None)
    else:
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(width // heads))
        if hidden is not None:
            # The fill is no f16 value (autocast's product is f16): mask in f32, where kiln's
            # graph masks too (autocast's softmax computes in f32 either way).
            if scores.dtype == torch.float16:
                scores = scores.float()
            scores = scores.masked_fill(hidden, MASKED)
        if bias is not None:
            scores = scores + bias
        y = torch.softmax(scores, dim=-1) @ v
    return y.transpose(1, 2).reshape(batch, seq, width)


def init_dense(torch, module):
    """Linear weights N(0, 0.02) and zero biases, as kiln's transformer rows start."""
    for m in module.modules():
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, 0.0, 0.02)
            torch.nn.init.zeros_(m.bias)
    return module


def gpt2_block(torch, seq, width, heads, sdpa):
    """GPT-2 small's block: pre-norm, causal self-attention with a fused qkv, tanh GELU."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(width, eps=1e-5), nn.LayerNorm(width, eps=1e-5)
            self.c_attn, self.attn_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.c_fc, self.mlp_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            # Key j is hidden from query i when j > i.
            self.register_buffer("hidden", torch.ones(seq, seq, dtype=torch.bool).triu(1))

        def forward(self, x):
            q, k, v = self.c_attn(self.ln_1(x)).split(width, dim=2)
            x = x + self.attn_proj(attention(torch, q, k, v, heads, sdpa, hidden=self.hidden))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
    return init_dense(torch, Block())


def bert_layer(torch, width, heads, sdpa):
    """BERT-base's encoder layer: post-norm, separate q/k/v, erf GELU, LayerNorm eps 1e-12."""
    nn, F = torch.nn, torch.nn.functional

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.query, self.key, self.value = (nn.Linear(width, width) for _ in range(3))
            self.attn_out, self.attn_norm = nn.Linear(width, width), nn.LayerNorm(width, eps=1e-12)
            self.intermediate, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            self.out_norm = nn.LayerNorm(width, eps=1e-12)

        def forward(self, x, attention_mask):
            # Hugging Face's extended attention mask: additive, very negative on padding.
            bias = ((attention_mask == 0).to(x.dtype) * MASKED)[:, None, None, :]
            y = attention(torch, self.query(x), self.key(x), self.value(x), heads, sdpa, bias=bias)
            h = self.attn_norm(x + self.attn_out(y))
            return self.out_norm(h + self.out(F.gelu(self.intermediate(h))))
    return init_dense(torch, Layer())


def llama_sizes(row):
    """(heads, key-value heads, SwiGLU hidden, RMSNorm eps, rotary base) of a LLaMA row, from its description."""
    text = row.get("description", "")
    found = re.search(r"eps ([0-9.e+-]+);.*base ([0-9.e+-]+)\), (\d+) heads, (\d+) key-value heads; SwiGLU MLP \d+-(\d+)-",
                      text)
    if not found:
        fail("row %s: its description does not give the LLaMA sizes" % row["name"])
    eps, base, heads, kv_heads, hidden = found.groups()
    return int(heads), int(kv_heads), int(hidden), float(eps), float(base)


def llama_block(torch, seq, width, sizes, sdpa):
    """A LLaMA-style decoder block as Hugging Face's LlamaDecoderLayer: pre-RMSNorm, causal
    attention with rotary embeddings and grouped-query heads (repeat_kv), SwiGLU, no biases."""
    nn, F = torch.nn, torch.nn.functional
    heads, kv_heads, hidden, eps, base = sizes
    d = width // heads

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(width))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight

    def rotate_half(x):
        return torch.cat((-x[..., d // 2:], x[..., :d // 2]), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.o_proj = nn.Linear(width, width, bias=False), nn.Linear(width, width, bias=False)
            self.k_proj = nn.Linear(width, kv_heads * d, bias=False)
            self.v_proj = nn.Linear(width, kv_heads * d, bias=False)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj, self.up_proj = (nn.Linear(width, hidden, bias=False) for _ in range(2))
            self.down_proj = nn.Linear(hidden, width, bias=False)

        def forward(self, h):
            return self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    class Block(nn.Module):
        """Its parameters are named as Hugging Face's and kiln's row name them."""
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
            self.self_attn, self.mlp = Attention(), MLP()
            inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
            angles = torch.outer(torch.arange(seq, dtype=torch.float64), inv_freq).repeat(1, 2)
            self.register_buffer("cos", angles.cos().float(), persistent=False)
            self.register_buffer("sin", angles.sin().float(), persistent=False)
            self.register_buffer("hidden", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False)

        def heads(self, t, n):
            return t.view(t.shape[0], seq, n, d).transpose(1, 2)

        def forward(self, x):
            batch, a = x.shape[0], self.self_attn
            h = self.input_layernorm(x)
            q, k, v = self.heads(a.q_proj(h), heads), self.heads(a.k_proj(h), kv_heads), self.heads(a.v_proj(h), kv_heads)
            q, k = (t * self.cos + rotate_half(t) * self.sin for t in (q, k))
            k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
                if scores.dtype == torch.float16:
                    scores = scores.float()
                y = torch.softmax(scores.masked_fill(self.hidden, MASKED), dim=-1) @ v
            x = x + a.o_proj(y.transpose(1, 2).reshape(batch, seq, width))
            return x + self.mlp(self.post_attention_layernorm(x))

    block = Block()
    for m in block.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
    return block


def resnet18(torch):
    """torchvision's ResNet-18 (BasicBlocks, 1000 classes), without torchvision."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, inp, out, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(out)
            self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(out)
            self.downsample = None
            if stride != 1 or inp != out:
                self.downsample = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))

        def forward(self, x):
            shortcut = x if self.downsample is None else self.downsample(x)
            return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + shortcut)

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    width = 64
    for layer in range(4):
        out = 64 << layer
        layers += [Block(width, out, 2 if layer > 0 else 1), Block(out, out, 1)]
        width = out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers).eval()


def fashion_cnn(torch):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))


def no_grad(torch, model):
    def forward(*inputs):
        with torch.no_grad():
            return model(*inputs)
    return forward


def train_step(model, optimizer, loss_of):
    """One whole step: forward, the loss, backward, the optimizer's update."""
    def step(*inputs):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(model, *inputs)
        loss.backward()
        optimizer.step()
        return loss
    return step


def make_row(torch, row, device, sdpa=False):
    """The function a row computes and its inputs, from kiln's argument shapes."""
    F = torch.nn.functional
    name = row["name"]
    shape = {a["name"]: a["shape"] for a in row["arguments"]}

    def rand(*dims):
        return torch.rand(*dims, device=device) * 2 - 1

    if name == "coscos":
        return (lambda x: torch.cos(torch.cos(x))), [rand(*shape["x"])]
    # A _bf16 row takes and returns bf16 and computes in f32 between (kiln's casts).
    bf16 = name.endswith("_bf16")
    if name.startswith("chain"):
        n = int(name[len("chain"):].split("_")[0])

        def chain(x):
            x = x.float()
            for k in range(n):  # the same ops and constants as kiln's rows
                x = [lambda v: v + 0.5, lambda v: v * 1.5, lambda v: v - 0.25, lambda v: v * 0.75][k % 4](x)
            return x.bfloat16() if bf16 else x
        x = rand(*shape["x"])
        return chain, [x.bfloat16() if bf16 else x]
    if name == "bias_gelu":
        return (lambda x, b: F.gelu(x + b)), [rand(*shape["x"]), rand(*shape["b"])]
    if name.startswith("softmax_"):
        if bf16:
            return (lambda x: torch.softmax(x.float(), dim=-1).bfloat16()), [rand(*shape["x"]).bfloat16()]
        return (lambda x: torch.softmax(x, dim=-1)), [rand(*shape["x"])]
    if name == "layernorm":
        width = shape["x"][-1]
        return (lambda x, s, b: F.layer_norm(x, (width,), s, b, 1e-5)), [rand(*shape["x"]), rand(width), rand(width)]
    if name == "residual_layernorm":
        width = shape["x"][-1]

        def residual(x, r, s, b):
            h = x + r
            return h, F.layer_norm(h, (width,), s, b, 1e-5)
        return residual, [rand(*shape["x"]), rand(*shape["r"]), rand(width), rand(width)]
    if name in ("mlp_forward", "mlp_train_step", "mlp_train"):
        batch = shape["x"][0]
        torch.manual_seed(7)
        model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10)).to(device)
        x = rand(batch, 784)
        if name == "mlp_forward":
            return no_grad(torch, model), [x]
        labels = torch.randint(0, 10, (batch,), device=device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        return train_step(model, optimizer, lambda m, x, labels: F.cross_entropy(m(x), labels)), [x, labels]
    blocks = {"gpt2_block": (2, lambda seq, width: gpt2_block(torch, seq, width, heads_of(row), sdpa)),
              "llama_block": (5, lambda seq, width: llama_block(torch, seq, width, llama_sizes(row), sdpa))}
    if name.removesuffix("_train") in blocks:
        seed, build = blocks[name.removesuffix("_train")]
        batch, seq, width = shape["x"]
        torch.manual_seed(seed)
        model = build(seq, width).to(device)
        x = rand(batch, seq, width)
        if not name.endswith("_train"):
            return no_grad(torch, model), [x]
        # kiln's rows: one AdamW step on the mean squared error against a target.
        optimizer = torch.optim.AdamW(model.parameters(), lr=ADAMW_LR, weight_decay=ADAMW_WEIGHT_DECAY)
        step = train_step(model, optimizer, lambda m, x, target: F.mse_loss(m(x), target))
        return step, [x, rand(*shape["target"])]
    if name == "bert_layer":
        batch, seq, width = shape["x"]
        torch.manual_seed(3)
        model = bert_layer(torch, width, heads_of(row), sdpa).to(device)
        # 0 marks padding; kiln bench fills integer inputs with r % 10 alike.
        mask = torch.randint(0, 10, tuple(shape["attention_mask"]), dtype=torch.int32, device=device)
        return no_grad(torch, model), [rand(batch, seq, width), mask]
    if name == "resnet18":
        torch.manual_seed(18)
        model = resnet18(torch).to(device)
        return no_grad(torch, model), [rand(*shape["x"])]
    if name == "cnn_train":
        torch.manual_seed(1)
        model = fashion_cnn(torch).to(device)
        labels = torch.randint(0, 10, tuple(shape["labels"]), device=device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        return train_step(model, optimizer, lambda m, x, labels: F.cross_entropy(m(x), labels)), [rand(*shape["x"]),
                                                                                                   labels]
    raise KeyError(name)


def autocast(torch, fn, device, precision):
    """fn under torch.autocast in bf16 or f16, as a kiln row compiled with --precision runs:
    matmuls in the low precision with f32 accumulation, the rest in f32."""
    if precision == "f32":
        return fn
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[precision]

    def run(*args):
        with torch.autocast(device_type=device, dtype=dtype):
            return fn(*args)
    return run


def median_ms(torch, fn, inputs, repeat, device):
    def once():
        start = time.perf_counter()
        fn(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3
    once()  # warm-up (and, for torch.compile, compilation)
    once()
    return statistics.median(once() for _ in range(repeat))


def kernel_ms(torch, fn, inputs, runs=5):
    """The median over `runs` profiled runs (after median_ms's warm-up) of the sum of the
    GPU's activity times in one run, in ms."""
    from torch.profiler import ProfilerActivity, profile
    sums = []
    for _ in range(runs):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn(*inputs)
            torch.cuda.synchronize()
        sums.append(sum(e.time_range.elapsed_us() for e in prof.events()
                        if e.device_type == torch.autograd.DeviceType.CUDA) / 1e3)
    return statistics.median(sums)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kiln_json", help="a JSON file written by kiln bench --json")
    parser.add_argument("-o", "--output", help="where to write the merged JSON (default: over the input)")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: the JSON's target")
    parser.add_argument("--repeat", type=int, help="timed runs per row (default: the JSON's)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--attention", choices=["math", "sdpa"], default="math",
                        help="the transformer rows' attention: kiln's ops (default), or F.scaled_dot_product_attention")
    options = parser.parse_args()

    result = load_kiln_json(options.kiln_json)
    device = options.device or ("cuda" if result.get("target") == "cuda" else "cpu")
    repeat = options.repeat or result.get("repeat", 20)
    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed (pip install torch)")
    if device == "cuda" and not torch.cuda.is_available():
        fail("--device=cuda, but PyTorch sees no CUDA device")
    if device == "cpu":
        torch.set_num_threads(result.get("threads") or result["machine"]["cores"])
    # Full f32, as kiln computes by default: TF32 would round matmul inputs to 10 mantissa
    # bits. A kiln run with --allow-tf32 is compared with PyTorch's "high" precision alike.
    tf32 = bool(result.get("allow_tf32"))
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    sdpa = options.attention == "sdpa"
    precision = result.get("precision", "f32")
    if precision not in ("f32", "bf16", "f16"):
        fail("%s: unknown precision '%s'" % (options.kiln_json, precision))
    result["torch"] = {"version": torch.__version__, "device": device, "threads": torch.get_num_threads(), "repeat": repeat,
                       "mkl": torch.backends.mkl.is_available(), "mkldnn": torch.backends.mkldnn.is_available(),
                       "tf32": tf32, "attention": options.attention,
                       "autocast": None if precision == "f32" else precision}
    kernels = device == "cuda"

    print("%-20s %12s %14s %16s %10s %10s%s" % ("row", "kiln ms", "torch eager ms", "torch.compile ms", "vs eager",
                                               "vs compile", " %16s %18s" % ("eager kernel ms", "compile kernel ms")
                                               if kernels else ""))
    for row in result["rows"]:
        name = row["name"]
        if name not in ROWS:
            print("%-20s (no PyTorch version of this row)" % name, file=sys.stderr)
            continue
        print("%s: eager" % name, file=sys.stderr)
        fn, inputs = make_row(torch, row, device, sdpa)
        fn = autocast(torch, fn, device, precision)
        row["torch_eager_ms"] = median_ms(torch, fn, inputs, repeat, device)
        if kernels:
            row["torch_eager_kernel_ms"] = kernel_ms(torch, fn, inputs)
        row["torch_compile_ms"] = None
        if kernels:
            row["torch_compile_kernel_ms"] = None
        if not options.no_compile:
            print("%s: torch.compile" % name, file=sys.stderr)
            fn, inputs = make_row(torch, row, device, sdpa)
            fn = autocast(torch, fn, device, precision)
            try:
                compiled_fn = torch.compile(fn)
                row["torch_compile_ms"] = median_ms(torch, compiled_fn, inputs, repeat, device)
                if kernels:
                    row["torch_compile_kernel_ms"] = kernel_ms(torch, compiled_fn, inputs)
            except Exception as e:  # a backend failure is a result to report, not a crash
                row["torch_compile_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        eager, compiled, kiln = row["torch_eager_ms"], row["torch_compile_ms"], row["fused_ms"]
        line = "%-20s %12.3f %14.3f %16s %9.2fx %10s" % (
            name, kiln, eager, "%.3f" % compiled if compiled else "-", eager / kiln,
            "%.2fx" % (compiled / kiln) if compiled else "-")
        if kernels:
            compiled_kernels = row["torch_compile_kernel_ms"]
            line += " %16.3f %18s" % (row["torch_eager_kernel_ms"],
                                      "%.3f" % compiled_kernels if compiled_kernels is not None else "-")
        print(line)

    with open(options.output or options.kiln_json, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
