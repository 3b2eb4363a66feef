"""GPT training-step speed (nanoGPT shape): ember vs PyTorch eager, one library per process.

Usage: python benchmarks/gpt_step.py --lib ember|torch [--attn manual|sdpa] [--steps 40]
                                     [--warmup 15] [--threads N] [--compile]

Model: 4 layers, width 128, 4 heads, block 64, vocabulary 65, batch 16, exact GELU MLP (4x),
pre-LayerNorm, AdamW(lr 3e-4) and ``clip_grad_norm_(1.0)``; one step = zero_grad, forward,
cross-entropy, backward, clip, step. ``--attn sdpa`` uses ``F.scaled_dot_product_attention``
(causal), ``manual`` the masked-softmax form. Each library runs with its defaults (threads,
kernels) unless ``--threads`` sets its thread count (``set_num_threads``: on a machine other
processes load, spinning BLAS threads of either library make the default figures mostly
noise). ``--compile`` runs the whole step through ``ember.compile`` / ``torch.compile`` (the
first calls' wall time printed). Prints the median and minimum step in ms, wall clock and the
process's CPU time (on a shared machine the CPU time is the steadier figure at one thread).
Nothing is asserted.
"""
import argparse
import math
import statistics
import time

import numpy as np


def build(lib, attn):
    if lib == "torch":
        import torch as L
        import torch.nn as nn
        import torch.nn.functional as F
    else:
        import ember as L
        import ember.nn as nn
        import ember.nn.functional as F
    n_layer, n_embd, n_head, block, vocab = 4, 128, 4, 64, 65

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(n_embd)
            self.attn = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)
            self.ln2 = nn.LayerNorm(n_embd)
            self.fc = nn.Linear(n_embd, 4 * n_embd)
            self.fc2 = nn.Linear(4 * n_embd, n_embd)
            self.register_buffer("bias", L.tril(L.ones(block, block)).view(1, 1, block, block))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.attn(self.ln1(x)).split(n_embd, dim=2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            if attn == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
                a = a.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                y = F.softmax(a, dim=-1) @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx, targets):
            B, T = idx.shape
            x = self.wte(idx) + self.wpe(L.arange(T))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))

    L.manual_seed(0)
    model = GPT()
    opt = L.optim.AdamW(model.parameters(), lr=3e-4)
    rng = np.random.default_rng(0)
    idx = L.tensor(rng.integers(0, vocab, (16, block)))
    tgt = L.tensor(rng.integers(0, vocab, (16, block)))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", choices=("ember", "torch"), required=True)
    p.add_argument("--attn", choices=("manual", "sdpa"), default="manual")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--compile", action="store_true")
    a = p.parse_args()
    if a.threads:
        if a.lib == "torch":
            import torch
            torch.set_num_threads(a.threads)
        else:
            import ember
            ember.set_num_threads(a.threads)
    step = build(a.lib, a.attn)
    if a.compile:
        L = __import__(a.lib)
        step = L.compile(step)
        t0 = time.perf_counter()
        for _ in range(3):
            step()
        print(f"first 3 calls (compiling): {time.perf_counter() - t0:.2f} s wall")
    for _ in range(a.warmup):
        step()
    if a.lib == "ember":
        # kernels first met after Numba's import (about a second, on the compile thread)
        # queue their compiles then: wait until a few steps queue nothing new
        from ember.kernels.runtime import compiler
        for _ in range(3):
            compiler.wait_compiles()
            for _ in range(3):
                step()
    times, cpu = [], []
    for _ in range(a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    print(f"{a.lib}{' compiled' if a.compile else ''} {a.attn}"
          f"{' threads=%d' % a.threads if a.threads else ''}: median {statistics.median(times):.1f} ms, "
          f"min {min(times):.1f} ms over {a.steps} steps; CPU time (all threads) median "
          f"{statistics.median(cpu):.1f} ms, min {min(cpu):.1f} ms")


if __name__ == "__main__":
    main()
