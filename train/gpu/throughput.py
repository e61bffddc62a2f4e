"""Throughput of the trainer's step on random tokens: no pack needed, any device.

    python train/gpu/throughput.py [--preset default] [--batch 2] [--steps 5] [--device cpu|cuda]
        [--compile] [--masked 0.3]

Times the training step of `train.py` (trunk, logits at the masked positions, weighted
cross-entropy, backward, clipping, Muon + AdamW) after warm-up steps, and reports tokens/s and
the FLOP rate from `ModelShape.flops_per_token`. On the CPU it gives the measured half of the GPU
estimate (train/gpu/estimate.md); on a GPU it is the probe to run when the pack is not ready.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model import DiffusionCoder, compiled_trunk  # noqa: E402
from train import PRESETS, optimizers, train_step  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="default")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--masked", type=float, default=0.3, help="share of positions scored")
    ap.add_argument("--lr-muon", type=float, default=0.02)
    ap.add_argument("--lr-adam", type=float, default=3e-3)
    args = ap.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    shape = PRESETS[args.preset]["shape"]
    model = DiffusionCoder(shape).to(device)
    trunk = compiled_trunk(model.model) if args.compile else model.model
    opts = optimizers(model, args, fused=cuda)
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda)
    t = shape.max_position_embeddings
    gen = torch.Generator().manual_seed(0)

    def batch():
        inputs = torch.randint(0, shape.vocab_size, (args.batch, t), generator=gen)
        n = int(args.batch * t * args.masked)
        index = torch.randperm(args.batch * t, generator=gen)[:n].sort().values
        targets = torch.randint(0, shape.vocab_size, (n,), generator=gen)
        weights = torch.full((n,), 1.0 / n)
        return [x.to(device) for x in (inputs, index, targets, weights)]

    def step(*batch):
        return train_step(model, trunk, opts, autocast, *batch)

    data = [batch() for _ in range(args.warmup + args.steps)]
    started = time.time()
    for b in data[: args.warmup]:
        step(*b)
    if cuda:
        torch.cuda.synchronize()
    warm = time.time() - started
    started = time.time()
    for b in data[args.warmup :]:
        step(*b)
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.time() - started
    tokens = args.batch * t * args.steps
    rate = tokens / elapsed
    flops = shape.flops_per_token(args.masked)
    report = {
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "threads": torch.get_num_threads(),
        "preset": args.preset,
        "parameters": shape.parameters(),
        "batch": args.batch,
        "seq_len": t,
        "compile": args.compile,
        "warmup_seconds": round(warm, 2),
        "seconds_per_step": round(elapsed / args.steps, 4),
        "tokens_per_s": round(rate, 1),
        "train_flops_per_token": flops,
        "achieved_tflops": round(rate * flops / 1e12, 4),
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
