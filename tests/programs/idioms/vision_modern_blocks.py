"""Modern vision blocks as paper implementations write them: Swin (window partition with
torch.roll, a relative position bias table indexed by a buffer, the shifted-window mask, patch
merging, SwinV2 cosine attention with a log-spaced continuous position bias), ConvNeXt (a
hand-written channels-first LayerNorm, depthwise 7x7, layer-scale gamma, DropPath with a
linspace schedule, trunc_normal_ init through Module.apply), MLP-Mixer, MobileNetV3 /
EfficientNet blocks (squeeze-excite, hardswish, hardsigmoid, drop connect), weight-decay
parameter groups from named_parameters, and no_grad inference with argmax / topk."""
import collections.abc
import math
from functools import partial
from itertools import repeat

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(23)


def to_2tuple(x):
    if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
        return tuple(x)
    return tuple(repeat(x, 2))


def numpy_init(model, scale=0.2):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.copy_(torch.from_numpy((0.5 + 0.1 * rng.standard_normal(p.shape)).astype(np.float32)))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(torch.from_numpy((1.0 + 0.05 * rng.standard_normal(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy((scale * rng.standard_normal(p.shape)).astype(np.float32)))


def drop_path(x, drop_prob: float = 0., training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob=0., scale_by_keep=True):
        super(DropPath, self).__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)

    def extra_repr(self):
        return f'drop_prob={round(self.drop_prob, 3):0.3f}'


# ---------------------------------------------------------------- Swin ----
def window_partition(x, window_size):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)
    return windows


def window_reverse(windows, window_size, H, W):
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)
    return x


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads, qkv_bias=True, qk_scale=None):
        super().__init__()
        self.dim = dim
        self.window_size = window_size
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = qk_scale or head_dim ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window_size[0] - 1) * (2 * window_size[1] - 1), num_heads))
        coords_h = torch.arange(self.window_size[0])
        coords_w = torch.arange(self.window_size[1])
        coords = torch.stack(torch.meshgrid([coords_h, coords_w], indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += self.window_size[0] - 1
        relative_coords[:, :, 1] += self.window_size[1] - 1
        relative_coords[:, :, 0] *= 2 * self.window_size[1] - 1
        relative_position_index = relative_coords.sum(-1)
        self.register_buffer("relative_position_index", relative_position_index)
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=.02)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask=None):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale
        attn = (q @ k.transpose(-2, -1))
        relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(
            self.window_size[0] * self.window_size[1], self.window_size[0] * self.window_size[1], -1)
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
        attn = attn + relative_position_bias.unsqueeze(0)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)


class WindowAttentionV2(nn.Module):
    """SwinV2: scaled cosine attention and a continuous, log-spaced relative position bias."""

    def __init__(self, dim, window_size, num_heads):
        super().__init__()
        self.window_size, self.num_heads = window_size, num_heads
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((num_heads, 1, 1))), requires_grad=True)
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 32, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(32, num_heads, bias=False))
        relative_coords_h = torch.arange(-(self.window_size[0] - 1), self.window_size[0], dtype=torch.float32)
        relative_coords_w = torch.arange(-(self.window_size[1] - 1), self.window_size[1], dtype=torch.float32)
        relative_coords_table = torch.stack(
            torch.meshgrid([relative_coords_h, relative_coords_w], indexing="ij")).permute(1, 2, 0).contiguous().unsqueeze(0)
        relative_coords_table[:, :, :, 0] /= (self.window_size[0] - 1)
        relative_coords_table[:, :, :, 1] /= (self.window_size[1] - 1)
        relative_coords_table *= 8
        relative_coords_table = torch.sign(relative_coords_table) * torch.log2(
            torch.abs(relative_coords_table) + 1.0) / np.log2(8)
        self.register_buffer("relative_coords_table", relative_coords_table, persistent=False)
        coords = torch.stack(torch.meshgrid([torch.arange(window_size[0]), torch.arange(window_size[1])], indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = (coords_flatten[:, :, None] - coords_flatten[:, None, :]).permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += self.window_size[0] - 1
        relative_coords[:, :, 1] += self.window_size[1] - 1
        relative_coords[:, :, 0] *= 2 * self.window_size[1] - 1
        self.register_buffer("relative_position_index", relative_coords.sum(-1), persistent=False)
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B_, N, C = x.shape
        qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias, requires_grad=False), self.v_bias))
        qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
        qkv = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1))
        logit_scale = torch.clamp(self.logit_scale, max=torch.log(torch.tensor(1. / 0.01))).exp()
        attn = attn * logit_scale
        relative_position_bias_table = self.cpb_mlp(self.relative_coords_table).view(-1, self.num_heads)
        relative_position_bias = relative_position_bias_table[self.relative_position_index.view(-1)].view(
            N, N, -1).permute(2, 0, 1).contiguous()
        attn = attn + 16 * torch.sigmoid(relative_position_bias).unsqueeze(0)
        attn = attn.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B_, N, C))


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size=4, shift_size=0,
                 mlp_ratio=2., drop_path=0., norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim, self.input_resolution = dim, input_resolution
        self.window_size, self.shift_size = window_size, shift_size
        self.norm1 = norm_layer(dim)
        self.attn = WindowAttention(dim, window_size=to_2tuple(self.window_size), num_heads=num_heads)
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.norm2 = norm_layer(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))
        if self.shift_size > 0:
            H, W = self.input_resolution
            img_mask = torch.zeros((1, H, W, 1))
            h_slices = (slice(0, -self.window_size), slice(-self.window_size, -self.shift_size),
                        slice(-self.shift_size, None))
            w_slices = (slice(0, -self.window_size), slice(-self.window_size, -self.shift_size),
                        slice(-self.shift_size, None))
            cnt = 0
            for h in h_slices:
                for w in w_slices:
                    img_mask[:, h, w, :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, self.window_size)
            mask_windows = mask_windows.view(-1, self.window_size * self.window_size)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
            attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))
        else:
            attn_mask = None
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x):
        H, W = self.input_resolution
        B, L, C = x.shape
        assert L == H * W, "input feature has wrong size"
        shortcut = x
        x = self.norm1(x)
        x = x.view(B, H, W, C)
        if self.shift_size > 0:
            shifted_x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        else:
            shifted_x = x
        x_windows = window_partition(shifted_x, self.window_size)
        x_windows = x_windows.view(-1, self.window_size * self.window_size, C)
        attn_windows = self.attn(x_windows, mask=self.attn_mask)
        attn_windows = attn_windows.view(-1, self.window_size, self.window_size, C)
        shifted_x = window_reverse(attn_windows, self.window_size, H, W)
        if self.shift_size > 0:
            x = torch.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        else:
            x = shifted_x
        x = x.view(B, H * W, C)
        x = shortcut + self.drop_path(x)
        x = x + self.drop_path(self.mlp(self.norm2(x)))
        return x


class PatchMerging(nn.Module):
    def __init__(self, input_resolution, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.input_resolution = input_resolution
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x):
        H, W = self.input_resolution
        B, L, C = x.shape
        x = x.view(B, H, W, C)
        x0 = x[:, 0::2, 0::2, :]
        x1 = x[:, 1::2, 0::2, :]
        x2 = x[:, 0::2, 1::2, :]
        x3 = x[:, 1::2, 1::2, :]
        x = torch.cat([x0, x1, x2, x3], -1)
        x = x.view(B, -1, 4 * C)
        return self.reduction(self.norm(x))


class TinySwin(nn.Module):
    def __init__(self, img_size=16, patch_size=2, in_chans=3, num_classes=5, embed_dim=8,
                 depths=(2, 2), num_heads=(2, 4), window_size=4, drop_path_rate=0.2):
        super().__init__()
        self.patch_embed = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        res = img_size // patch_size
        self.absolute_pos_embed = nn.Parameter(torch.zeros(1, res * res, embed_dim))
        nn.init.trunc_normal_(self.absolute_pos_embed, std=.02)
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, sum(depths))]
        self.layers = nn.ModuleList()
        dim = embed_dim
        for i_layer, depth in enumerate(depths):
            blocks = nn.ModuleList([
                SwinTransformerBlock(dim, (res, res), num_heads[i_layer], window_size=window_size,
                                     shift_size=0 if (i % 2 == 0) else window_size // 2,
                                     drop_path=dpr[sum(depths[:i_layer]) + i])
                for i in range(depth)])
            self.layers.append(blocks)
            if i_layer < len(depths) - 1:
                self.layers.append(PatchMerging((res, res), dim))
                res, dim = res // 2, dim * 2
        self.v2 = WindowAttentionV2(dim, (res, res), num_heads[-1])
        self.norm = nn.LayerNorm(dim)
        self.avgpool = nn.AdaptiveAvgPool1d(1)
        self.head = nn.Linear(dim, num_classes)
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)

    @torch.jit.ignore
    def no_weight_decay(self):
        return {'absolute_pos_embed'}

    @torch.jit.ignore
    def no_weight_decay_keywords(self):
        return {'relative_position_bias_table'}

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = x + self.absolute_pos_embed
        for layer in self.layers:
            if isinstance(layer, nn.ModuleList):
                for blk in layer:
                    x = blk(x)
            else:
                x = layer(x)
        x = x + self.v2(x)
        x = self.norm(x)
        x = self.avgpool(x.transpose(1, 2))
        x = torch.flatten(x, 1)
        return self.head(x)


# ------------------------------------------------------------- ConvNeXt ----
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-6, data_format="channels_last"):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps
        self.data_format = data_format
        if self.data_format not in ["channels_last", "channels_first"]:
            raise NotImplementedError
        self.normalized_shape = (normalized_shape, )

    def forward(self, x):
        if self.data_format == "channels_last":
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        elif self.data_format == "channels_first":
            u = x.mean(1, keepdim=True)
            s = (x - u).pow(2).mean(1, keepdim=True)
            x = (x - u) / torch.sqrt(s + self.eps)
            x = self.weight[:, None, None] * x + self.bias[:, None, None]
            return x


class Block(nn.Module):
    def __init__(self, dim, drop_path=0., layer_scale_init_value=1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale_init_value * torch.ones((dim)),
                                  requires_grad=True) if layer_scale_init_value > 0 else None
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()

    def forward(self, x):
        input = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)
        x = self.norm(x)
        x = self.pwconv1(x)
        x = self.act(x)
        x = self.pwconv2(x)
        if self.gamma is not None:
            x = self.gamma * x
        x = x.permute(0, 3, 1, 2)
        x = input + self.drop_path(x)
        return x


class ConvNeXt(nn.Module):
    def __init__(self, in_chans=3, num_classes=5, depths=[1, 2], dims=[8, 16], drop_path_rate=0.1,
                 layer_scale_init_value=1e-6, head_init_scale=1.):
        super().__init__()
        self.downsample_layers = nn.ModuleList()
        stem = nn.Sequential(nn.Conv2d(in_chans, dims[0], kernel_size=4, stride=4),
                             LayerNorm(dims[0], eps=1e-6, data_format="channels_first"))
        self.downsample_layers.append(stem)
        for i in range(len(dims) - 1):
            self.downsample_layers.append(nn.Sequential(
                LayerNorm(dims[i], eps=1e-6, data_format="channels_first"),
                nn.Conv2d(dims[i], dims[i + 1], kernel_size=2, stride=2)))
        self.stages = nn.ModuleList()
        dp_rates = [x.item() for x in torch.linspace(0, drop_path_rate, sum(depths))]
        cur = 0
        for i in range(len(dims)):
            self.stages.append(nn.Sequential(
                *[Block(dim=dims[i], drop_path=dp_rates[cur + j],
                        layer_scale_init_value=layer_scale_init_value) for j in range(depths[i])]))
            cur += depths[i]
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)
        self.apply(self._init_weights)
        self.head.weight.data.mul_(head_init_scale)
        self.head.bias.data.mul_(head_init_scale)

    def _init_weights(self, m):
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=.02)
            nn.init.constant_(m.bias, 0)

    def forward(self, x):
        for i in range(len(self.stages)):
            x = self.downsample_layers[i](x)
            x = self.stages[i](x)
        return self.head(self.norm(x.mean([-2, -1])))


# ------------------------------------------------------------ MLP-Mixer ----
class MixerBlock(nn.Module):
    def __init__(self, dim, num_patch, token_dim, channel_dim):
        super().__init__()
        self.token_norm = nn.LayerNorm(dim)
        self.token_mix = nn.Sequential(nn.Linear(num_patch, token_dim), nn.GELU(), nn.Linear(token_dim, num_patch))
        self.channel_norm = nn.LayerNorm(dim)
        self.channel_mix = nn.Sequential(nn.Linear(dim, channel_dim), nn.GELU(approximate="tanh"),
                                         nn.Linear(channel_dim, dim))

    def forward(self, x):
        # rearrange('b n d -> b d n') ... ('b d n -> b n d')
        x = x + self.token_mix(self.token_norm(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mix(self.channel_norm(x))


class MLPMixer(nn.Module):
    def __init__(self, in_channels=3, dim=12, num_classes=5, patch_size=4, image_size=16, depth=2):
        super().__init__()
        self.num_patch = (image_size // patch_size) ** 2
        self.patch_size = patch_size
        self.to_patch_embedding = nn.Linear(patch_size * patch_size * in_channels, dim)
        self.mixer_blocks = nn.ModuleList([MixerBlock(dim, self.num_patch, 8, 24) for _ in range(depth)])
        self.layer_norm = nn.LayerNorm(dim)
        self.mlp_head = nn.Sequential(nn.Linear(dim, num_classes))

    def forward(self, x):
        p = self.patch_size
        # rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)')
        b, c, h, w = x.shape
        x = x.unflatten(2, (h // p, p)).unflatten(-1, (w // p, p))      # b c h p1 w p2
        x = x.permute(0, 2, 4, 3, 5, 1).reshape(b, (h // p) * (w // p), p * p * c)
        x = self.to_patch_embedding(x)
        for mixer_block in self.mixer_blocks:
            x = mixer_block(x)
        x = self.layer_norm(x)
        x = x.mean(dim=1)
        return self.mlp_head(x)


# --------------------------------------------- MobileNetV3 / EfficientNet ----
def _make_divisible(v, divisor, min_value=None):
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class h_sigmoid(nn.Module):
    def __init__(self, inplace=True):
        super(h_sigmoid, self).__init__()
        self.relu = nn.ReLU6(inplace=inplace)

    def forward(self, x):
        return self.relu(x + 3) / 6


class h_swish(nn.Module):
    def __init__(self, inplace=True):
        super(h_swish, self).__init__()
        self.sigmoid = h_sigmoid(inplace=inplace)

    def forward(self, x):
        return x * self.sigmoid(x)


class SELayer(nn.Module):
    def __init__(self, channel, reduction=4):
        super(SELayer, self).__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(
            nn.Linear(channel, _make_divisible(channel // reduction, 8)), nn.ReLU(inplace=True),
            nn.Linear(_make_divisible(channel // reduction, 8), channel), h_sigmoid())

    def forward(self, x):
        b, c, _, _ = x.size()
        y = self.avg_pool(x).view(b, c)
        y = self.fc(y).view(b, c, 1, 1)
        return x * y


class SqueezeExcitation(nn.Module):
    """torchvision-style SE with 1x1 convolutions and nn.Hardsigmoid / F.hardsigmoid."""

    def __init__(self, input_channels, squeeze_channels, scale_activation=nn.Hardsigmoid):
        super().__init__()
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = scale_activation()

    def forward(self, input):
        scale = F.adaptive_avg_pool2d(input, 1)
        scale = self.fc2(self.activation(self.fc1(scale)))
        return self.scale_activation(scale) * input


def drop_connect(inputs, p, training):
    if not training:
        return inputs
    batch_size = inputs.shape[0]
    keep_prob = 1 - p
    random_tensor = keep_prob
    random_tensor += torch.rand([batch_size, 1, 1, 1], dtype=inputs.dtype, device=inputs.device)
    binary_tensor = torch.floor(random_tensor)
    output = inputs / keep_prob * binary_tensor
    return output


class InvertedResidual(nn.Module):
    def __init__(self, inp, hidden_dim, oup, kernel_size, stride, use_se, use_hs, drop_connect_rate=0.0):
        super(InvertedResidual, self).__init__()
        self.identity = stride == 1 and inp == oup
        self.drop_connect_rate = drop_connect_rate
        self.conv = nn.Sequential(
            nn.Conv2d(inp, hidden_dim, 1, 1, 0, bias=False), nn.BatchNorm2d(hidden_dim),
            h_swish() if use_hs else nn.ReLU(inplace=True),
            nn.Conv2d(hidden_dim, hidden_dim, kernel_size, stride, (kernel_size - 1) // 2,
                      groups=hidden_dim, bias=False),
            nn.BatchNorm2d(hidden_dim),
            SELayer(hidden_dim) if use_se else nn.Identity(),
            nn.Hardswish() if use_hs else nn.SiLU(inplace=True),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup))

    def forward(self, x):
        if self.identity:
            return x + drop_connect(self.conv(x), self.drop_connect_rate, self.training)
        return self.conv(x)


class TinyMobileNetV3(nn.Module):
    def __init__(self, num_classes=5, width_mult=1.):
        super().__init__()
        cfgs = [[3, 2, 8, 1, 0, 2], [3, 3, 8, 0, 1, 1], [5, 3, 12, 1, 1, 2]]
        input_channel = _make_divisible(8 * width_mult, 4)
        layers = [nn.Sequential(nn.Conv2d(3, input_channel, 3, 2, 1, bias=False),
                                nn.BatchNorm2d(input_channel), h_swish())]
        for k, t, c, use_se, use_hs, s in cfgs:
            output_channel = _make_divisible(c * width_mult, 4)
            layers.append(InvertedResidual(input_channel, input_channel * t, output_channel, k, s,
                                           use_se, use_hs, drop_connect_rate=0.0))
            input_channel = output_channel
        self.features = nn.Sequential(*layers)
        self.se = SqueezeExcitation(input_channel, 4)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(nn.Linear(input_channel, 16), nn.Hardswish(inplace=True),
                                        nn.Dropout(0.0), nn.Linear(16, num_classes))
        self._initialize_weights()

    def forward(self, x):
        x = self.se(self.features(x))
        x = self.avgpool(x)
        x = x.view(x.size(0), -1)
        return self.classifier(x)

    def _initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
                if m.bias is not None:
                    m.bias.data.zero_()
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                m.weight.data.normal_(0, 0.01)
                m.bias.data.zero_()


# ------------------------------------------------------------- training ----
def param_groups_weight_decay(model, weight_decay=1e-5, no_weight_decay_list=(), keywords=()):
    no_weight_decay_list = set(no_weight_decay_list)
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list or \
                any(kw in name for kw in keywords):
            no_decay.append(param)
        else:
            decay.append(param)
    return [{'params': no_decay, 'weight_decay': 0.}, {'params': decay, 'weight_decay': weight_decay}]


images = torch.from_numpy(rng.standard_normal((6, 3, 16, 16)).astype(np.float32))
labels = torch.from_numpy(rng.integers(0, 5, 6))

# init variants must leave the values in range and return the tensor they filled
w = torch.empty(64, 32)
checks = [nn.init.trunc_normal_(w, mean=0., std=1., a=-2., b=2.) is w, bool((w.abs() <= 2).all()),
          bool((nn.init.trunc_normal_(w, std=.02, a=-.04, b=.04).abs() <= .04).all()),
          nn.init.kaiming_normal_(w, mode='fan_out', nonlinearity='relu').shape == (64, 32),
          bool((nn.init.xavier_uniform_(w, gain=nn.init.calculate_gain('relu')).abs()
                <= math.sqrt(2) * math.sqrt(6 / 96)).all()),
          bool((nn.init.kaiming_uniform_(w, a=math.sqrt(5)).abs() <= 1 / math.sqrt(32)).all()),
          nn.init.calculate_gain('leaky_relu', 0.2), nn.init.calculate_gain('selu'),
          nn.init.calculate_gain('tanh')]
dp = DropPath(0.5)
dp.train()
x = torch.ones(64, 3, 2, 2)
y = dp(x)
checks += [set(y.unique().tolist()) <= {0.0, 2.0}, bool((y.view(64, -1).std(1) == 0).all()),
           bool(torch.equal(dp.eval()(x), x)), repr(dp)]
print("init", *[f"{c:.6f}" if isinstance(c, float) else c for c in checks])

results = {}
for name, ctor in [("swin", TinySwin), ("convnext", ConvNeXt), ("mixer", MLPMixer), ("mbv3", TinyMobileNetV3)]:
    model = ctor()
    numpy_init(model)
    skip = model.no_weight_decay() if hasattr(model, 'no_weight_decay') else set()
    keywords = model.no_weight_decay_keywords() if hasattr(model, 'no_weight_decay_keywords') else set()
    groups = param_groups_weight_decay(model, 0.05, skip, keywords)
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.999))
    model.train()
    for m in model.modules():
        if isinstance(m, DropPath):
            m.drop_prob = 0.0          # deterministic: the RNG streams differ between libraries
    losses = []
    for step in range(3):
        out = model(images)
        loss = F.cross_entropy(out, labels, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        logits = model(images)
        probs = logits.softmax(-1)
        top3 = probs.topk(3, dim=-1)
    results[name] = (len(groups[0]['params']), len(groups[1]['params']), losses,
                     logits.argmax(dim=-1).tolist(), top3.indices[0].tolist(), top3.values.sum().item())
    print(name, results[name][0], results[name][1], " ".join(f"{v:.6f}" for v in losses),
          results[name][3], results[name][4], f"{results[name][5]:.6f}")

# window partition / reverse and the shifted mask are exact inverses
x = torch.arange(2 * 8 * 8 * 3, dtype=torch.float32).view(2, 8, 8, 3)
shifted = torch.roll(x, shifts=(-2, -2), dims=(1, 2))
back = torch.roll(window_reverse(window_partition(shifted, 4), 4, 8, 8), shifts=(2, 2), dims=(1, 2))
blk = SwinTransformerBlock(4, (8, 8), 2, window_size=4, shift_size=2)
idx = blk.attn.relative_position_index
print("windows", bool(torch.equal(back, x)), tuple(window_partition(x, 4).shape),
      int((blk.attn_mask == -100).sum()), tuple(blk.attn_mask.shape), idx.dtype == torch.int64, int(idx.max()),
      int(idx[3, 12]), sorted(k for k in blk.state_dict() if "index" in k or "mask" in k))

# fine-tuning from a checkpoint with a new head (MAE / DINO style), flip test-time augmentation,
# and the hard activations' gradients at their kinks (inputs that land exactly on -3 and 3)
ckpt = {k: v.clone() for k, v in model.state_dict().items()}
for k in ['classifier.3.weight', 'classifier.3.bias']:
    if k in ckpt:
        del ckpt[k]
finetune = TinyMobileNetV3(num_classes=3)
msg = finetune.load_state_dict(ckpt, strict=False)
with torch.no_grad():   # the new head: numpy values (the libraries' RNG streams differ)
    finetune.classifier[3].weight.copy_(torch.from_numpy(rng.standard_normal((3, 16)).astype(np.float32)))
    finetune.classifier[3].bias.zero_()
full = finetune.load_state_dict({k: v for k, v in finetune.state_dict().items()})
finetune.eval()
with torch.no_grad():
    tta = (finetune(images) + finetune(images.flip(3)) + finetune(images.flip(2, 3))) / 3
    tta_prob = tta.softmax(dim=-1)
kinks = torch.tensor([-4., -3., -1.5, 0., 3., 4.], requires_grad=True)
(F.hardswish(kinks) + 2 * F.hardsigmoid(kinks) + nn.Hardswish()(kinks)).sum().backward()
print("finetune", msg, full, tta_prob.argmax(-1).tolist(), f"{tta_prob.max().item():.6f}",
      kinks.grad.tolist(), tuple(images.permute(dims=(0, 2, 3, 1)).shape))
