"""What `train/tests/train/gpu_trainer.rs` holds the engine to: PyTorch's answers for an export.

    python train/gpu/check.py logits MODEL_DIR < {"sequences": [[ids...], ...]}
        -> {"logits": [[[f32 x vocab] x positions] x sequences]}  (f32 forward, bidirectional)
    python train/gpu/check.py fim-layouts TOKENIZER_JSON < {"eos_id": 1, "cases": [{prefix,
        middle, suffix, canvas_len, budget}, ...]}
        -> {"layouts": [{"ids": [...], "canvas_start": n}, ...]}  (data.fim_layout, as training)
    python train/gpu/check.py export-default OUT_DIR < {"mask_id": 0, "eos_id": 1}
        -> {"parameters": n}  (the default preset, random weights, exported as a GPU run does)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def logits(model_dir: str, request: dict) -> dict:
    import torch

    from export import load

    model = load(Path(model_dir)).eval()
    out = []
    with torch.no_grad():
        for ids in request["sequences"]:
            out.append(model(torch.tensor([ids])).squeeze(0).tolist())
    return {"logits": out}


def fim_layouts(tokenizer_json: str, request: dict) -> dict:
    from tokenizers import Tokenizer

    from data import fim_layout

    tokenizer = Tokenizer.from_file(tokenizer_json)
    layouts = []
    for case in request["cases"]:
        enc = tokenizer.encode_batch([case["prefix"], case["middle"], case["suffix"]], add_special_tokens=False)
        prefix, middle, suffix = (e.ids for e in enc)
        ids, start = fim_layout(prefix, middle, suffix, case["canvas_len"], case["budget"], request["eos_id"])
        layouts.append({"ids": ids, "canvas_start": start})
    return {"layouts": layouts}


def export_default(out: str, request: dict) -> dict:
    """The default preset with random weights, exported as a GPU run exports it (bf16, no
    tokenizer): what the engine must load and a device call must return."""
    import torch

    from export import export
    from model import DiffusionCoder
    from train import PRESETS

    class PackMeta:
        meta = {"mask_id": request["mask_id"], "eos_id": request["eos_id"]}

    torch.manual_seed(0)
    model = DiffusionCoder(PRESETS["default"]["shape"])
    with torch.no_grad():  # zero-initialised projections would hide half the weights
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    export(model, Path(out), PackMeta(), "bf16", {"steps": [], "evals": []}, tokenizer=False)
    return {"parameters": sum(p.numel() for p in model.parameters())}


def main() -> int:
    command, path = sys.argv[1], sys.argv[2]
    request = json.load(sys.stdin)
    commands = {"logits": logits, "fim-layouts": fim_layouts, "export-default": export_default}
    answer = commands[command](path, request)
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
