"""Trains redraft's diffusion coder for a wall-clock budget and exports what the engine loads.

    python train/gpu/train.py --pack PACK --out DIR --seconds 420 [--preset default|tiny]
        [--resume MODEL_DIR] [--batch 256] [--export-every 90] [--no-compile | --compile-backend B]

The learning rate is keyed to the clock, not to a step count: a short warm-up by steps, flat
until `--decay-from` of the budget, then linear to zero at its end, so whatever the machine's
speed, the run ends annealed. The clock starts after torch.compile's warm-up (two steps whose
updates are kept); if compiling fails there, the error is logged (`compile_error`) and the run
goes on with the eager trunk. Every `--export-every` seconds and at the end the model is evaluated on fixed
validation batches and exported (`export.py`), so a run stopped early still leaves a model.
`--resume` starts from an exported model (weights only: a new window is a warm restart).
A step that runs out of GPU memory (a card smaller than planned, attention that fell back to an
unfused kernel, an eager trunk) halves the batch and the run goes on from the next step
(`out_of_memory` in the log); the step records carry the peak GPU memory.

Speed: bf16 autocast over f32 master weights, flash SDPA (bidirectional), the trunk's layers compiled,
logits only at masked positions (gathered by indices the data workers compute, so a step never
waits on the host), Muon for the trunk's matrices and fused AdamW for embeddings, head and norms,
batches made by worker processes ahead of the GPU. It reports tokens/s and model FLOP utilisation
(`--peak-tflops`, default the bf16 matrix rate measured on the lent H200 and H100, ~790).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data import KINDS, BatchMaker, DataConfig, Pack, decompress  # noqa: E402
from export import export, load, log_json  # noqa: E402
from model import DiffusionCoder, ModelShape, compiled_trunk, group_attention_heads, grouped_attention_fused  # noqa: E402

PRESETS = {
    # ~27M parameters (19M in the trunk): sized for ~7 minutes on one H200 and for a CPU
    # completion in a few hundred milliseconds at 1k tokens of context (see train/gpu/README.md).
    "default": dict(shape=ModelShape(), batch=256, seq_len=1024),
    # For the small-scale loss curve on the CPU (train/gpu/estimate.md): the default's vocabulary
    # and objective at a size two cores train in minutes.
    "small": dict(
        shape=ModelShape(
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=384,
            max_position_embeddings=256,
        ),
        batch=16,
        seq_len=256,
    ),
    # For the CPU round trip in CI: seconds per step on 2 cores.
    "tiny": dict(
        shape=ModelShape(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            max_position_embeddings=256,
        ),
        batch=8,
        seq_len=256,
    ),
}
KIND_WEIGHTS = {"plain": 0.45, "fim": 0.4, "edit": 0.15}
# No periodic export starts this close (seconds) to the end of training: the last export follows
# within it, and an export cut by the command's limit is the one way to leave two behind.
QUIET_BEFORE_END = 30.0


class Batches(torch.utils.data.IterableDataset):
    """Batches `first, first + 1, ...` of the training split; worker `w` of `W` makes the steps
    `= w mod W`, and the loader takes workers in turn, so the order is the steps' order."""

    def __init__(self, pack_dir: str, config: DataConfig, seed: int, batch: int, first: int, fail: bool = False):
        self.pack_dir, self.config, self.seed, self.batch, self.first = pack_dir, config, seed, batch, first
        self.fail = fail  # tests: a worker process dies after its first batch (`--fail-batches`)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        workers, me = (1, 0) if info is None else (info.num_workers, info.id)
        made = 0
        maker = BatchMaker(Pack(self.pack_dir), "train", self.config, self.seed)
        step = self.first + me
        while True:
            if self.fail and info is not None and made == 1:
                os._exit(1)
            yield to_tensors(maker.batch(step, self.batch))
            made += 1
            step += workers


def to_tensors(batch) -> dict:
    """The model's input plus, per masked position, its flat index, target and loss weight: each
    kind's masked positions share its weight so every kind contributes its mean."""
    flat = np.flatnonzero(batch.targets >= 0)
    rows = flat // batch.targets.shape[1]
    kind_of = batch.kinds[rows]
    weights = np.zeros(len(flat), dtype=np.float32)
    present = [k for k in range(len(KINDS)) if (kind_of == k).any()]
    total = sum(KIND_WEIGHTS[KINDS[k]] for k in present)
    for k in present:
        sel = kind_of == k
        weights[sel] = KIND_WEIGHTS[KINDS[k]] / total / sel.sum()
    return {
        "inputs": torch.from_numpy(batch.inputs),
        "index": torch.from_numpy(flat.astype(np.int64)),
        "targets": torch.from_numpy(batch.targets.reshape(-1)[flat]),
        "weights": torch.from_numpy(weights),
        "kind": torch.from_numpy(kind_of.astype(np.int64)),
    }


def masked_logits(model: DiffusionCoder, trunk, inputs: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    hidden = trunk(inputs)
    rows = hidden.reshape(-1, hidden.shape[-1]).index_select(0, index)
    return model.lm_head(rows).float()


def train_step(model, trunk, opts, autocast, inputs, index, targets, weights) -> torch.Tensor:
    """One update: logits at the masked positions, the weighted cross-entropy, backward,
    clipping, every optimizer's step. Returns the loss (on the device: reading it syncs)."""
    with autocast:
        logits = masked_logits(model, trunk, inputs, index)
    loss = (F.cross_entropy(logits, targets, reduction="none") * weights).sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    for opt in opts:
        opt.step()
        opt.zero_grad(set_to_none=True)
    return loss.detach()


def optimizers(model: DiffusionCoder, args, fused: bool):
    matrices = [p for n, p in model.model.layers.named_parameters() if p.dim() == 2]
    rest = [p for n, p in model.named_parameters() if not (n.startswith("model.layers.") and p.dim() == 2)]
    muon = torch.optim.Muon(matrices, lr=args.lr_muon, momentum=0.95, weight_decay=0.0, adjust_lr_fn="original")
    adam = torch.optim.AdamW(rest, lr=args.lr_adam, betas=(0.9, 0.95), weight_decay=0.0, fused=fused)
    for group in muon.param_groups + adam.param_groups:
        group["base_lr"] = group["lr"]
    return [muon, adam]


def lr_factor(step: int, fraction: float, args) -> float:
    warm = min(1.0, (step + 1) / args.warmup_steps)
    if fraction <= args.decay_from:
        return warm
    return warm * max(0.0, (1.0 - fraction) / (1.0 - args.decay_from))


@torch.no_grad()
def evaluate(model, trunk, batches: list[dict], device, autocast, eos: int | None = None) -> dict:
    """Per kind: the loss and accuracy over the masked tokens, and (with `eos`) the accuracy over
    those that are not EOS, `text_accuracy`: a FIM canvas's EOS padding is easy and a third of
    its slots, so the plain accuracy flatters the middles."""
    model.eval()
    sums = {k: [0.0, 0.0, 0, 0.0, 0] for k in KINDS}  # loss, correct, count, text correct, text count
    for b in batches:
        with autocast:
            logits = masked_logits(model, trunk, b["inputs"].to(device), b["index"].to(device))
        targets, kind = b["targets"].to(device), b["kind"].to(device)
        loss = F.cross_entropy(logits, targets, reduction="none")
        correct = (logits.argmax(-1) == targets).float()
        text = targets != (-1 if eos is None else eos)
        for k, name in enumerate(KINDS):
            sel = kind == k
            n = int(sel.sum())
            if n:
                sums[name][0] += float(loss[sel].sum())
                sums[name][1] += float(correct[sel].sum())
                sums[name][2] += n
                sums[name][3] += float(correct[sel & text].sum())
                sums[name][4] += int((sel & text).sum())
    model.train()
    return {
        name: {"loss": s[0] / s[2], "accuracy": s[1] / s[2], "tokens": s[2],
               "text_accuracy": s[3] / s[4] if s[4] else None}
        for name, s in sums.items() if s[2]
    }


@torch.no_grad()
def canvas_ends(model, pack: Pack, seq_len: int, sequences: int, device, autocast, seed: int = 1) -> dict:
    """Whether the model tells a canvas that holds its middle from one planned too short (FIM:
    `DataConfig.overflow`; next edits: every one whose new region outgrows the engine's plan, cut
    to the plan or more), which is what makes the engine grow a canvas: on the validation split,
    per kind, the mean probability of EOS in the last slot with the canvas masked, and how often
    EOS is the model's first choice there. Few validation edits outgrow their plan (~2%, some 40
    distinct ones), so the next-edit `short` figure is the noisier."""
    model.eval()
    maker = BatchMaker(pack, "valid", DataConfig(seq_len=seq_len, overflow=0.5), seed)
    eos, mask = pack.eos_id, int(pack.meta["mask_id"])
    rng = np.random.default_rng(seed)
    # Next edits: every one that outgrows the engine's plan laid out as the engine first sees it,
    # drawn until there are `sequences` of each kind or 50 times that were drawn (most fit).
    examples = {"fim": maker.fim_canvases(rng, sequences),
                "edit": maker.edit_canvases(rng, 50 * sequences, outgrown_short=1.0)}
    ends = {}
    for name, canvases in examples.items():
        seen = {"holds": [], "short": []}
        for ids, start, length in canvases:
            kind = "short" if ids[start + length - 1] != eos else "holds"
            if name == "edit" and len(seen[kind]) >= sequences:
                if min(len(rows) for rows in seen.values()) >= sequences:
                    break
                continue
            masked = list(ids)
            masked[start : start + length] = [mask] * length
            with autocast:
                logits = model(torch.tensor([masked], device=device))[0, start + length - 1]
            p = torch.softmax(logits.float(), -1)
            seen[kind].append((float(p[eos]), int(p.argmax()) == eos))
        if seen["holds"] or seen["short"]:
            ends[name] = {
                kind: {
                    "canvases": len(rows),
                    "p_eos_last": round(sum(r[0] for r in rows) / max(1, len(rows)), 4),
                    "eos_first_last": round(sum(r[1] for r in rows) / max(1, len(rows)), 4),
                }
                for kind, rows in seen.items()
            }
    model.train()
    return ends


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", required=True)
    ap.add_argument("--out", required=True, help="the exported model directory (replaced at each export)")
    ap.add_argument("--seconds", type=float, required=True, help="training time after the compile warm-up")
    ap.add_argument("--until", type=float, help="a Unix time by which the last export must be written: "
                    "training ends early enough for it (the schedule is fitted to what is left)")
    ap.add_argument("--reserve", type=float, default=20.0, help="seconds kept for the last evaluation and export")
    ap.add_argument("--no-tokenizer", action="store_true", help="leave tokenizer.json out of the export "
                    "(the pack has it; saves a returned file)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="default")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--resume", help="an exported model directory to start from")
    ap.add_argument("--export-every", type=float, default=90.0, help="seconds between the exports a cut "
                    "run falls back on (none in the last %d s of training: the last export follows)" % QUIET_BEFORE_END)
    ap.add_argument("--stage", help="a folder outside the export's own where each export is written before "
                    "it is swapped in (default: a new temporary folder; used when on the same file system)")
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--lr-muon", type=float, default=0.02)
    ap.add_argument("--lr-adam", type=float, default=3e-3)
    ap.add_argument("--warmup-steps", type=int, default=40)
    ap.add_argument("--decay-from", type=float, default=0.55)
    ap.add_argument("--seed", type=int, default=0)
    # Six workers make ~4M tokens/s of batches, several times what one GPU takes, with a dozen
    # batches (~50 MB) in shared memory.
    ap.add_argument("--workers", type=int, default=max(1, min(6, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16", help="of the export")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile's backend (`aot_eager` "
                    "keeps the graph capture without Triton); if compiling fails, the run goes on eager")
    ap.add_argument("--max-steps", type=int, help="stop after this many steps (tests)")
    ap.add_argument("--peak-tflops", type=float, default=790.0, help="for the utilisation figure")
    ap.add_argument("--overflow", type=float, default=DataConfig.overflow, help="share of FIM "
                    "canvases planned shorter than their middle (filled to the last slot, no EOS); above 0, "
                    "next edits that outgrow the engine's planned canvas get one too (OUTGROWN_SHORT in data.py)")
    ap.add_argument("--oom-above", type=int, help="tests: a step of more sequences than this fails as out of "
                    "GPU memory does")
    ap.add_argument("--fail-step", type=int, help="tests: the first try of this step fails "
                    "with a RuntimeError, as a compiled kernel or a lost worker can")
    ap.add_argument("--fail-batches", action="store_true", help="tests: the batch loader's workers die after "
                    "their first batch (as they do when shared memory runs out)")
    ap.add_argument("--nan-step", type=int, help="tests: a weight becomes NaN after this step (as a diverging "
                    "run's do)")
    args = ap.parse_args(argv)

    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    cuda = device.type == "cuda"
    torch.manual_seed(args.seed)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    preset = PRESETS[args.preset]
    stage = Path(args.stage) if args.stage else Path(tempfile.mkdtemp(prefix="redraft-export-"))
    decompress(args.pack)
    pack = Pack(args.pack)
    if args.resume:
        model = load(Path(args.resume))
        shape = model.shape
    else:
        shape = ModelShape(**{**preset["shape"].to_dict(), "vocab_size": pack.vocab_size})
        model = DiffusionCoder(shape)
    if shape.vocab_size != pack.vocab_size:
        raise SystemExit(f"the model's vocabulary ({shape.vocab_size}) is not the pack's ({pack.vocab_size})")
    if args.resume and (Path(args.resume) / "tokenizer.json").exists():
        # Same size is not same tokens: a pack rebuilt with another BPE would train the
        # model's ids on other meanings.
        ours = json.loads((Path(args.resume) / "tokenizer.json").read_text())["model"]["vocab"]
        theirs = json.loads((pack.path / "tokenizer.json").read_text())["model"]["vocab"]
        if ours != theirs:
            raise SystemExit(f"{args.resume}/tokenizer.json is not the pack's tokenizer: resume with the pack it was trained on")
    model.to(device)
    # Grouped heads straight into a fused attention kernel where one takes them, else repeated
    # (an unfused fallback would hold every head's 1,024 x 1,024 scores: slow and ~0.4 GiB a
    # sequence more).
    grouped = not cuda or grouped_attention_fused(shape, device)
    group_attention_heads(model, grouped)
    batch = args.batch or preset["batch"]
    config = DataConfig(seq_len=shape.max_position_embeddings, overflow=args.overflow)
    trunk = model.model
    compile_error = None
    if not args.no_compile:
        try:
            trunk = compiled_trunk(model.model, args.compile_backend)
        except Exception as error:  # an unknown backend: the run goes on eager
            compile_error = error
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda)
    opts = optimizers(model, args, fused=cuda)

    valid = BatchMaker(pack, "valid", config, seed=1234)
    eval_batches = [to_tensors(valid.batch(i, min(batch, 32))) for i in range(args.eval_batches)]

    workers = args.workers

    def make_batches(size: int, first: int):
        loader = torch.utils.data.DataLoader(
            Batches(args.pack, config, args.seed, size, first=first, fail=args.fail_batches and workers > 0),
            batch_size=None,
            num_workers=workers,
            pin_memory=cuda,
            prefetch_factor=2 if workers else None,
            persistent_workers=workers > 0,
        )
        return iter(loader)
    masked_fraction = 0.3  # measured below, per step; this is the planning figure
    flops = shape.flops_per_token(masked_fraction)
    log = {
        "shape": shape.to_dict(),
        "parameters": shape.parameters(),
        "batch": batch,
        "seq_len": config.seq_len,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
        "attention": "grouped" if grouped else "repeated heads (no fused kernel takes grouped ones here)",
        "args": vars(args),
        "steps": [],
        "evals": [],
    }
    print(f"model: {shape.parameters() / 1e6:.1f}M parameters {shape.to_dict()}; batch {batch} x {config.seq_len}; "
          f"device {log['device']}; attention {log['attention']}", flush=True)

    def step_once(b: dict, step: int, fraction: float) -> torch.Tensor:
        for opt in opts:
            for group in opt.param_groups:
                group["lr"] = group["base_lr"] * lr_factor(step, fraction, args)
        if args.oom_above is not None and b["inputs"].shape[0] > args.oom_above:
            raise torch.cuda.OutOfMemoryError(f"simulated (--oom-above {args.oom_above})")
        if step == args.fail_step and step not in failed_steps:
            failed_steps.add(step)
            raise RuntimeError(f"simulated (--fail-step {args.fail_step})")
        on_device = (b[k].to(device, non_blocking=True) for k in ("inputs", "index", "targets", "weights"))
        return train_step(model, trunk, opts, autocast, *on_device)

    failed_steps: set[int] = set()

    def loader_failed(error: Exception, waiting: bool) -> bool:
        # A worker that dies (no shared memory, no file descriptors left on the machine) would
        # end the run, before its first export in the warm-up: the batches are made in this
        # process from then on. PyTorch raises it in the main thread wherever that is: waiting
        # for a batch, or in the middle of a step (its handler of a child's exit).
        nonlocal batches, workers
        if workers == 0 or not (waiting or "DataLoader worker" in str(error)):
            return False
        text = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
        log.setdefault("data_errors", []).append({"step": step, "error": text})
        print(f"the batch loader failed at step {step}, making batches in this process: {text}", flush=True)
        workers = 0
        batches = make_batches(batch, step)
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        return True

    def next_batch() -> dict:
        try:
            return next(batches)
        except Exception as error:
            if not loader_failed(error, waiting=True):
                raise
            return next(batches)

    def shrink(error: Exception) -> None:
        # A lost window costs more than a smaller batch: halve it, drop the failed step's
        # gradients (no optimizer stepped) and go on with batches of the new size.
        nonlocal batch, batches
        if batch <= 1:
            raise error
        text = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
        # The failed step's tensors live on in the traceback's frames: let them go, so that
        # emptying the cache below returns their memory.
        error.__traceback__ = None
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        batches = None  # its workers stop
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
        batch //= 2
        log["batch"] = batch
        log.setdefault("out_of_memory", []).append({"step": step, "batch": batch, "error": text})
        print(f"out of memory at step {step}: batch halved to {batch} x {config.seq_len} ({text})", flush=True)
        batches = make_batches(batch, step)

    def go_eager(error: Exception) -> None:
        # A window is too short to lose to a compiler bug: the eager trunk is slower, not wrong.
        nonlocal trunk
        trunk = model.model
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        text = f"{type(error).__name__}: {error}".strip()
        log["compile_error"] = text[:4000]
        print(f"torch.compile failed, training eager: {text.splitlines()[0][:300]}", flush=True)

    if compile_error is not None:
        go_eager(compile_error)
    step = 0
    batches = make_batches(batch, step)
    compile_started = time.time()
    warm = 0
    while warm < 2:  # compile warm-up (kept: two small updates at warm-up rates)
        b = next_batch()
        try:
            step_once(b, step, 0.0)
        except torch.cuda.OutOfMemoryError as error:
            shrink(error)
            continue
        except Exception as error:
            if loader_failed(error, waiting=False):
                continue  # the step again, on a batch made here
            if trunk is model.model:
                raise
            go_eager(error)  # compiling the forward or backward failed: no optimizer has stepped
            continue  # the step again, eager
        step += 1
        warm += 1
    if cuda:
        torch.cuda.synchronize()
    log["compile_seconds"] = time.time() - compile_started
    print(f"warm-up (compile) {log['compile_seconds']:.1f} s", flush=True)

    def weights_finite() -> bool:
        with torch.no_grad():
            return bool(torch.stack([p.isfinite().all() for p in model.parameters()]).all())

    def stop(why: str) -> None:
        log.setdefault("error", {"step": step, "error": why})
        print(f"step {step}: {why}", flush=True)

    def do_export(elapsed: float) -> bool:
        # A diverged run (a NaN or inf weight) exports nothing: the last export, of weights
        # before it, stays. False: the run is to stop.
        if not weights_finite():
            stop("the weights are not finite (the run diverged): not exported, the last export is kept")
            return False
        # The eager trunk: a compiled one would compile again for inference mode. A failed
        # evaluation (out of memory, say) is logged; the export is what the window is for.
        try:
            report = evaluate(model, model.model, eval_batches, device, autocast, eos=pack.eos_id)
            log["evals"].append({"step": step, "seconds": elapsed, "tokens": tokens_seen, **report})
            summary = ", ".join(
                f"{k} {v['loss']:.3f} ({100 * v['accuracy']:.1f}%"
                + ("" if k == "plain" or v["text_accuracy"] is None else f", {100 * v['text_accuracy']:.1f}% of text")
                + ")"
                for k, v in report.items())
        except Exception as error:
            text = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
            log.setdefault("eval_errors", []).append({"step": step, "error": text})
            summary = f"failed ({text})"
            model.train()
            if cuda:
                torch.cuda.empty_cache()
        export(model, Path(args.out), pack, args.dtype, log, tokenizer=not args.no_tokenizer, stage=stage)
        print(f"[{elapsed:6.1f} s] step {step}: validation {summary}; exported to {args.out}", flush=True)
        return True

    start = time.time()
    if args.until is not None:
        left = args.until - start - args.reserve
        if left < args.seconds:
            print(f"training for {left:.0f} s, not {args.seconds:.0f} s: the deadline is near", flush=True)
            args.seconds = max(1.0, left)
    last_export = start
    window_start, window_tokens, window_masked = start, 0, 0
    tokens_seen = 0
    losses = []
    while True:
        elapsed = time.time() - start
        fraction = elapsed / args.seconds
        if fraction >= 1.0 or (args.max_steps is not None and step >= args.max_steps):
            break
        b = next_batch()
        try:
            losses.append(step_once(b, step, fraction))
        except torch.cuda.OutOfMemoryError as error:
            shrink(error)
            continue
        except Exception as error:
            if loader_failed(error, waiting=False):
                continue  # the step again, on a batch made here
            if trunk is not model.model:
                go_eager(error)  # a recompile (after the batch was halved, say) failed
                continue
            # The last export comes from the weights as they are: an unannealed model is
            # worth more than none.
            text = f"{type(error).__name__}: {error}".strip()
            log["error"] = {"step": step, "error": text[:4000]}
            print(f"step {step} failed, stopping to export: {text.splitlines()[0][:300]}", flush=True)
            break
        n = b["inputs"].numel()
        tokens_seen += n
        window_tokens += n
        window_masked += b["index"].numel()
        step += 1
        if step == args.nan_step:
            with torch.no_grad():
                next(model.parameters()).fill_(float("nan"))
        if step % 20 == 0 or step == 3:
            mean_loss = float(torch.stack(losses).mean())
            losses.clear()
            now = time.time()
            rate = window_tokens / (now - window_start)
            frac = window_masked / max(1, window_tokens)
            mfu = rate * shape.flops_per_token(frac) / (args.peak_tflops * 1e12) if cuda else None
            record = {"step": step, "seconds": round(now - start, 2), "tokens": tokens_seen, "loss": mean_loss,
                      "tokens_per_s": round(rate), "masked_fraction": round(frac, 3),
                      "mfu": None if mfu is None else round(mfu, 4), "lr_factor": round(lr_factor(step, fraction, args), 4),
                      "gpu_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if cuda else None}
            log["steps"].append(record)
            mfu_text = f", MFU {100 * mfu:.1f}%, peak {record['gpu_memory_gib']:.1f} GiB" if mfu is not None else ""
            print(f"[{now - start:6.1f} s] step {step}: loss {mean_loss:.4f}, {rate:,.0f} tok/s{mfu_text}", flush=True)
            window_start, window_tokens, window_masked = now, 0, 0
            if not math.isfinite(mean_loss):
                stop(f"the loss is {mean_loss} (the run diverged): stopping, the last export is kept")
                break
        now = time.time()
        if now - last_export >= args.export_every and start + args.seconds - now > QUIET_BEFORE_END:
            try:
                exported = do_export(now - start)
            except Exception as error:  # the next export may do; the run goes on
                text = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
                log.setdefault("export_errors", []).append({"step": step, "error": text})
                print(f"export at step {step} failed: {text}", flush=True)
                exported = True
            last_export = time.time()
            if not exported:
                break
    log["train_seconds"] = time.time() - start
    log["tokens_seen"] = tokens_seen
    log["tokens_per_s"] = tokens_seen / max(1e-9, log["train_seconds"])
    log["flops_per_token"] = flops
    try:  # a diagnostic: whatever happens to it, the export below is what the window is for
        ends = canvas_ends(model, pack, config.seq_len, 150 if cuda else 10, device, autocast)
        log["canvas_ends"] = ends
        for name, kinds in ends.items():
            print(f"canvas ends ({name}): P(EOS in the last slot) {kinds['holds']['p_eos_last']:.3f} where the "
                  f"middle fits, {kinds['short']['p_eos_last']:.3f} where the canvas is planned too short", flush=True)
    except Exception as error:
        log["canvas_ends"] = {"error": f"{type(error).__name__}: {error}"[:1000]}
        print(f"canvas ends: failed ({type(error).__name__}: {error})", flush=True)
        model.train()
    if not do_export(log["train_seconds"]):
        # Nothing of this run's end is worth keeping; the log says why, beside the last export.
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_log.json.new").write_text(log_json(log))
        os.replace(out / "train_log.json.new", out / "train_log.json")
    print(f"done: {step} steps, {tokens_seen:,} tokens in {log['train_seconds']:.0f} s "
          f"({log['tokens_per_s']:,.0f} tok/s)" + (", stopped early by a failed step" if "error" in log else ""),
          flush=True)
    return 1 if "error" in log else 0


if __name__ == "__main__":
    sys.exit(main())
