"""Sequence architectures as paper implementations write them: a Mamba block (causal depthwise
F.conv1d, softplus dt, A = -exp(A_log), an einsum selective scan) and the Mamba-2 chunked SSD
scan built on a segment-sum (cumsum, masked_fill -inf, exp), an S4D convolution kernel from
complex parameters (view_as_complex, FFT convolution), RWKV token shift (nn.ZeroPad2d with a
negative pad) and its WKV recurrence, RetNet decay masks (parallel vs recurrent), rotary
embeddings written with rotate_half and with torch.polar / view_as_complex (with gradients),
ALiBi slopes, Perceiver cross-attention to learned latents, and a mixture-of-experts layer
(softmax top-k routing, one_hot expert masks, index_add_, bincount, capacity via cumsum,
load-balancing and z losses)."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(7)


def randn(*shape, scale=1.0):
    return torch.from_numpy((scale * rng.standard_normal(shape)).astype(np.float32))


def numpy_init(model, scale=0.2):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.is_complex():
                p.copy_(torch.complex(randn(*p.shape, scale=scale), randn(*p.shape, scale=scale)))
            elif name.endswith("norm.weight"):
                p.copy_(1 + randn(*p.shape, scale=0.05))
            elif name.endswith("A_log") or name.endswith("log_dt") or name.startswith("time_"):
                continue
            else:
                p.copy_(randn(*p.shape, scale=scale))


def fmt(*values):
    return " ".join(f"{v:.6f}" for v in values)


# ------------------------------------------------------------------ Mamba ----
class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MambaBlock(nn.Module):
    def __init__(self, d_model, d_state=4, d_conv=4, expand=2, dt_rank="auto", dt_min=0.001, dt_max=0.1):
        super().__init__()
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(d_model / 16) if dt_rank == "auto" else dt_rank
        self.d_conv = d_conv
        self.in_proj = nn.Linear(d_model, self.d_inner * 2, bias=False)
        self.conv1d = nn.Conv1d(in_channels=self.d_inner, out_channels=self.d_inner, bias=True,
                                kernel_size=d_conv, groups=self.d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + d_state * 2, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True)
        dt_init_std = self.dt_rank ** -0.5
        nn.init.uniform_(self.dt_proj.weight, -dt_init_std, dt_init_std)
        dt = torch.exp(torch.from_numpy(rng.random(self.d_inner).astype(np.float32))
                       * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp(min=1e-4)
        inv_dt = dt + torch.log(-torch.expm1(-dt))
        A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(self.d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)
        self.norm = RMSNorm(d_model)
        self.register_buffer("inv_dt", inv_dt)

    def forward(self, x):
        (b, l, d) = x.shape
        x_and_res = self.in_proj(self.norm(x))
        (x, res) = x_and_res.split(split_size=[self.d_inner, self.d_inner], dim=-1)
        x = x.transpose(1, 2)                                   # rearrange 'b l d_in -> b d_in l'
        x = self.conv1d(x)[:, :, :l]
        x = x.transpose(1, 2)
        x = F.silu(x)
        y = self.ssm(x)
        y = y * F.silu(res)
        return self.out_proj(y)

    def ssm(self, x):
        (d_in, n) = self.A_log.shape
        A = -torch.exp(self.A_log.float())
        D = self.D.float()
        x_dbl = self.x_proj(x)
        (delta, B, C) = x_dbl.split(split_size=[self.dt_rank, n, n], dim=-1)
        delta = F.softplus(self.dt_proj(delta) + self.inv_dt)
        return self.selective_scan(x, delta, A, B, C, D)

    def selective_scan(self, u, delta, A, B, C, D):
        (b, l, d_in) = u.shape
        n = A.shape[1]
        deltaA = torch.exp(torch.einsum('b l d, d n -> b l d n', delta, A))
        deltaB_u = torch.einsum('b l d, b l n, b l d -> b l d n', delta, B, u)
        x = torch.zeros((b, d_in, n), device=deltaA.device)
        ys = []
        for i in range(l):
            x = deltaA[:, i] * x + deltaB_u[:, i]
            y = torch.einsum('b d n, b n -> b d', x, C[:, i, :])
            ys.append(y)
        y = torch.stack(ys, dim=1)
        return y + u * D


def segsum(x):
    """Stable segment sum: exp(segsum(A)) is the 1-semiseparable decay matrix."""
    T = x.size(-1)
    x = x[..., None].expand(*x.shape, T)                    # repeat '... d -> ... d e'
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    x_segsum = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(T, T, dtype=bool), diagonal=0)
    x_segsum = x_segsum.masked_fill(~mask, -torch.inf)
    return x_segsum


def ssd_minimal_discrete(X, A, B, C, block_len, initial_states=None):
    """X: (b, l, h, p), A: (b, l, h), B, C: (b, l, h, n)."""
    X, A, B, C = [x.reshape(x.shape[0], x.shape[1] // block_len, block_len, *x.shape[2:])
                  for x in (X, A, B, C)]                   # 'b (c l) ... -> b c l ...'
    A = A.permute(0, 3, 1, 2)                                # 'b c l h -> b h c l'
    A_cumsum = torch.cumsum(A, dim=-1)
    L = torch.exp(segsum(A))
    Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, X)
    decay_states = torch.exp((A_cumsum[:, :, :, -1:] - A_cumsum))
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_states, X)
    if initial_states is None:
        initial_states = torch.zeros_like(states[:, :1])
    states = torch.cat([initial_states, states], dim=1)
    decay_chunk = torch.exp(segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
    new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    states, final_state = new_states[:, :-1], new_states[:, -1]
    state_decay_out = torch.exp(A_cumsum)
    Y_off = torch.einsum('bclhn,bchpn,bhcl->bclhp', C, states, state_decay_out)
    Y = (Y_diag + Y_off).flatten(1, 2)                       # 'b c l h p -> b (c l) h p'
    return Y, final_state


def ssd_sequential(X, A, B, C):
    b, l, h, p = X.shape
    state = X.new_zeros(b, h, p, B.shape[-1])
    ys = []
    for t in range(l):
        state = state * A[:, t].exp()[..., None, None] + torch.einsum("bhp,bhn->bhpn", X[:, t], B[:, t])
        ys.append(torch.einsum("bhpn,bhn->bhp", state, C[:, t]))
    return torch.stack(ys, 1), state


# -------------------------------------------------------------------- S4D ----
class S4DKernel(nn.Module):
    def __init__(self, d_model, N=8, dt_min=0.001, dt_max=0.1):
        super().__init__()
        H = d_model
        log_dt = torch.from_numpy(rng.random(H).astype(np.float32)) * (
            math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        C = torch.randn(H, N // 2, dtype=torch.cfloat)
        self.C = nn.Parameter(torch.view_as_real(C))
        self.register_parameter("log_dt", nn.Parameter(log_dt))
        log_A_real = torch.log(0.5 * torch.ones(H, N // 2))
        A_imag = math.pi * torch.arange(N // 2).repeat(H, 1)
        self.log_A_real = nn.Parameter(log_A_real)
        self.register_buffer("A_imag", A_imag)

    def forward(self, L):
        dt = torch.exp(self.log_dt)
        C = torch.view_as_complex(self.C)
        A = -torch.exp(self.log_A_real) + 1j * self.A_imag
        dtA = A * dt.unsqueeze(-1)
        K = dtA.unsqueeze(-1) * torch.arange(L, device=A.device)
        C = C * (torch.exp(dtA) - 1.) / A
        K = 2 * torch.einsum('hn, hnl -> hl', C, torch.exp(K)).real
        return K


class S4D(nn.Module):
    def __init__(self, d_model, d_state=8):
        super().__init__()
        self.h = d_model
        self.D = nn.Parameter(torch.randn(self.h))
        self.kernel = S4DKernel(self.h, N=d_state)
        self.activation = nn.GELU()
        self.output_linear = nn.Sequential(nn.Conv1d(self.h, 2 * self.h, kernel_size=1), nn.GLU(dim=-2))

    def forward(self, u):
        L = u.size(-1)
        k = self.kernel(L=L)
        k_f = torch.fft.rfft(k, n=2 * L)
        u_f = torch.fft.rfft(u, n=2 * L)
        y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]
        y = y + u * self.D.unsqueeze(-1)
        return self.output_linear(self.activation(y))


# ------------------------------------------------------------------- RWKV ----
class RWKV_TimeMix(nn.Module):
    def __init__(self, n_embd, layer_id=0, n_layer=2):
        super().__init__()
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        with torch.no_grad():
            ratio_0_to_1 = layer_id / (n_layer - 1)
            ratio_1_to_almost0 = 1.0 - (layer_id / n_layer)
            decay_speed = torch.ones(n_embd)
            for h in range(n_embd):
                decay_speed[h] = -5 + 8 * (h / (n_embd - 1)) ** (0.7 + 1.3 * ratio_0_to_1)
            self.time_decay = nn.Parameter(decay_speed)
            zigzag = torch.tensor([(i + 1) % 3 - 1 for i in range(n_embd)]) * 0.5
            self.time_first = nn.Parameter(torch.ones(n_embd) * math.log(0.3) + zigzag)
            x = torch.ones(1, 1, n_embd)
            for i in range(n_embd):
                x[0, 0, i] = i / n_embd
            self.time_mix_k = nn.Parameter(torch.pow(x, ratio_1_to_almost0))
            self.time_mix_v = nn.Parameter(torch.pow(x, ratio_1_to_almost0) + 0.3 * ratio_0_to_1)
            self.time_mix_r = nn.Parameter(torch.pow(x, 0.5 * ratio_1_to_almost0))
        self.key = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(n_embd, n_embd, bias=False)
        self.receptance = nn.Linear(n_embd, n_embd, bias=False)
        self.output = nn.Linear(n_embd, n_embd, bias=False)

    def forward(self, x):
        B, T, C = x.size()
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xv = x * self.time_mix_v + xx * (1 - self.time_mix_v)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k, v, sr = self.key(xk), self.value(xv), torch.sigmoid(self.receptance(xr))
        w, u = -torch.exp(self.time_decay), self.time_first
        aa = torch.zeros(B, C)
        bb = torch.zeros(B, C)
        pp = torch.full((B, C), -1e38)
        out = []
        for t in range(T):
            kk, vv = k[:, t], v[:, t]
            ww = u + kk
            p = torch.maximum(pp, ww)
            e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
            out.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
            ww = pp + w
            p = torch.maximum(ww, kk)
            e1, e2 = torch.exp(ww - p), torch.exp(kk - p)
            aa, bb, pp = e1 * aa + e2 * vv, e1 * bb + e2, p
        rwkv = sr * torch.stack(out, dim=1)
        return self.output(rwkv)


class RWKV_ChannelMix(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.time_mix_k = nn.Parameter(torch.linspace(0, 1, n_embd).reshape(1, 1, n_embd))
        self.time_mix_r = nn.Parameter(torch.linspace(0.2, 0.8, n_embd).reshape(1, 1, n_embd))
        self.key = nn.Linear(n_embd, 4 * n_embd, bias=False)
        self.receptance = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(4 * n_embd, n_embd, bias=False)

    def forward(self, x):
        xx = F.pad(x, (0, 0, 1, -1))
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k = torch.square(torch.relu(self.key(xk)))
        return torch.sigmoid(self.receptance(xr)) * self.value(k)


# ----------------------------------------------------------------- RetNet ----
def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def theta_shift(x, sin, cos):
    return (x * cos) + (rotate_every_two(x) * sin)


class RetNetRelPos(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        angle = 1.0 / (10000 ** torch.linspace(0, 1, embed_dim // num_heads // 2))
        angle = angle.unsqueeze(-1).repeat(1, 2).flatten()
        decay = torch.log(1 - 2 ** (-5 - torch.arange(num_heads, dtype=torch.float)))
        self.register_buffer("angle", angle)
        self.register_buffer("decay", decay)

    def forward(self, slen):
        index = torch.arange(slen).to(self.decay)
        sin = torch.sin(index[:, None] * self.angle[None, :])
        cos = torch.cos(index[:, None] * self.angle[None, :])
        mask = torch.tril(torch.ones(slen, slen).to(self.decay))
        mask = torch.masked_fill(index[:, None] - index[None, :], ~mask.bool(), float("inf"))
        mask = torch.exp(mask * self.decay[:, None, None])
        mask = torch.nan_to_num(mask)
        mask = mask / mask.sum(dim=-1, keepdim=True).sqrt()
        return (sin, cos), mask


class MultiScaleRetention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.key_dim = self.head_dim
        self.scaling = self.key_dim ** -0.5
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.g_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.group_norm = nn.LayerNorm(self.head_dim, eps=1e-6, elementwise_affine=False)
        nn.init.xavier_uniform_(self.q_proj.weight, gain=2 ** -2.5)

    def forward(self, x, rel_pos):
        bsz, tgt_len, _ = x.size()
        (sin, cos), mask = rel_pos
        q, k, v, g = self.q_proj(x), self.k_proj(x) * self.scaling, self.v_proj(x), self.g_proj(x)
        q = q.view(bsz, tgt_len, self.num_heads, self.key_dim).transpose(1, 2)
        k = k.view(bsz, tgt_len, self.num_heads, self.key_dim).transpose(1, 2)
        qr, kr = theta_shift(q, sin, cos), theta_shift(k, sin, cos)
        vr = v.view(bsz, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)
        qk_mat = qr @ kr.transpose(-1, -2)
        qk_mat = qk_mat * mask
        qk_mat = qk_mat / qk_mat.detach().abs().sum(dim=-1, keepdim=True).clamp(min=1, max=5e4)
        output = torch.matmul(qk_mat, vr).transpose(1, 2)
        output = self.group_norm(output).reshape(bsz, tgt_len, self.num_heads * self.head_dim)
        return self.out_proj(F.silu(g) * output)


def retention_recurrent(q, k, v, gammas):
    """Plain retention (no normalisation): parallel (Q K^T * D) V equals the recurrence."""
    b, h, t, d = q.shape
    s = q.new_zeros(b, h, d, v.shape[-1])
    outs = []
    for n in range(t):
        s = gammas.view(1, h, 1, 1) * s + k[:, :, n].unsqueeze(-1) * v[:, :, n].unsqueeze(-2)
        outs.append(torch.einsum("bhd,bhde->bhe", q[:, :, n], s))
    return torch.stack(outs, dim=2)


# ------------------------------------------------ rotary embeddings, ALiBi ----
class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=32, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        t = torch.arange(max_position_embeddings, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos()[None, None, :, :], persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None, :, :], persistent=False)

    def forward(self, x, seq_len=None):
        return (self.cos_cached[:, :, :seq_len, ...].to(dtype=x.dtype),
                self.sin_cached[:, :, :seq_len, ...].to(dtype=x.dtype))


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids):
    cos = cos.squeeze(1).squeeze(0)[position_ids].unsqueeze(1)
    sin = sin.squeeze(1).squeeze(0)[position_ids].unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def get_slopes(n):
    def get_slopes_power_of_2(n):
        start = (2 ** (-2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + get_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2]


def alibi_bias(n_heads, maxpos):
    slopes = torch.Tensor(get_slopes(n_heads))
    alibi = slopes.unsqueeze(1).unsqueeze(1) * torch.arange(maxpos).unsqueeze(0).unsqueeze(0).expand(n_heads, -1, -1)
    alibi = alibi.view(n_heads, 1, maxpos)
    future_mask = torch.triu(torch.full((maxpos, maxpos), float('-inf')), 1)
    return future_mask.unsqueeze(0) + alibi


# --------------------------------------------------------------- Perceiver ----
def fourier_encode(x, max_freq, num_bands=4):
    x = x.unsqueeze(-1)
    dtype, orig_x = x.dtype, x
    scales = torch.linspace(1., max_freq / 2, num_bands, dtype=dtype)
    scales = scales[(*((None,) * (len(x.shape) - 1)), Ellipsis)]
    x = x * scales * math.pi
    x = torch.cat([x.sin(), x.cos()], dim=-1)
    return torch.cat((x, orig_x), dim=-1)


class CrossAttention(nn.Module):
    def __init__(self, query_dim, context_dim=None, heads=2, dim_head=8):
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = context_dim if context_dim is not None else query_dim
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(context_dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, query_dim)

    def forward(self, x, context=None, mask=None):
        h = self.heads
        q = self.to_q(x)
        context = context if context is not None else x
        k, v = self.to_kv(context).chunk(2, dim=-1)
        # rearrange('b n (h d) -> (b h) n d')
        q, k, v = map(lambda t: t.unflatten(-1, (h, -1)).movedim(2, 1).flatten(0, 1), (q, k, v))
        sim = torch.einsum('b i d, b j d -> b i j', q, k) * self.scale
        if mask is not None:
            mask = mask.flatten(1)                          # 'b ... -> b (...)'
            max_neg_value = -torch.finfo(sim.dtype).max
            mask = mask[:, None, :].repeat_interleave(h, dim=0)    # repeat 'b j -> (b h) () j'
            sim.masked_fill_(~mask, max_neg_value)
        attn = sim.softmax(dim=-1)
        out = torch.einsum('b i j, b j d -> b i d', attn, v)
        out = out.unflatten(0, (-1, h)).movedim(1, 2).flatten(2)   # '(b h) n d -> b n (h d)'
        return self.to_out(out)


class TinyPerceiver(nn.Module):
    def __init__(self, input_channels=3, num_latents=6, latent_dim=16, num_classes=4, max_freq=4., num_bands=3):
        super().__init__()
        self.max_freq, self.num_bands = max_freq, num_bands
        input_dim = 2 * (2 * num_bands + 1) + input_channels
        self.latents = nn.Parameter(torch.randn(num_latents, latent_dim))
        self.cross_attn = CrossAttention(latent_dim, input_dim)
        self.cross_norm = nn.LayerNorm(latent_dim)
        self.context_norm = nn.LayerNorm(input_dim)
        self.self_attn = CrossAttention(latent_dim)
        self.ff = nn.Sequential(nn.LayerNorm(latent_dim), nn.Linear(latent_dim, 32), nn.GELU(), nn.Linear(32, latent_dim))
        self.to_logits = nn.Sequential(nn.LayerNorm(latent_dim), nn.Linear(latent_dim, num_classes))

    def forward(self, data, mask=None):
        b, *axis, _ = data.shape
        axis_pos = list(map(lambda size: torch.linspace(-1., 1., steps=size), axis))
        pos = torch.stack(torch.meshgrid(*axis_pos, indexing='ij'), dim=-1)
        enc_pos = fourier_encode(pos, self.max_freq, self.num_bands)
        enc_pos = enc_pos.flatten(-2)                              # '... n d -> ... (n d)'
        enc_pos = enc_pos.expand(b, *enc_pos.shape)                # repeat '... -> b ...'
        data = torch.cat((data, enc_pos), dim=-1).flatten(1, -2)   # 'b ... d -> b (...) d'
        x = self.latents.unsqueeze(0).expand(b, -1, -1)            # repeat 'n d -> b n d'
        x = self.cross_attn(self.cross_norm(x), context=self.context_norm(data), mask=mask) + x
        x = self.self_attn(x) + x
        x = self.ff(x) + x
        return self.to_logits(x.mean(dim=-2))


# ------------------------------------------------------ mixture of experts ----
class SparseMoeBlock(nn.Module):
    def __init__(self, hidden_dim=8, ffn_dim=16, num_experts=4, top_k=2):
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.gate = nn.Linear(hidden_dim, num_experts, bias=False)
        self.experts = nn.ModuleList([nn.ModuleDict(dict(w1=nn.Linear(hidden_dim, ffn_dim, bias=False),
                                                         w2=nn.Linear(ffn_dim, hidden_dim, bias=False),
                                                         w3=nn.Linear(hidden_dim, ffn_dim, bias=False)))
                                      for _ in range(num_experts)])

    def expert(self, i, x):
        e = self.experts[i]
        return e["w2"](F.silu(e["w1"](x)) * e["w3"](x))

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim),
                                          dtype=hidden_states.dtype, device=hidden_states.device)
        expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = self.expert(int(expert_idx), current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


def load_balancing_loss_func(gate_logits, num_experts, top_k=2):
    routing_weights = torch.nn.functional.softmax(gate_logits, dim=-1)
    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    expert_mask = torch.nn.functional.one_hot(selected_experts, num_experts)
    tokens_per_expert = torch.mean(expert_mask.float(), dim=0)
    router_prob_per_expert = torch.mean(routing_weights, dim=0)
    overall_loss = torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0))
    return overall_loss * num_experts


def router_z_loss_func(router_logits):
    num_groups, tokens_per_group, _ = router_logits.shape
    log_z = torch.logsumexp(router_logits, dim=-1)
    z_loss = log_z ** 2
    return torch.sum(z_loss) / (num_groups * tokens_per_group)


def switch_dispatch(router_probs, expert_capacity):
    """Switch-transformer top-1 routing with a capacity: the position of each token in its
    expert's queue comes from a cumsum over the one-hot expert mask."""
    expert_index = torch.argmax(router_probs, dim=-1)
    expert_index = torch.nn.functional.one_hot(expert_index, num_classes=router_probs.shape[-1])
    token_priority = torch.cumsum(expert_index, dim=-2)
    expert_capacity_mask = token_priority <= expert_capacity
    expert_index = expert_index * expert_capacity_mask
    router_probs = torch.max(router_probs, dim=-1).values.unsqueeze(-1)
    return expert_index, router_probs


# ------------------------------------------------------------------ runs ----
B, L, D = 2, 8, 8
x = randn(B, L, D)
target = randn(B, L, D)

mamba = MambaBlock(D)
numpy_init(mamba)
opt = torch.optim.AdamW([{"params": [p for n, p in mamba.named_parameters() if not getattr(p, "_no_weight_decay", False)]},
                         {"params": [mamba.A_log], "weight_decay": 0.0}], lr=1e-2, weight_decay=0.1)
losses = []
for step in range(3):
    loss = F.mse_loss(mamba(x), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print("mamba", fmt(*losses), fmt(mamba.A_log.grad.abs().sum().item(), mamba.conv1d.weight.grad.abs().sum().item()))

Xs, As = randn(2, 8, 2, 3), -torch.exp(randn(2, 8, 2, scale=0.5))
Bs, Cs = randn(2, 8, 2, 4), randn(2, 8, 2, 4)
for t in (Xs, As, Bs, Cs):
    t.requires_grad_(True)
Y, final = ssd_minimal_discrete(Xs, As, Bs, Cs, block_len=4)
Y_seq, final_seq = ssd_sequential(Xs, As, Bs, Cs)
Y.pow(2).sum().backward()
ss = segsum(torch.tensor([[1., 2., 3.]]))
print("ssd", fmt(Y.sum().item(), (Y - Y_seq).abs().max().item() < 1e-4, (final - final_seq).abs().max().item() < 1e-4,
                 As.grad.abs().sum().item(), Bs.grad.sum().item()), ss.tolist())

s4 = S4D(4)
numpy_init(s4)
u = randn(2, 4, 10)
y = s4(u)
y.sum().backward()
print("s4d", fmt(y.abs().sum().item(), s4.kernel.C.grad.abs().sum().item(), s4.kernel.log_dt.grad.abs().sum().item(),
                 s4.kernel.log_A_real.grad.abs().sum().item()), tuple(s4.kernel.C.shape))

tm, cm = RWKV_TimeMix(D, layer_id=1, n_layer=2), RWKV_ChannelMix(D)
numpy_init(tm)
numpy_init(cm)
shift = nn.ZeroPad2d((0, 0, 1, -1))
xs = x.clone().requires_grad_()
out = cm(tm(xs) + xs)
out.sum().backward()
print("rwkv", fmt(out.sum().item(), xs.grad.abs().sum().item(), tm.time_decay.grad.abs().sum().item(),
                  tm.time_first.grad.sum().item()), bool(torch.equal(shift(x)[:, 1:], x[:, :-1])),
      bool((shift(x)[:, 0] == 0).all()), tuple(shift(x).shape), repr(shift))

H = 2
relpos = RetNetRelPos(D, H)
msr = MultiScaleRetention(D, H)
numpy_init(msr)
rel = relpos(L)
ret = msr(x, rel)
q, k, v = randn(B, H, L, 4), randn(B, H, L, 4), randn(B, H, L, 4)
gammas = 1 - 2 ** (-5 - torch.arange(H, dtype=torch.float))
n = torch.arange(L).unsqueeze(1)
m = torch.arange(L).unsqueeze(0)
Dmask = torch.where(n >= m, gammas.view(-1, 1, 1) ** (n - m), torch.zeros(1))
parallel = (q @ k.transpose(-1, -2) * Dmask) @ v
print("retnet", fmt(ret.sum().item(), rel[1].sum().item(), rel[0][0].sum().item(),
                    (parallel - retention_recurrent(q, k, v, gammas)).abs().max().item() < 1e-4, parallel.sum().item()))

rot = RotaryEmbedding(4)
qh = randn(B, 2, L, 4).requires_grad_()
kh = randn(B, 2, L, 4)
cos, sin = rot(qh, seq_len=L)
pos_ids = torch.arange(L).unsqueeze(0).expand(B, -1)
qr, kr = apply_rotary_pos_emb(qh, kh, cos, sin, pos_ids)
scores = qr @ kr.transpose(-1, -2)
scores.logsumexp(-1).sum().backward()
freqs_cis = precompute_freqs_cis(4, L)
xq = randn(B, L, 2, 4).requires_grad_()
xk = randn(B, L, 2, 4)
oq, ok = apply_rotary_emb(xq, xk, freqs_cis)
(oq * ok).sum().backward()
rel_inv = torch.einsum("bhid,bhjd->bhij", qr, kr)
sublist = torch.einsum(qr, [0, 1, 2, 3], kr, [0, 1, 4, 3], [0, 1, 2, 4])   # opt_einsum-style
print("rotary", fmt(scores.sum().item(), qh.grad.abs().sum().item(), oq.sum().item(), xq.grad.abs().sum().item(),
                    torch.angle(freqs_cis).sum().item(), freqs_cis.abs().mean().item(), rel_inv.std().item()),
      freqs_cis.dtype == torch.complex64, tuple(freqs_cis.shape), bool(torch.allclose(sublist, rel_inv)))

slopes = get_slopes(6)
bias = alibi_bias(4, 5)
att = (randn(1, 4, 5, 5) + bias).softmax(-1)
print("alibi", fmt(*slopes), fmt(att.sum().item(), att[0, :, -1].max().item(), bias[2, -1].sum().item()),
      bool(torch.isinf(bias).sum() == 40))

perc = TinyPerceiver()
numpy_init(perc)
img = randn(2, 4, 5, 3)
pmask = torch.from_numpy(rng.random((2, 4, 5)) > 0.3)
popt = torch.optim.Adam(perc.parameters(), lr=3e-3)
plabels = torch.tensor([1, 3])
plosses = []
for step in range(3):
    ploss = F.cross_entropy(perc(img, mask=pmask), plabels)
    popt.zero_grad()
    ploss.backward()
    popt.step()
    plosses.append(ploss.item())
with torch.no_grad():
    plogits = perc(img, mask=pmask)
print("perceiver", fmt(*plosses), plogits.argmax(-1).tolist(), fmt(plogits.max(dim=-1).values.sum().item()),
      tuple(fourier_encode(torch.zeros(4, 5, 2), 4., 3).shape))

moe = SparseMoeBlock()
numpy_init(moe, scale=0.4)
xm = randn(2, 6, 8).requires_grad_()
out, router_logits = moe(xm)
aux = load_balancing_loss_func(router_logits, 4, 2)
zl = router_z_loss_func(router_logits.view(2, 6, 4))
(out.pow(2).mean() + 0.01 * aux + 1e-3 * zl).backward()
_, chosen = torch.topk(router_logits, 2, dim=-1)
counts = torch.bincount(chosen.flatten(), minlength=4)
weighted = torch.bincount(chosen[:, 0], weights=router_logits.softmax(-1).max(-1).values.detach(), minlength=4)
dispatch, top_probs = switch_dispatch(router_logits.softmax(-1).detach(), expert_capacity=2)
scatter_counts = torch.zeros(4, dtype=torch.long).scatter_add_(0, chosen.flatten(), torch.ones_like(chosen.flatten()))
order = torch.argsort(chosen.flatten(), stable=True)
tokens_sorted = torch.arange(12).repeat_interleave(2)[order]
gathered = torch.gather(router_logits, 1, chosen)
print("moe", fmt(out.sum().item(), aux.item(), zl.item(), xm.grad.abs().sum().item(),
                 moe.gate.weight.grad.abs().sum().item(), weighted.sum().item(), top_probs.sum().item(),
                 gathered.sum().item()),
      counts.tolist(), dispatch.sum(0).tolist(), scatter_counts.tolist(), tokens_sorted.tolist(),
      int(counts.sum()), counts.dtype == torch.int64)
