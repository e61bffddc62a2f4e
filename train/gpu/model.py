"""The model the engine serves, in PyTorch: the Qwen2 layout of `engine/src/qwen2.rs`.

RMSNorm (eps from the config), rotary embeddings as `transformers`' `rotate_half` (inverse
frequencies in f32), grouped-query attention without q/k/v biases (`attention_bias: false` in
`config.json`), a SwiGLU MLP, an untied head, and bidirectional attention (the engine's default
for a masked-diffusion model). No logit shift: the row at position `p` scores the token at `p`.
Parameter names are the checkpoint names the engine loads (`model.layers.N.self_attn.q_proj`,
`lm_head`, ...), so export is a rename-free dump of `state_dict()`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelShape:
    vocab_size: int = 8192
    hidden_size: int = 512
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    intermediate_size: int = 1536
    max_position_embeddings: int = 1024
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def to_dict(self) -> dict:
        return asdict(self)

    def parameters(self) -> int:
        d, f, v = self.hidden_size, self.intermediate_size, self.vocab_size
        kv = self.num_key_value_heads * self.head_dim
        layer = d * d * 2 + d * kv * 2 + 3 * d * f + 2 * d
        return self.num_hidden_layers * layer + 2 * v * d + d

    def flops_per_token(self, masked_fraction: float) -> float:
        """Training FLOPs per token (forward + backward = 3x forward): the matmuls of the trunk,
        bidirectional attention over the whole sequence, and the head at masked positions only."""
        d, f = self.hidden_size, self.intermediate_size
        kv = self.num_key_value_heads * self.head_dim
        trunk = 2 * self.num_hidden_layers * (d * d * 2 + d * kv * 2 + 3 * d * f)
        attention = 2 * self.num_hidden_layers * 2 * self.max_position_embeddings * d
        head = 2 * d * self.vocab_size * masked_fraction
        return 3.0 * (trunk + attention + head)


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # As transformers' Qwen2RMSNorm: the statistics in f32, the weight in the input's dtype.
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


def rope_tables(shape: ModelShape, positions: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    half = shape.head_dim // 2
    inv_freq = 1.0 / (
        shape.rope_theta ** (torch.arange(0, half, device=device, dtype=torch.float64) * 2 / shape.head_dim)
    )
    inv_freq = inv_freq.float()
    angles = torch.arange(positions, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        d, hd = shape.hidden_size, shape.head_dim
        self.heads, self.kv_heads, self.head_dim = shape.num_attention_heads, shape.num_key_value_heads, hd
        self.q_proj = nn.Linear(d, self.heads * hd, bias=False)
        self.k_proj = nn.Linear(d, self.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, self.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(self.heads * hd, d, bias=False)
        # Whether SDPA gets the key/value heads grouped (`enable_gqa`) or repeated to one per
        # query head. Flash attention takes grouped heads (in bf16); where no fused kernel does,
        # SDPA silently runs the unfused one, which holds every head's full score matrix, while
        # repeated heads reach the fused memory-efficient kernel. `train.py` probes the device
        # (`grouped_attention_fused`) and sets it; both give the same function.
        self.grouped = True

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos[:t].to(q.dtype), sin[:t].to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        grouped = self.kv_heads != self.heads
        if grouped and not self.grouped:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
            grouped = False
        out = F.scaled_dot_product_attention(q, k, v, is_causal=False, enable_gqa=grouped)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class Mlp(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        d, f = shape.hidden_size, shape.intermediate_size
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.input_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.self_attn = Attention(shape)
        self.post_attention_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.mlp = Mlp(shape)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Trunk(nn.Module):
    """Everything but the head: token ids in, final-normed hidden states out."""

    def __init__(self, shape: ModelShape):
        super().__init__()
        self.embed_tokens = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.layers = nn.ModuleList(Layer(shape) for _ in range(shape.num_hidden_layers))
        self.norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        cos, sin = rope_tables(shape, shape.max_position_embeddings, "cpu")
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, ids: torch.Tensor, layers=None) -> torch.Tensor:
        """`layers`: what runs each of `self.layers` (`compiled_trunk`'s compiled ones)."""
        x = self.embed_tokens(ids)
        for layer in layers or self.layers:
            x = layer(x, self.rope_cos, self.rope_sin)
        return self.norm(x)


def compiled_trunk(trunk: Trunk, backend: str = "inductor"):
    """`trunk` with each layer compiled (torch.compile), the embedding and final norm eager: the
    layers share one compiled graph, so the compiler's cold start is one layer's forward and
    backward, not the whole trunk's (on the CPU, default preset, 256 tokens, cold caches: 23 s
    against 32-33 s for the first step, the same ~0.24 s a step after)."""
    layers = [torch.compile(layer, backend=backend) for layer in trunk.layers]
    return functools.partial(trunk.forward, layers=layers)


class DiffusionCoder(nn.Module):
    """`model.*` is the trunk, `lm_head` the untied head: the checkpoint's names."""

    def __init__(self, shape: ModelShape):
        super().__init__()
        self.shape = shape
        self.model = Trunk(shape)
        self.lm_head = nn.Linear(shape.hidden_size, shape.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=std)
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                # Residual branches start silent: each layer begins as the identity.
                nn.init.zeros_(p)
        nn.init.normal_(self.lm_head.weight, std=1.0 / math.sqrt(self.shape.hidden_size) * 0.5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits at every position (for parity checks and small evaluations)."""
        return self.lm_head(self.model(ids))


def group_attention_heads(model: nn.Module, grouped: bool) -> None:
    """Sets every attention layer's `grouped` ([`Attention`]): before compiling."""
    for module in model.modules():
        if isinstance(module, Attention):
            module.grouped = grouped


def grouped_attention_fused(shape: ModelShape, device) -> bool:
    """Whether a fused SDPA kernel takes this shape's grouped heads in bf16 on `device`,
    forward and backward (if not, `group_attention_heads(model, False)`)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    hd = shape.head_dim
    q = torch.randn(1, shape.num_attention_heads, 64, hd, device=device, dtype=torch.bfloat16, requires_grad=True)
    kv = torch.randn(1, shape.num_key_value_heads, 64, hd, device=device, dtype=torch.bfloat16, requires_grad=True)
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
    try:
        with sdpa_kernel(fused):
            F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True).sum().backward()
    except RuntimeError:
        return False
    return True
