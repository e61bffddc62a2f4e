"""Training batches from the pack that `scripts/build-pack` writes (pre-tokenized by the Rust side).

The pack (`meta.json` names every file; a file may be stored `.xz`-compressed):
- `tokenizer.json`, the byte-level BPE the engine ships with the model;
- `train.tokens` / `valid.tokens`: little-endian uint16 ids of every file of a split, each file
  followed by `<|file_sep|>`; `train.offsets` / `valid.offsets`: uint64 start of each file, plus
  the end;
- `edits-train.tokens` / `edits-valid.tokens` + `.index` (uint32 rows: start, length, canvas
  start, canvas length): next-edit sequences laid out by the engine's own code
  (`train/src/train/examples/edit.rs`), the canvas holding the new region then EOS.

A sequence of `seq_len` tokens is one of three kinds, each scored by its own mean cross-entropy
over masked positions and mixed with fixed weights (so a 20-slot canvas weighs what it should
against 500 masked plain tokens):
- plain: a window of the token stream (files packed back to back), every position maskable;
- fim: fill-in-the-middle examples laid out exactly as the engine lays out a request for a
  bidirectional model (`Engine::canvas`, `FimLayout::Infill`): `prefix [canvas] suffix`, the
  prefix, middle and suffix tokenized separately, the canvas being the middle then EOS up to its
  length, the context fitted by the engine's `fit_context` rule. `train/tests/train/gpu_trainer.rs`
  checks this layout against the engine token for token. A share of the canvases
  (`DataConfig.overflow`) is shorter than its middle: it holds the middle's first tokens and no
  EOS, with the suffix after the whole middle. That is what the engine reads as "the middle goes
  on" (a token in a canvas's last slot grows it, `Sampler::grow`): the engine plans 16, 24 or 48
  slots by the unit at the cursor, and ~7% of single lines of the validation crates are longer
  than the slots planned for them. A sequence holds as many examples as fit, each context budget
  drawn from `fim_budgets`, the last one taking what is left (`fim_tail_budget`); an example's
  place is its budget and the longest canvas, a shorter canvas leaving its slots to the
  context; what is left after them (~1%) is unmasked context from the stream;
- edit: next-edit sequences from the pack, then unmasked stream context. The pack's canvases
  always hold the whole new region and EOS; the engine plans an edit's canvas from the old
  region's length (`canvas_length`) and grows it when the model writes a token in its last slot,
  which an insertion longer than that needs. So half of the edits whose new region outgrows that
  plan (`OUTGROWN_SHORT`; none when `DataConfig.overflow` is 0) get a canvas from the plan's
  length to the whole new region, holding its first tokens and no EOS, the rest of the layout
  after it: what the engine shows the model before it grows the canvas.

Masking follows MDLM: one rate `t` per sequence, stratified over the batch, each maskable position
masked with probability `t` (at least one). Batch `s` is a pure function of (seed, s), so a resumed
run sees the batches an unbroken one would.
"""

from __future__ import annotations

import json
import lzma
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SPAN_KINDS = ("line_rest", "lines", "block", "random")
SPAN_WEIGHTS = (0.4, 0.25, 0.15, 0.2)
KINDS = ("plain", "fim", "edit")


def read_array(pack: Path, name: str, dtype) -> np.ndarray:
    """A pack array, memory-mapped (so data workers share one copy); a `.xz` one is
    decompressed once first, outside the pack (which travels to the GPU and must stay small):
    into `$REDRAFT_PACK_RAW`, else a folder of the system's temporary directory."""
    path = pack / name
    if path.exists():
        return np.memmap(path, dtype=dtype, mode="r")
    xz = pack / (name + ".xz")
    if not xz.exists():
        raise FileNotFoundError(f"{path} (or {xz.name}) is missing: build the pack with scripts/build-pack")
    raw = raw_dir(pack) / name
    if not raw.exists() or raw.stat().st_mtime < xz.stat().st_mtime:
        raw.parent.mkdir(parents=True, exist_ok=True)
        partial = raw.with_name(raw.name + f".{os.getpid()}.partial")
        with lzma.open(xz) as src, open(partial, "wb") as dst:
            while chunk := src.read(1 << 24):
                dst.write(chunk)
        partial.rename(raw)
    return np.memmap(raw, dtype=dtype, mode="r")


def raw_dir(pack: Path) -> Path:
    if "REDRAFT_PACK_RAW" in os.environ:
        return Path(os.environ["REDRAFT_PACK_RAW"])
    import hashlib
    import tempfile

    key = hashlib.sha1(str(pack.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"redraft-pack-{key}"


def decompress(pack: str | os.PathLike) -> None:
    """Decompresses every `.xz` array of a pack at once (threads: lzma releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    pack = Path(pack)
    names = [p.name[: -len(".xz")] for p in pack.glob("*.xz")]
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        list(pool.map(lambda n: read_array(pack, n, "u1"), names))


@dataclass
class Split:
    tokens: np.ndarray  # uint16
    offsets: np.ndarray  # uint64, files + 1
    edit_tokens: np.ndarray | None = None
    edit_index: np.ndarray | None = None  # [n, 4] uint32

    def files(self) -> int:
        return len(self.offsets) - 1


class Pack:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.meta = json.loads((self.path / "meta.json").read_text())
        self.vocab_size = int(self.meta["vocab_size"])
        self.mask_id = int(self.meta["mask_id"])
        self.eos_id = int(self.meta["eos_id"])
        self.file_sep_id = int(self.meta["file_sep_id"])
        self.splits = {name: self._split(name) for name in ("train", "valid")}

    def _split(self, name: str) -> Split:
        tokens = read_array(self.path, f"{name}.tokens", "<u2")
        offsets = read_array(self.path, f"{name}.offsets", "<u8")
        split = Split(tokens, offsets)
        if (self.path / f"edits-{name}.index").exists() or (self.path / f"edits-{name}.index.xz").exists():
            split.edit_tokens = read_array(self.path, f"edits-{name}.tokens", "<u2")
            split.edit_index = read_array(self.path, f"edits-{name}.index", "<u4").reshape(-1, 4)
        return split

    def tokenizer(self):
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(self.path / "tokenizer.json"))


# ---------------------------------------------------------------------------------------------
# The engine's FIM layout (engine/src/engine.rs, `Engine::canvas_of_length` with `FimLayout::Infill`)


def fit_context(prefix: int, suffix: int, budget: int) -> tuple[int, int]:
    """Tokens kept on each side: all when they fit, else the prefix gets 3/4 of the budget."""
    if prefix + suffix <= budget:
        return prefix, suffix
    prefix_share = budget * 3 // 4
    keep_suffix = min(suffix, budget - min(prefix_share, prefix))
    return min(prefix, budget - keep_suffix), keep_suffix


# Share of next edits whose new region outgrows the canvas the engine plans for them that are
# laid out as the engine first sees them (the plan's slots or more, filled, no EOS).
OUTGROWN_SHORT = 0.5


def edit_canvas_length(draft: int) -> int:
    """The canvas the engine plans for a next edit of `draft` old-region tokens
    (`redraft_engine::edit::canvas_length`)."""
    return (draft + draft // 4 + 4 + 7) // 8 * 8


def planned_edit_canvas(ids: list[int], canvas_start: int, tokenizer) -> int | None:
    """The canvas the engine plans for the next edit laid out in `ids`: from the old region, which
    sits between the last `<|edit_start|>` before the canvas and the `<|edit_end|>` just before
    it, split by the cursor marker (`EditPieces`' layout); the engine's draft is the region
    tokenized whole, so its two halves are decoded and the text encoded again. `None` without
    the markers."""
    start, cursor = tokenizer.token_to_id("<|edit_start|>"), tokenizer.token_to_id("<|cursor|>")
    before = ids[:canvas_start]
    if start is None or start not in before:
        return None
    marker = len(before) - 1 - before[::-1].index(start)
    old = before[marker + 1 : -1]  # up to the <|edit_end|> before the canvas
    if cursor not in old:
        return None
    at = old.index(cursor)
    head, tail = tokenizer.decode_batch([old[:at], old[at + 1 :]], skip_special_tokens=False)
    return edit_canvas_length(len(tokenizer.encode(head + tail, add_special_tokens=False).ids))


def shorten_canvas(ids: list[int], canvas_start: int, canvas_len: int, keep: int) -> list[int]:
    """`ids` with its canvas cut to the first `keep` tokens of what it holds (no EOS then) and
    the rest of the sequence after it: a canvas planned too short for its middle, which the
    model is to fill to its last slot (the engine grows a canvas whose last slot holds a token)."""
    assert 1 <= keep <= canvas_len
    return ids[: canvas_start + keep] + ids[canvas_start + canvas_len :]


def fim_layout(
    prefix: list[int],
    middle: list[int],
    suffix: list[int],
    canvas_len: int,
    budget: int,
    eos_id: int,
    max_prefix: int | None = None,
    max_suffix: int | None = None,
) -> tuple[list[int], int]:
    """`prefix [canvas] suffix` with the canvas holding `middle` then EOS (or, shorter than the
    middle, its first `canvas_len` tokens and no EOS): the clean tokens and where the canvas
    starts. `budget` is the positions left for context (the engine's
    `max_position_embeddings - canvas`)."""
    assert canvas_len >= 1
    p = len(prefix) if max_prefix is None else min(len(prefix), max_prefix)
    s = len(suffix) if max_suffix is None else min(len(suffix), max_suffix)
    keep_p, keep_s = fit_context(p, s, budget)
    kept_prefix = prefix[len(prefix) - keep_p :]
    canvas = list(middle[:canvas_len]) + [eos_id] * (canvas_len - len(middle))
    return kept_prefix + canvas + list(suffix[:keep_s]), len(kept_prefix)


# ---------------------------------------------------------------------------------------------
# Where the middle is (a port of `choose_span` in train/src/train/examples.rs)


def _line_bounds(text: str, at: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return start, (len(text) if end < 0 else end)


def bracket_block(text: str, start: int, search: int = 2048, limit: int = 8192) -> tuple[int, int] | None:
    """The first `{`, `(` or `[` at or after `start` and its matching closer: a scanner that skips
    strings, comments and char literals, not a parser."""
    window = text[start : start + search]
    rel = min((i for i in (window.find("{"), window.find("("), window.find("[")) if i >= 0), default=-1)
    if rel < 0:
        return None
    open_at = start + rel
    closers = {"{": "}", "(": ")", "[": "]"}
    stack = [closers[text[open_at]]]
    i, end = open_at + 1, min(len(text), open_at + limit)
    while i < end:
        c = text[i]
        if c == '"':
            i += 1
            while i < end and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif text.startswith("//", i):
            nl = text.find("\n", i)
            i = end if nl < 0 else nl
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = end if close < 0 else close + 1
        elif c == "'":
            close = text.find("'", i + 1, i + 4)
            if close > 0 and (close == i + 2 or text[i + 1] == "\\"):
                i = close
        elif c in closers:
            stack.append(closers[c])
        elif c in ")]}":
            if stack.pop() != c:
                return None
            if not stack:
                return open_at, i
        i += 1
    return None


def choose_span(text: str, kind: str, rng: np.random.Generator, at: int | None = None) -> tuple[int, int] | None:
    """A middle of `kind` around character `at` (random when not given)."""
    if not text:
        return None
    at = int(rng.integers(0, len(text))) if at is None else min(max(at, 0), len(text) - 1)
    line_start, line_end = _line_bounds(text, at)
    line = text[line_start:line_end]
    indent_end = line_start + len(line) - len(line.lstrip())
    if kind == "line_rest":
        choice = int(rng.integers(0, 3))
        start = line_start if choice == 0 else indent_end if choice == 1 else int(rng.integers(indent_end, line_end + 1))
        span = (start, line_end)
    elif kind == "lines":
        end = line_start
        lines = int(rng.integers(2, 9))
        for i in range(lines):
            nl = text.find("\n", end)
            if nl < 0:
                return None
            end = nl if i + 1 == lines else nl + 1
        span = (line_start if rng.random() < 0.5 else indent_end, end)
    elif kind == "block":
        found = bracket_block(text, at)
        if found is None:
            return None
        open_at, close_at = found
        span = (open_at + 1, close_at) if rng.random() < 0.5 else (open_at, close_at + 1)
    else:
        length = max(1, int(np.exp(rng.uniform(0.0, np.log(200.0)))))
        span = (at, min(len(text), at + length))
    return span if text[span[0] : span[1]].strip() else None


# ---------------------------------------------------------------------------------------------
# Batches


@dataclass
class DataConfig:
    seq_len: int = 1024
    mix: dict = field(default_factory=lambda: {"plain": 0.5, "fim": 0.4, "edit": 0.1})
    max_canvas: int = 64
    # Share of FIM canvases shorter than their middle (of middles of 2 tokens or more): filled to
    # the last slot, no EOS. At 0, no next-edit canvas is shortened either (`OUTGROWN_SHORT`).
    overflow: float = 0.1
    t_min: float = 0.05
    # Context budgets a FIM example is given (its sequence holds as many as fit).
    fim_budgets: tuple = (192, 448, 960)
    # When no budget fits what is left of a sequence, one more example takes all of it as its
    # context if that is at least this many tokens: 2.35 examples a sequence instead of 1.75 on
    # the pack. With a short canvas's slots left to the context, 1% of the FIM sequences'
    # positions is unmasked filler (a file too short for its budget), against a fifth before.
    fim_tail_budget: int = 128
    # A next edit too long for what is left of its sequence is put back and another drawn, this
    # many times (the pack's are 306-578 tokens, p10-p90): 2.15 edits a sequence and 12% of its
    # positions unmasked filler, against 1.87 and 22% when the first that did not fit ended it.
    edit_tries: int = 8


@dataclass
class Batch:
    inputs: np.ndarray  # int64 [B, T], masked positions hold the mask id
    targets: np.ndarray  # int64 [B, T], -1 where not scored
    kinds: np.ndarray  # int8 [B]: index into KINDS
    t: np.ndarray  # float32 [B]


# The canvas lengths the engine plans by the unit at the cursor (context/src/canvas.rs: the rest of
# a line, a line, a block), whatever the middle will be: a length drawn from these says nothing of
# the middle but that it fits.
ENGINE_LENGTHS = (16, 24, 48)


class BatchMaker:
    """Batch `step` of `split` for `seed`: deterministic, whatever process makes it."""

    def __init__(self, pack: Pack, split: str, config: DataConfig, seed: int):
        self.pack = pack
        self.split = pack.splits[split]
        self.config = config
        self.seed = seed
        self.salt = 0 if split == "train" else 0x5EED
        self.tokenizer = pack.tokenizer()
        mix = dict(config.mix)
        self.edits = np.zeros((0, 4), dtype=np.uint32)
        if self.split.edit_index is not None:
            # Only sequences that fit with a separator (the pack lays them out for its own length).
            index = np.asarray(self.split.edit_index)
            self.edits = index[index[:, 1].astype(np.int64) + 1 <= config.seq_len]
        if len(self.edits) == 0:
            mix["edit"] = 0.0
        total = sum(mix.values())
        self.mix = np.array([mix.get(k, 0.0) / total for k in KINDS])
        lengths = np.diff(self.split.offsets.astype(np.int64))
        # FIM files: those with some real code, drawn in proportion to their length.
        self.fim_files = np.nonzero(lengths > 16)[0]
        weights = lengths[self.fim_files].astype(np.float64)
        self.fim_cdf = np.cumsum(weights) / weights.sum()

    def batch(self, step: int, size: int) -> Batch:
        cfg = self.config
        rng = np.random.default_rng([self.seed, self.salt, step])
        kinds = rng.choice(len(KINDS), size=size, p=self.mix).astype(np.int8)
        # Stratified rates: one per sequence, spread evenly over [t_min, 1].
        t = cfg.t_min + (1 - cfg.t_min) * ((rng.random() + np.arange(size)) / size) % 1.0
        t = rng.permutation(t).astype(np.float32)
        inputs = np.empty((size, cfg.seq_len), dtype=np.int64)
        targets = np.full((size, cfg.seq_len), -1, dtype=np.int64)
        fim_rows = [r for r in range(size) if KINDS[kinds[r]] == "fim"]
        fim = self._fim_sequences(rng, len(fim_rows))
        for r in range(size):
            kind = KINDS[kinds[r]]
            if kind == "plain":
                tokens = self._stream(rng, cfg.seq_len)
                maskable = np.ones(cfg.seq_len, dtype=bool)
            else:
                pieces = fim[fim_rows.index(r)] if kind == "fim" else self._edit_sequence(rng)
                tokens, maskable = self._fill(rng, pieces)
            masked = maskable & (rng.random(cfg.seq_len) < t[r])
            if not masked.any():
                masked[rng.choice(np.nonzero(maskable)[0])] = True
            inputs[r] = tokens
            inputs[r, masked] = self.pack.mask_id
            targets[r, masked] = tokens[masked]
        return Batch(inputs, targets, kinds, t)

    def _stream(self, rng, n: int) -> np.ndarray:
        tokens = self.split.tokens
        start = int(rng.integers(0, len(tokens) - n))
        return tokens[start : start + n].astype(np.int64)

    def _fill(self, rng, pieces: list[tuple[list[int], int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """Examples `(tokens, canvas_start, canvas_len)` back to back, then stream context."""
        n = self.config.seq_len
        tokens = np.empty(n, dtype=np.int64)
        maskable = np.zeros(n, dtype=bool)
        at = 0
        for ids, canvas_start, canvas_len in pieces:
            if at:  # examples are separate files to the model, as in the plain stream
                tokens[at] = self.pack.file_sep_id
                at += 1
            tokens[at : at + len(ids)] = ids
            maskable[at + canvas_start : at + canvas_start + canvas_len] = True
            at += len(ids)
        if at < n:
            rest = self._stream(rng, n - at)
            rest[0] = self.pack.file_sep_id
            tokens[at:] = rest
        return tokens, maskable

    def _edit_sequence(self, rng) -> list[tuple[list[int], int, int]]:
        """Next edits drawn for one sequence, as many as fit: a draw too long for what is left is
        put back and another drawn, up to `edit_tries` times (`DataConfig`)."""
        # The first always fits (the index holds only edits shorter than a sequence).
        pieces = [self._edit_example(rng)]
        used, misses = len(pieces[0][0]) + 1, 0
        while misses < self.config.edit_tries and self.config.seq_len - used >= 128:
            ids, canvas_start, canvas_len = self._edit_example(rng)
            if used + len(ids) + 1 > self.config.seq_len:
                misses += 1
                continue
            pieces.append((ids, canvas_start, canvas_len))
            used += len(ids) + 1
        return pieces

    def _edit_example(self, rng, outgrown_short: float = OUTGROWN_SHORT) -> tuple[list[int], int, int]:
        """A random next edit of the pack. The pack lays every canvas out long enough for its new
        region; the engine plans one from the old region (`edit_canvas_length`) and grows it when
        the model fills its last slot. So (with `overflow` above 0) half of the edits whose new
        region outgrows that plan (`OUTGROWN_SHORT`) get a canvas of the plan's length up to the
        whole new region, filled with its first tokens, no EOS (`shorten_canvas`); `canvas_ends`
        asks for all of them."""
        start, length, canvas_start, canvas_len = (int(v) for v in self.edits[int(rng.integers(0, len(self.edits)))])
        ids = self.split.edit_tokens[start : start + length].astype(np.int64).tolist()
        if self.config.overflow <= 0:
            return ids, canvas_start, canvas_len
        canvas = ids[canvas_start : canvas_start + canvas_len]
        new = canvas.index(self.pack.eos_id) if self.pack.eos_id in canvas else canvas_len
        if canvas_len > (new + 1 + 7) // 8 * 8:
            # The pack made it the plan's length (`edit.rs`: the larger of the plan and the new
            # region with an EOS, rounded up to 8): it fits.
            return ids, canvas_start, canvas_len
        planned = planned_edit_canvas(ids, canvas_start, self.tokenizer)
        if planned is not None and new >= planned and rng.random() < outgrown_short:
            keep = int(rng.integers(planned, new + 1))
            return shorten_canvas(ids, canvas_start, canvas_len, keep), canvas_start, keep
        return ids, canvas_start, canvas_len

    def edit_canvases(self, rng, count: int, outgrown_short: float = OUTGROWN_SHORT):
        """`count` next-edit examples as training lays them out (with `outgrown_short` of those
        that outgrow the engine's plan shortened to it or more): token ids, where the canvas
        starts and its length."""
        if len(self.edits) == 0:
            return
        for _ in range(count):
            yield self._edit_example(rng, outgrown_short)

    def edit_sequence_canvases(self, rng, count: int):
        """The next edits of `count` sequences as training packs them, one by one (what the
        checks of the canvases read, as `fim_canvases`)."""
        if len(self.edits) == 0:
            return
        for _ in range(count):
            yield from self._edit_sequence(rng)

    def _fim_sequences(self, rng, count: int) -> list[list[tuple[list[int], int, int]]]:
        """`count` sequences of FIM examples. Tokenizing is batched: windows of files are decoded
        together, middles chosen, then every prefix, middle and suffix encoded together."""
        cfg = self.config
        plans = []  # per sequence: list of budgets
        for _ in range(count):
            # As many examples as fit: each a context budget drawn from those that still fit
            # (the first from all of them), so a sequence is not left half filler by a long
            # budget drawn after a short one.
            left, budgets = cfg.seq_len, []
            while True:
                fits = [b for b in cfg.fim_budgets if b + cfg.max_canvas <= left]
                if not fits:
                    # The rest as one more example's context (a sequence shorter than any
                    # budget: one example, as long as fits).
                    if not budgets or left - cfg.max_canvas >= cfg.fim_tail_budget:
                        budgets.append(left - cfg.max_canvas)
                    break
                budget = int(rng.choice(fits))
                budgets.append(budget)
                left -= budget + cfg.max_canvas + 1  # and its separator
            plans.append(budgets)
        jobs = [(s, b) for s, budgets in enumerate(plans) for b in budgets]
        windows = [self._window(rng, budget) for _, budget in jobs]
        # Each window decoded whole and up to its centre, which gives the centre's character.
        texts = self.tokenizer.decode_batch(
            [w[0] for w in windows] + [w[0][: w[3]] for w in windows], skip_special_tokens=False
        )
        cuts = []
        for (ids, at_start, at_end, _), text, left in zip(windows, texts, texts[len(windows) :]):
            at = len(left) if text.startswith(left) else None
            span = None
            for _ in range(4):
                kind = SPAN_KINDS[int(rng.choice(len(SPAN_KINDS), p=SPAN_WEIGHTS))]
                span = choose_span(text, kind, rng, at)
                if span is not None:
                    break
            if span is None:  # nothing to cut there: an empty middle at the centre
                point = len(text) // 2 if at is None else at
                span = (point, point)
            cuts.append((text, span, at_start, at_end))
        encoded = self._encode_cuts(cuts)
        out: list[list[tuple[list[int], int, int]]] = [[] for _ in plans]
        for (s, budget), (_, _, at_start, at_end), (prefix, middle, suffix) in zip(jobs, cuts, encoded):
            # A window cut out of a longer file: its edge tokens may differ from the file's own.
            if not at_start:
                prefix = prefix[8:]
            if not at_end:
                suffix = suffix[:-8]
            canvas_len = self._canvas_len(rng, len(middle))
            # The example's place in the sequence is its budget and the longest canvas: a
            # shorter canvas leaves its slots to the context, as the engine gives the context
            # whatever positions the canvas does not take.
            context = budget + cfg.max_canvas - canvas_len
            ids, canvas_start = fim_layout(prefix, middle, suffix, canvas_len, context, self.pack.eos_id)
            out[s].append((ids, canvas_start, canvas_len))
        return out

    def fim_canvases(self, rng, count: int):
        """The FIM examples of `count` sequences, one by one: token ids, where the canvas starts
        and its length (what the checks of the canvases read)."""
        for sequence in self._fim_sequences(rng, count):
            yield from sequence

    def _encode_cuts(self, cuts) -> list[tuple[list[int], list[int], list[int]]]:
        """Prefix, middle and suffix ids of each cut, separately tokenized as the engine does. A
        middle longer than a canvas holds is shortened to the text of its first tokens (the
        suffix then starts there), so every middle ends with EOS in its canvas."""
        longest = self.config.max_canvas - 1
        pieces = [piece for text, (a, b), _, _ in cuts for piece in (text[:a], text[a:b], text[b:])]
        ids = [e.ids for e in self.tokenizer.encode_batch(pieces, add_special_tokens=False)]
        encoded = [tuple(ids[3 * j : 3 * j + 3]) for j in range(len(cuts))]
        long = [j for j, (_, middle, _) in enumerate(encoded) if len(middle) > longest]
        if long:
            heads = self.tokenizer.decode_batch([encoded[j][1][:longest] for j in long], skip_special_tokens=False)
            redo = []
            for j, head in zip(long, heads):
                text, (a, _), _, _ = cuts[j]
                if not text.startswith(head, a):  # the cut fell inside a character: drop the middle
                    head = ""
                redo += [text[a : a + len(head)], text[a + len(head) :], text[a:]]
            again = [e.ids for e in self.tokenizer.encode_batch(redo, add_special_tokens=False)]
            for k, j in enumerate(long):
                middle, suffix = again[3 * k], again[3 * k + 1]
                if len(middle) > longest:  # re-encoding merged differently: an empty middle there
                    middle, suffix = [], again[3 * k + 2]
                encoded[j] = (encoded[j][0], middle, suffix)
        return encoded

    def _canvas_len(self, rng, middle: int) -> int:
        """The canvas a request of this middle could have: one of the engine's planned lengths
        (or the longest) that holds it and one EOS, or any length up to the longest (the context
        layer's length prior varies); or, for a share of them (`overflow`), one that holds from
        a third of the middle to all of it but no EOS: a canvas planned too short, which the
        model is to fill to its last slot. Not the smallest length that holds the middle: the
        engine's plan does not know the middle, and a canvas that did would teach the model to
        read the answer's length off the canvas (a 16-slot canvas would always hold 9 to 15
        tokens, and short answers would come out padded)."""
        top = self.config.max_canvas
        if middle >= 2 and rng.random() < self.config.overflow:
            return int(rng.integers((middle + 2) // 3, middle + 1))
        if rng.random() < 0.5:
            fits = [b for b in sorted({*ENGINE_LENGTHS, top}) if middle + 1 <= b <= top]
            return int(rng.choice(fits)) if fits else top
        return int(rng.integers(middle + 1, top + 1))

    def _window(self, rng, budget: int) -> tuple[list[int], bool, bool, int]:
        """Token ids around a random token of a file (drawn in proportion to length): enough on
        each side for a context of `budget` around a middle there, whether the window reaches
        each end of the file, and where its centre is."""
        f = self.fim_files[int(np.searchsorted(self.fim_cdf, rng.random()))]
        start, end = int(self.split.offsets[f]), int(self.split.offsets[f + 1]) - 1  # drop file_sep
        centre = int(rng.integers(start, end))
        reach = budget + self.config.max_canvas + 16
        a, b = max(start, centre - reach), min(end, centre + reach)
        return self.split.tokens[a:b].tolist(), a == start, b == end, centre - a
