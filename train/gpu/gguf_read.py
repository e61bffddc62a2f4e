"""Reads a GGUF file redraft wrote (`redraft convert`, `scripts/ship-model`: the shipped default
model) back into this trainer's model, so a GPU window can continue training from the shipped
weights in place: the repository already carries them, and a device call has no room for a
second copy beside the pack.

Covers what those files hold: llama.cpp's `dream` and `qwen2` architectures (no LLaDA row
order), F32, F16, BF16 and Q8_0 tensors (Q8_0 dequantized: the scale times each of its 32
bytes). Tensor names map to the checkpoint names the engine and `model.py` use through the
same table as the engine's `engine/src/gguf/mod.rs` (`TOP_NAMES`, `LAYER_NAMES`);
`train/tests/train/gpu_trainer.rs` holds the two to each other on a shipped model's logits.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import torch

# llama.cpp's name -> transformers' (the engine's `TOP_NAMES` and `LAYER_NAMES`).
TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}

# ggml types: id -> (name, elements per block, bytes per block).
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 8: ("Q8_0", 32, 34), 30: ("BF16", 1, 2)}

# GGUF metadata value types: id -> struct format (8: string and 9: array are read apart).
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def transformers_name(name: str) -> str | None:
    if name in TOP_NAMES:
        return TOP_NAMES[name]
    if not name.startswith("blk."):
        return None
    layer, rest = name[len("blk."):].split(".", 1)
    part, kind = rest.rsplit(".", 1)
    if part not in LAYER_NAMES:
        return None
    return f"model.layers.{int(layer)}.{LAYER_NAMES[part]}.{kind}"


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.data, self.at, self.path = data, 0, path

    def take(self, fmt: str):
        size = struct.calcsize("<" + fmt)
        if self.at + size > len(self.data):
            raise ValueError(f"{self.path}: the file ends inside its header")
        (value,) = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += size
        return value

    def string(self) -> str:
        n = self.take("Q")
        raw = self.data[self.at:self.at + n]
        self.at += n
        return raw.decode("utf-8")

    def value(self, kind: int):
        if kind == 8:
            return self.string()
        if kind == 9:
            item, n = self.take("I"), self.take("Q")
            return [self.value(item) for _ in range(n)]
        if kind not in SCALARS:
            raise ValueError(f"{self.path}: metadata value type {kind}")
        return self.take(SCALARS[kind])


def read(path: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """The file's metadata (arrays included) and its tensors in f32 under transformers' names."""
    path = Path(path)
    data = path.read_bytes()
    r = _Reader(data, path)
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file (no magic bytes)")
    r.at = 4
    version = r.take("I")
    if version not in (2, 3):
        raise ValueError(f"{path}: GGUF version {version}")
    n_tensors, n_kv = r.take("Q"), r.take("Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("Q") for _ in range(r.take("I"))]
        infos.append((name, dims, r.take("I"), r.take("Q")))
    align = int(meta.get("general.alignment", 32))
    start = (r.at + align - 1) // align * align
    tensors = {}
    for name, dims, kind, offset in infos:
        ours = transformers_name(name)
        if ours is None:
            continue
        if kind not in TYPES:
            raise ValueError(f"{path}: tensor {name} has ggml type {kind}; this reader takes F32, F16, BF16 and Q8_0")
        _, block, block_bytes = TYPES[kind]
        count = int(np.prod(dims))
        at = start + offset
        raw = np.frombuffer(data, dtype=np.uint8, count=count // block * block_bytes, offset=at)
        if kind == 0:
            values = raw.view(np.float32).astype(np.float32)
        elif kind == 1:
            values = raw.view(np.float16).astype(np.float32)
        elif kind == 30:
            values = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            blocks = raw.reshape(-1, 34)
            scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
            values = (blocks[:, 2:].view(np.int8).astype(np.float32) * scale).reshape(-1)
        # GGUF lists dimensions fastest first; torch wants them slowest first.
        tensors[ours] = torch.from_numpy(values.reshape(list(reversed(dims))).copy())
    return meta, tensors


def config(meta: dict, tensors: dict[str, torch.Tensor]) -> dict:
    """The `config.json` fields `export.shape_of` reads, from the metadata."""
    arch = meta["general.architecture"]
    if arch not in ("dream", "qwen2"):
        raise ValueError(f"GGUF architecture {arch}: this trainer resumes dream and qwen2 files")

    def key(k, default=None):
        value = meta.get(f"{arch}.{k}", default)
        if value is None:
            raise ValueError(f"the GGUF metadata has no {arch}.{k}")
        return value

    vocab, hidden = tensors["model.embed_tokens.weight"].shape
    heads = key("attention.head_count")
    return {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": key("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": key("attention.head_count_kv", heads),
        "intermediate_size": key("feed_forward_length"),
        "max_position_embeddings": key("context_length"),
        "rope_theta": key("rope.freq_base", 10000.0),
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-6),
    }
