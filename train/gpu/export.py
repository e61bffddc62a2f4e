"""A model directory the engine loads: `config.json`, `redraft.json`, `tokenizer.json` and the
weights as safetensors shards of at most 15 MiB (with `model.safetensors.index.json`), written
into a fresh folder and swapped in, so a run stopped mid-export still leaves the last one whole.
The fresh folder is written in a stage outside the export's own folder where one is on the same
file system, so that folder never holds a half-written export beside the last one (a device
call returns at most 8 files from $OUT: a ninth could push a shard of the good export out).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from model import DiffusionCoder, ModelShape

SHARD_BYTES = 15 * 1024 * 1024
# Room for a shard's safetensors header (names, shapes, offsets) within SHARD_BYTES.
SHARD_PAYLOAD = SHARD_BYTES - 64 * 1024
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
DTYPE_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def config_json(shape: ModelShape, pack_meta: dict, dtype: str) -> dict:
    return {
        "model_type": "qwen2",
        "architectures": ["Qwen2ForCausalLM"],
        "vocab_size": shape.vocab_size,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.num_hidden_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "head_dim": shape.head_dim,
        "max_position_embeddings": shape.max_position_embeddings,
        "rope_theta": shape.rope_theta,
        "rms_norm_eps": shape.rms_norm_eps,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "hidden_act": "silu",
        "use_sliding_window": False,
        "torch_dtype": DTYPE_NAMES[dtype],
        "mask_token_id": pack_meta["mask_id"],
        "eos_token_id": pack_meta["eos_id"],
        "pad_token_id": pack_meta["eos_id"],
    }


def redraft_json(pack_meta: dict) -> dict:
    return {
        "mask_token_id": pack_meta["mask_id"],
        "eos_token_id": pack_meta["eos_id"],
        "pad_token_id": pack_meta["eos_id"],
        "logit_shift": False,
        "attention": "bidirectional",
    }


def log_json(log: dict) -> str:
    """The training log as JSON every reader takes: a NaN or infinite number (a diverged run's
    loss) is written as null, not as Python's `NaN`, which is no JSON."""
    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(log), indent=1, allow_nan=False)


def workroom(out: Path, stage: Path | None) -> Path:
    """Where `export` writes the fresh folder and parks the old one: `stage` when it is on the
    file system of `out`'s folder (the swap is then two renames), else `out`'s folder."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if stage is not None:
        stage.mkdir(parents=True, exist_ok=True)
        if os.stat(stage).st_dev == os.stat(out.parent).st_dev:
            return stage
    return out.parent


def export(model: DiffusionCoder, out: Path, pack, dtype: str, log: dict, tokenizer: bool = True,
           stage: Path | None = None) -> None:
    out = Path(out)
    room = workroom(out, None if stage is None else Path(stage))
    fresh = room / (out.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    tensors = {name: p.detach().to("cpu", DTYPES[dtype]).contiguous() for name, p in model.state_dict().items()}
    # First-fit decreasing: the fewest shards (a device call returns at most 8 files).
    nbytes = {name: t.numel() * t.element_size() for name, t in tensors.items()}
    shards: list[dict] = []
    sizes: list[int] = []
    for name in sorted(tensors, key=lambda n: (-nbytes[n], n)):
        fit = next((i for i, used in enumerate(sizes) if used + nbytes[name] <= SHARD_PAYLOAD), None)
        if fit is None:
            shards.append({})
            sizes.append(0)
            fit = len(shards) - 1
        shards[fit][name] = tensors[name]
        sizes[fit] += nbytes[name]
    if len(shards) == 1:
        save_file(shards[0], fresh / "model.safetensors", metadata={"format": "pt"})
    else:
        weight_map = {}
        for i, shard in enumerate(shards):
            file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            save_file(shard, fresh / file, metadata={"format": "pt"})
            weight_map.update({name: file for name in shard})
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (fresh / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    (fresh / "config.json").write_text(json.dumps(config_json(model.shape, pack.meta, dtype), indent=2))
    (fresh / "redraft.json").write_text(json.dumps(redraft_json(pack.meta), indent=2))
    if tokenizer:
        shutil.copyfile(pack.path / "tokenizer.json", fresh / "tokenizer.json")
    (fresh / "train_log.json").write_text(log_json(log))
    old = room / (out.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    # Renames, or copies where they cannot (two mounts of one file system share a device).
    if out.exists():
        shutil.move(out, old)
    shutil.move(fresh, out)
    shutil.rmtree(old, ignore_errors=True)


def shape_of(model_dir: Path) -> ModelShape:
    return shape_from(json.loads((Path(model_dir) / "config.json").read_text()))


def shape_from(cfg: dict) -> ModelShape:
    return ModelShape(
        vocab_size=cfg["vocab_size"],
        hidden_size=cfg["hidden_size"],
        num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
        intermediate_size=cfg["intermediate_size"],
        max_position_embeddings=cfg["max_position_embeddings"],
        rope_theta=cfg.get("rope_theta", 10000.0),
        rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
    )


def load(model_dir: Path) -> DiffusionCoder:
    """An exported model, in f32, for resuming or checking: a model directory as `export`
    writes it, or one holding a GGUF file and no config.json (the shipped default,
    `assets/default-model`, whose Q8_0 matrices are dequantized: `gguf_read.py`)."""
    model_dir = Path(model_dir)
    ggufs = sorted(model_dir.glob("*.gguf"))
    if not (model_dir / "config.json").exists() and len(ggufs) == 1:
        import gguf_read

        meta, state = gguf_read.read(ggufs[0])
        model = DiffusionCoder(shape_from(gguf_read.config(meta, state)))
    else:
        model = DiffusionCoder(shape_of(model_dir))
        state = {}
        for file in sorted(model_dir.glob("*.safetensors")):
            state.update(load_file(file))
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model
