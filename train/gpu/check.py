"""What `train/tests/train/gpu_trainer.rs` holds the engine to: PyTorch's answers for an export.

    python train/gpu/check.py logits MODEL_DIR < {"sequences": [[ids...], ...]}
        -> {"logits": [[[f32 x vocab] x positions] x sequences]}  (f32 forward, bidirectional)
    python train/gpu/check.py fim-layouts TOKENIZER_JSON < {"eos_id": 1, "cases": [{prefix,
        middle, suffix, canvas_len, budget}, ...]}
        -> {"layouts": [{"ids": [...], "canvas_start": n}, ...]}  (data.fim_layout, as training)
    python train/gpu/check.py export-default OUT_DIR < {"mask_id": 0, "eos_id": 1}
        -> {"parameters": n}  (the default preset, random weights, exported as a GPU run does)
    python train/gpu/check.py export-interrupted OUT_DIR < {"stage": DIR}
        -> {"beside": [files], "stage": [files]}  (a second export failing mid-way)
    python train/gpu/check.py attention-paths - < {"seed": 0}
        -> {"largest_difference", "largest_output"}  (grouped against repeated key/value heads,
           the default preset's shape scaled down, random weights, f32)
    python train/gpu/check.py canvases PACK < {"kind": "fim" | "edit", "seq_len": 256,
        "overflow": 0.1, "sequences": n}
        -> {"canvases", "full", "eos_in_full", "outgrown", "below_plan"}  (the FIM or next-edit
           canvases training makes)
    python train/gpu/check.py edit-plans TOKENIZER_JSON < {"examples": [{"ids", "canvas_start"}]}
        -> {"planned": [n, ...]}  (the canvas the engine plans for each laid-out next edit)
    python train/gpu/check.py canvas-ends MODEL_DIR < {"pack": PACK, "sequences": n}
        -> {"fim": ..., "edit": ...}: per kind of canvas (one that holds its middle and EOS, one
           planned too short), the model's mean probability of EOS in the last slot with the
           whole canvas masked, and how often it puts EOS first there (validation split)
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


def attention_paths(_: str, request: dict) -> dict:
    """One model's hidden states with grouped key/value heads given to SDPA and with them
    repeated (what `train.py` uses where no fused kernel takes grouped heads): the same function."""
    import torch

    from model import DiffusionCoder, ModelShape, group_attention_heads

    torch.manual_seed(request.get("seed", 0))
    shape = ModelShape(hidden_size=128, num_hidden_layers=2, intermediate_size=256, vocab_size=512,
                       max_position_embeddings=128)
    model = DiffusionCoder(shape).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.05)
        ids = torch.randint(0, shape.vocab_size, (2, 96))
        grouped = model(ids)
        group_attention_heads(model, False)
        repeated = model(ids)
    return {
        "largest_difference": float((grouped - repeated).abs().max()),
        "largest_output": float(grouped.abs().max()),
    }


def compiled_trunk(_: str, request: dict) -> dict:
    """A random trunk's hidden states and gradients eager and through `model.compiled_trunk`
    (with `backend`, `aot_eager` by default: the graphs Inductor would compile, without its
    code generation), and how many graphs the compiler made for its layers (one: the layers
    share it, so a cold start compiles one layer)."""
    import torch
    from torch._dynamo.utils import counters

    from model import DiffusionCoder, ModelShape, compiled_trunk as compile_layers

    torch.manual_seed(request.get("seed", 0))
    shape = ModelShape(hidden_size=128, num_hidden_layers=3, intermediate_size=256, vocab_size=512,
                       max_position_embeddings=128)
    model = DiffusionCoder(shape)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.05)
    ids = torch.randint(0, shape.vocab_size, (2, 96))

    def run(trunk):
        model.zero_grad(set_to_none=True)
        hidden = trunk(ids)
        hidden.square().mean().backward()
        return hidden.detach(), torch.cat([p.grad.flatten() for p in model.model.parameters()])

    eager, eager_grads = run(model.model)
    counters.clear()
    compiled, compiled_grads = run(compile_layers(model.model, request.get("backend", "aot_eager")))
    return {
        "largest_difference": float((eager - compiled).abs().max()),
        "largest_output": float(eager.abs().max()),
        "largest_grad_difference": float((eager_grads - compiled_grads).abs().max()),
        "largest_grad": float(eager_grads.abs().max()),
        "graphs": int(counters["stats"]["unique_graphs"]),
        "layers": shape.num_hidden_layers,
    }


def canvases(pack_dir: str, request: dict) -> dict:
    """The FIM or next-edit (`kind`) canvases of `sequences` training sequences made with
    `overflow`: how many, how many hold a token in their last slot (no EOS: planned too
    short), and how many of those hold an EOS anywhere (none should); for next edits also how
    many outgrow the engine's plan (a canvas that held the whole new region and EOS would be
    longer than it) and how many full canvases are shorter than the plan (none should be); for
    FIM also the lengths of the canvases that hold their middle and EOS and how many of the
    16-slot ones hold a middle of at most 3 tokens (the engine plans 16 for the rest of a line,
    however short); for both, how many examples a sequence holds and the share of its positions
    they fill with their separators (`filled`; the rest is unmasked stream context)."""
    import numpy as np

    from data import BatchMaker, DataConfig, Pack, planned_edit_canvas

    pack = Pack(pack_dir)
    config = DataConfig(seq_len=request["seq_len"], overflow=request["overflow"],
                        edit_tries=request.get("edit_tries", DataConfig.edit_tries))
    maker = BatchMaker(pack, request.get("split", "train"), config, seed=request.get("seed", 0))
    kind = request.get("kind", "fim")
    made = {"fim": maker.fim_canvases, "edit": maker.edit_sequence_canvases}[kind]
    eos = pack.eos_id
    count = full = eos_in_full = outgrown = below_plan = short_in_16 = tokens = 0
    lengths: dict[int, int] = {}
    for ids, start, length in made(np.random.default_rng(request.get("seed", 0)), request["sequences"]):
        canvas = ids[start : start + length]
        count += 1
        tokens += len(ids)
        if canvas[-1] == eos:
            lengths[length] = lengths.get(length, 0) + 1
            short_in_16 += length == 16 and canvas.index(eos) <= 3
        planned = planned_edit_canvas(ids, start, maker.tokenizer) if kind == "edit" else None
        if canvas[-1] != eos:
            full += 1
            eos_in_full += eos in canvas
            below_plan += planned is not None and length < planned
            outgrown += planned is not None
        elif planned is not None:
            outgrown += canvas.index(eos) >= planned
    return {"canvases": count, "full": full, "eos_in_full": eos_in_full, "outgrown": outgrown,
            "below_plan": below_plan, "lengths": {str(k): v for k, v in sorted(lengths.items())},
            "short_in_16": short_in_16, "per_sequence": count / max(1, request["sequences"]),
            "filled": (tokens + count - request["sequences"]) / (request["sequences"] * request["seq_len"])}


def edit_plans(tokenizer_json: str, request: dict) -> dict:
    """The canvas the trainer works out the engine plans for each laid-out next edit
    (`data.planned_edit_canvas`: from the old region between the markers)."""
    from tokenizers import Tokenizer

    from data import planned_edit_canvas

    tokenizer = Tokenizer.from_file(tokenizer_json)
    return {"planned": [planned_edit_canvas(e["ids"], e["canvas_start"], tokenizer) for e in request["examples"]]}


def canvas_ends(model_dir: str, request: dict) -> dict:
    """Whether a model tells a canvas planned too short from one that holds its middle, for FIM
    and next edits (`train.canvas_ends`, what the GPU run logs at its end): what a canvas's
    growth depends on."""
    from contextlib import nullcontext

    import torch

    from data import Pack
    from export import load
    from train import canvas_ends as ends

    model = load(Path(model_dir))
    positions = model.model.rope_cos.shape[0]
    return ends(model, Pack(request["pack"]), request.get("seq_len", positions), request["sequences"],
                torch.device("cpu"), nullcontext(), request.get("seed", 1))


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


def export_interrupted(out: str, request: dict) -> dict:
    """Two exports of a small model into `out` through the stage `request["stage"]`, the second
    failing after its first shard (as a full disk or a killed run leaves it): the files left
    beside `out` (in its folder) and in the stage."""
    import torch

    import export as exporting
    from model import DiffusionCoder
    from train import PRESETS

    class PackMeta:
        meta = {"mask_id": 1, "eos_id": 2}

    torch.manual_seed(0)
    model = DiffusionCoder(PRESETS["tiny"]["shape"])
    out_dir, stage = Path(out), Path(request["stage"])
    exporting.SHARD_PAYLOAD = 64 * 1024  # several shards of a tiny model
    exporting.export(model, out_dir, PackMeta(), "f32", {"steps": [], "evals": []}, tokenizer=False, stage=stage)
    written = exporting.save_file
    calls = 0

    def failing(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("simulated: no space left on the device")
        return written(*args, **kwargs)

    exporting.save_file = failing
    try:
        exporting.export(model, out_dir, PackMeta(), "f32", {"steps": [], "evals": []}, tokenizer=False, stage=stage)
    except OSError:
        pass

    def files(folder: Path) -> list[str]:
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())

    return {"beside": files(out_dir.parent), "stage": files(stage)}


def main() -> int:
    command, path = sys.argv[1], sys.argv[2]
    request = json.load(sys.stdin)
    commands = {
        "logits": logits,
        "fim-layouts": fim_layouts,
        "attention-paths": attention_paths,
        "compiled-trunk": compiled_trunk,
        "canvases": canvases,
        "edit-plans": edit_plans,
        "canvas-ends": canvas_ends,
        "export-default": export_default,
        "export-interrupted": export_interrupted,
    }
    answer = commands[command](path, request)
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
