//! Training examples shaped like the product's requests, and batches of them.
//!
//! A fill-in-the-middle ([`ExampleKind::Fim`]) example is `prefix + canvas + suffix`, the canvas
//! being the middle's tokens followed by EOS up to a bucket length ([`BUCKETS`]): the model
//! learns to write a middle and to end it. A share of them ([`DataConfig::overflow`]) has a
//! canvas planned too short, holding the middle's first tokens and no EOS: a token in a
//! canvas's last slot is how the engine knows to grow it (`Sampler::grow`). The prefix, middle and suffix are tokenized
//! separately, as [`redraft_engine::Engine`] tokenizes a request, so a cursor inside a word looks the same
//! in training as in use. The middle is chosen by [`SpanKind`]: the rest of a line, 2-8 whole
//! lines, a bracket block, or a random character span. Only canvas positions are masked.
//!
//! A [`ExampleKind::Plain`] example is a window of a file's (cached) tokens, every position
//! maskable.
//!
//! Masking follows MDLM / LLaDA: `t ~ U(t_min, 1)` (stratified across a batch), each maskable
//! position masked with probability `t` (at least one), and each masked position's cross-entropy
//! weighted `1 / (max(t, 1/n) * seq_len)` for `n` maskable positions: MDLM's `1/t`, normalised
//! by the sequence length, so a token weighs the same in a 4-slot canvas as in a whole-sequence
//! example. The `max(t, 1/n)` only matters when `t < 1/n`: there the forced single mask is what
//! was really masked, and a weight of `1/t` (up to 1000) would turn one token into a gradient
//! spike.
//!
//! Sequences shorter than `seq_len` (short files) are padded with EOS; the padding is hidden from
//! attention by a key mask and never scored.
//!
//! The ids of the mask and the EOS, the logit shift and the attention pattern come from the
//! run's [`DiffusionSetup`]. With the shift, a masked slot `p` is scored by row `p - 1`
//! (`redraft_engine::sampler::logit_row`, as the engine reads it). A model that attends causally
//! or block-causally, and whose vocabulary has the FIM tokens, sees a FIM example as the engine
//! lays a request out for it (the one definition, [`FimLayout`]):
//! `<|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|> canvas`, since the canvas could
//! not see a suffix after it.
//!
//! Every example is a pure function of (seed, stream, index): resuming needs only the step.

use std::ops::Range;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

pub mod edit;

use super::config::DiffusionSetup;
use super::tokens::CorpusSplit;
use super::TrainResult;
use redraft_context::edit::cut::EditCase;
use redraft_engine::edit::{canvas_length, EditMarkers};
use redraft_engine::prompt::FimLayout;
use redraft_engine::tokenizer::Tokenizer;

/// Canvas lengths: a middle of `m` tokens gets the smallest bucket `>= m + 1` (at least one EOS).
pub const BUCKETS: [usize; 5] = [4, 8, 16, 32, 64];

/// How examples are drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataConfig {
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Share of fill-in-the-middle examples (the rest are plain).
    pub fim_rate: f64,
    /// Lower end of the masking rate `t`.
    pub t_min: f64,
    /// Share of next-edit examples (drawn first; the FIM rate applies to the rest). Needs edit
    /// cases ([`ExampleBuilder::with_edits`]).
    #[serde(default)]
    pub edit_rate: f64,
    /// A next edit's masked canvas slots show the old region's token at that slot (its draft)
    /// instead of the mask token, so copying is the identity; the model learns where to change.
    /// The exported model says so (`redraft.json` `edit_canvas`), and the engine shows the draft
    /// the same way.
    #[serde(default)]
    pub edit_draft: bool,
    /// Share of FIM examples (of middles of 2 tokens or more) whose canvas holds a third to all
    /// of the middle and no EOS, the suffix after the whole middle: the model learns to fill a
    /// canvas to its last slot when the middle goes on (what grows one in the engine). Above 0,
    /// next edits whose new region outgrows the engine's plan get such a canvas too
    /// ([`edit::OUTGROWN_SHORT`]). Runs saved before it read 0.
    #[serde(default)]
    pub overflow: f64,
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            seq_len: 256,
            fim_rate: 0.7,
            t_min: 1e-3,
            edit_rate: 0.0,
            edit_draft: false,
            overflow: 0.1,
        }
    }
}

impl DataConfig {
    /// Buckets that leave at least half the sequence for context.
    pub fn buckets(&self) -> &'static [usize] {
        let n = BUCKETS.iter().filter(|&&b| b <= self.seq_len / 2).count();
        &BUCKETS[..n]
    }

    /// Longest middle, in tokens.
    pub fn max_middle(&self) -> usize {
        self.buckets().last().map_or(0, |b| b - 1)
    }
}

/// How a fill-in-the-middle example's middle was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpanKind {
    /// From a point in a line (its start, its indentation's end, or any character) to its end.
    LineRest,
    /// 2-8 whole lines (from the first line's start or its indentation's end).
    Lines,
    /// The inside of a `{...}`, `(...)` or `[...]` block, or the whole block: tree-sitter's
    /// syntax nodes approximated by a bracket scanner (the engine does not depend on
    /// tree-sitter).
    Block,
    /// Any run of 1-200 bytes.
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExampleKind {
    Fim(SpanKind),
    Plain,
    /// A next edit ([`edit`]): the canvas is the rewritten region.
    Edit {
        no_edit: bool,
    },
}

/// One training sequence with its masking.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub kind: ExampleKind,
    /// Clean token ids, at most `seq_len` of them (padding is added by [`Batch`]).
    pub tokens: Vec<u32>,
    /// Maskable positions: the canvas (middle + EOS padding) of a FIM example, every position of
    /// a plain one.
    pub canvas: Range<usize>,
    /// Tokens of the middle (the canvas minus its EOS padding); the canvas length for plain.
    pub middle_len: usize,
    /// Masked positions, ascending, within `canvas`.
    pub masked: Vec<usize>,
    pub t: f32,
    /// Shown at masked canvas slots instead of the mask token, by slot (a next edit's old region
    /// under [`DataConfig::edit_draft`]); slots past its end show the mask.
    pub draft: Vec<u32>,
}

impl Example {
    /// Loss weight of each masked position relative to the canvas: `1 / (max(t, 1/n) * n)`
    /// ([`Batch::new`] rescales it to the sequence length).
    pub fn weight(&self) -> f32 {
        let n = self.canvas.len() as f32;
        1.0 / (self.t.max(1.0 / n) * n)
    }

    /// The model's input: the tokens with masked positions replaced by `mask_id` (or the
    /// draft's token at that slot).
    pub fn input(&self, mask_id: u32) -> Vec<u32> {
        let mut input = self.tokens.clone();
        for &p in &self.masked {
            input[p] = self
                .draft
                .get(p - self.canvas.start)
                .copied()
                .unwrap_or(mask_id);
        }
        input
    }
}

/// Which stream of examples: training and evaluation never share an index space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Train,
    Eval,
}

impl Stream {
    fn salt(self) -> u64 {
        match self {
            Stream::Train => 0x7261_696e,
            Stream::Eval => 0x6576_616c,
        }
    }
}

/// Draws examples from one corpus split.
pub struct ExampleBuilder<'a> {
    split: &'a CorpusSplit,
    tokenizer: &'a Tokenizer,
    config: DataConfig,
    seed: u64,
    stream: Stream,
    edits: &'a [EditCase],
    markers: Option<EditMarkers>,
    setup: DiffusionSetup,
    /// How FIM examples are laid out: the engine's rule for this model ([`FimLayout`]).
    layout: FimLayout,
}

impl<'a> ExampleBuilder<'a> {
    pub fn new(
        split: &'a CorpusSplit,
        tokenizer: &'a Tokenizer,
        config: DataConfig,
        seed: u64,
        stream: Stream,
    ) -> ExampleBuilder<'a> {
        ExampleBuilder {
            split,
            tokenizer,
            config,
            seed,
            stream,
            edits: &[],
            markers: None,
            setup: DiffusionSetup::default(),
            layout: FimLayout::Infill,
        }
    }

    /// Examples for a model read as `setup` says (the default: redraft's own ids,
    /// bidirectional). A causal or block-causal model sees FIM examples prefix-suffix-middle
    /// when the tokenizer has the FIM tokens, by the rule the engine lays requests out by.
    pub fn with_setup(mut self, setup: DiffusionSetup) -> ExampleBuilder<'a> {
        self.setup = setup;
        self.layout = FimLayout::for_model(setup.attention, self.tokenizer);
        self
    }

    /// The FIM tokens FIM examples are laid out with, when they are prefix-suffix-middle.
    pub fn fim_markers(&self) -> Option<[u32; 3]> {
        self.layout.markers()
    }

    /// Draws next-edit examples from `cases` at the configured rate (the tokenizer must have
    /// the edit markers).
    pub fn with_edits(mut self, cases: &'a [EditCase]) -> TrainResult<ExampleBuilder<'a>> {
        self.markers = Some(EditMarkers::of(self.tokenizer)?);
        self.edits = cases;
        Ok(self)
    }

    /// Batch number `number`: examples `number * size ..`, with masking rates stratified
    /// across the batch (`t_i = t_min + (1 - t_min) * frac(u + i / size)`), which lowers the
    /// variance of the loss without changing its expectation.
    pub fn batch(&self, number: u64, size: usize) -> TrainResult<Vec<Example>> {
        let mut rng = rng_for(
            self.seed,
            self.stream.salt() ^ 0x7374_7261_7469_6679,
            number,
        );
        let u: f64 = rng.random();
        let t_min = self.config.t_min;
        (0..size)
            .map(|i| {
                let frac = (u + i as f64 / size as f64).fract();
                let t = (t_min + (1.0 - t_min) * frac) as f32;
                self.example(number * size as u64 + i as u64, t)
            })
            .collect()
    }

    /// Example `index` of this stream, masked at rate `t`.
    pub fn example(&self, index: u64, t: f32) -> TrainResult<Example> {
        let mut rng = rng_for(self.seed, self.stream.salt(), index);
        // No draw for edits when there are none, so a run without them keeps its stream.
        let edit = match self.markers {
            Some(markers) if self.config.edit_rate > 0.0 && !self.edits.is_empty() => {
                if rng.random_bool(self.config.edit_rate) {
                    self.edit(markers, &mut rng)?
                } else {
                    None
                }
            }
            _ => None,
        };
        let (kind, tokens, canvas, middle_len, draft) = if let Some(edit) = edit {
            edit
        } else if rng.random_bool(self.config.fim_rate) {
            let (kind, tokens, canvas, middle_len) = match self.fim(&mut rng)? {
                Some(fim) => fim,
                None => self.plain(&mut rng),
            };
            (kind, tokens, canvas, middle_len, Vec::new())
        } else {
            let (kind, tokens, canvas, middle_len) = self.plain(&mut rng);
            (kind, tokens, canvas, middle_len, Vec::new())
        };
        let masked = mask_positions(&mut rng, canvas.clone(), t);
        Ok(Example {
            kind,
            tokens,
            canvas,
            middle_len,
            masked,
            t,
            draft,
        })
    }

    /// A next-edit example from a random case, or `None` when a few draws found none that fits.
    #[allow(clippy::type_complexity)]
    fn edit(
        &self,
        markers: EditMarkers,
        rng: &mut StdRng,
    ) -> TrainResult<Option<(ExampleKind, Vec<u32>, Range<usize>, usize, Vec<u32>)>> {
        for _ in 0..4 {
            let case = &self.edits[rng.random_range(0..self.edits.len())];
            if let Some(mut e) = edit::edit_tokens(
                self.tokenizer,
                markers,
                case,
                self.config.seq_len,
                self.setup.eos_id,
                rng,
            )? {
                // A new region the engine's plan is too short for: half the time, laid out as
                // the engine first sees it (no draw at a share of 0 or for an edit that fits: a
                // run saved before the share existed keeps its stream; one saved since, with
                // next edits, resumes with these canvases too).
                let planned = canvas_length(e.draft.len());
                if self.config.overflow > 0.0
                    && e.middle_len >= planned
                    && rng.random_bool(edit::OUTGROWN_SHORT)
                {
                    e.shorten_canvas(rng.random_range(planned..=e.middle_len));
                }
                let kind = ExampleKind::Edit { no_edit: e.no_edit };
                let draft = if self.config.edit_draft {
                    e.draft
                } else {
                    Vec::new()
                };
                return Ok(Some((kind, e.tokens, e.canvas, e.middle_len, draft)));
            }
        }
        Ok(None)
    }

    fn random_file(&self, rng: &mut StdRng) -> usize {
        self.split
            .file_at_token(rng.random_range(0..self.split.num_tokens()))
    }

    fn plain(&self, rng: &mut StdRng) -> (ExampleKind, Vec<u32>, Range<usize>, usize) {
        let ids = self.split.file_tokens(self.random_file(rng));
        let len = self.config.seq_len;
        let start = if ids.len() > len {
            rng.random_range(0..=ids.len() - len)
        } else {
            0
        };
        let tokens = ids[start..(start + len).min(ids.len())].to_vec();
        let n = tokens.len();
        (ExampleKind::Plain, tokens, 0..n, n)
    }

    /// A FIM example, or `None` when a few draws found no usable middle (the caller falls back
    /// to a plain example).
    #[allow(clippy::type_complexity)]
    fn fim(
        &self,
        rng: &mut StdRng,
    ) -> TrainResult<Option<(ExampleKind, Vec<u32>, Range<usize>, usize)>> {
        for _ in 0..8 {
            let text = self.split.text(self.random_file(rng));
            let kind = match rng.random_range(0..100) {
                0..35 => SpanKind::LineRest,
                35..60 => SpanKind::Lines,
                60..80 => SpanKind::Block,
                _ => SpanKind::Random,
            };
            let Some(span) = choose_span(text, kind, rng) else {
                continue;
            };
            let Some((end, middle)) =
                fit_middle(self.tokenizer, text, span.clone(), self.config.max_middle())?
            else {
                continue;
            };
            let mut bucket = *self
                .config
                .buckets()
                .iter()
                .find(|&&b| b > middle.len())
                .expect("fit_middle keeps the middle under the largest bucket");
            let mut middle = middle;
            // (No draw at 0: a run saved before the share keeps its stream.)
            if self.config.overflow > 0.0
                && middle.len() >= 2
                && rng.random_bool(self.config.overflow)
            {
                // Planned too short: the middle's first tokens fill the canvas, no EOS.
                bucket = rng.random_range(middle.len().div_ceil(3)..=middle.len());
                middle.truncate(bucket);
            }
            let markers = self.layout.added_tokens();
            let room = self.config.seq_len - bucket - markers;
            let window = self.config.seq_len * 8 + 64;
            let prefix = self.context_before(text, span.start, window)?;
            let suffix = self.context_after(text, end, window)?;
            // How the context budget is shared; the side that runs out gives the rest to the other.
            let share: f64 = rng.random_range(0.25..0.95);
            let want = (room as f64 * share).round() as usize;
            let mut p = prefix.len().min(want);
            let s = suffix.len().min(room - p);
            p = prefix.len().min(room - s);
            let eos = self.setup.eos_id;
            let (mut tokens, after) = self
                .layout
                .around(prefix[prefix.len() - p..].to_vec(), suffix[..s].to_vec());
            let canvas = tokens.len()..tokens.len() + bucket;
            tokens.extend_from_slice(&middle);
            tokens.resize(canvas.end, eos);
            tokens.extend(after);
            return Ok(Some((ExampleKind::Fim(kind), tokens, canvas, middle.len())));
        }
        Ok(None)
    }

    /// Tokens of up to `window` bytes before `at`; when the window does not reach the file's
    /// start, its first token (possibly cut) is dropped.
    fn context_before(&self, text: &str, at: usize, window: usize) -> TrainResult<Vec<u32>> {
        let start = ceil_char(text, at.saturating_sub(window));
        let mut ids = self.tokenizer.encode(&text[start..at])?;
        if start > 0 && !ids.is_empty() {
            ids.remove(0);
        }
        Ok(ids)
    }

    /// Tokens of up to `window` bytes after `at`; the last (possibly cut) one is dropped when
    /// the window does not reach the file's end.
    fn context_after(&self, text: &str, at: usize, window: usize) -> TrainResult<Vec<u32>> {
        let end = floor_char(text, (at + window).min(text.len()));
        let mut ids = self.tokenizer.encode(&text[at..end])?;
        if end < text.len() {
            ids.pop();
        }
        Ok(ids)
    }
}

/// Each position of `canvas` masked with probability `t`, at least one.
fn mask_positions(rng: &mut StdRng, canvas: Range<usize>, t: f32) -> Vec<usize> {
    let mut masked: Vec<usize> = canvas.clone().filter(|_| rng.random::<f32>() < t).collect();
    if masked.is_empty() {
        masked.push(rng.random_range(canvas));
    }
    masked
}

/// The byte range of a middle of `kind` around a random point of `text`, or `None`.
pub fn choose_span(text: &str, kind: SpanKind, rng: &mut StdRng) -> Option<Range<usize>> {
    if text.is_empty() {
        return None;
    }
    let at = floor_char(text, rng.random_range(0..text.len()));
    let (line_start, line_end) = line_bounds(text, at);
    let indent_end = line_start + text[line_start..line_end].len()
        - text[line_start..line_end].trim_start().len();
    let span = match kind {
        SpanKind::LineRest => {
            let start = match rng.random_range(0..3) {
                0 => line_start,
                1 => indent_end,
                _ => floor_char(text, rng.random_range(indent_end..=line_end)),
            };
            start..line_end
        }
        SpanKind::Lines => {
            let lines = rng.random_range(2..=8);
            let mut end = line_start;
            for i in 0..lines {
                let next = text[end..].find('\n').map(|n| end + n)?;
                if i + 1 == lines {
                    end = next;
                } else {
                    end = next + 1;
                }
            }
            let start = if rng.random_bool(0.5) {
                line_start
            } else {
                indent_end
            };
            start..end
        }
        SpanKind::Block => {
            let (open, close) = bracket_block(text, at, 2048, 8192)?;
            if rng.random_bool(0.5) {
                open + 1..close
            } else {
                open..close + 1
            }
        }
        SpanKind::Random => {
            let len = (rng.random_range(0.0..200f64.ln())).exp() as usize;
            at..ceil_char(text, (at + len.max(1)).min(text.len()))
        }
    };
    (!text[span.clone()].trim().is_empty()).then_some(span)
}

/// The middle's end and tokens, cut at a line end when it has more than `max` tokens; `None`
/// when even its first line is too long.
fn fit_middle(
    tokenizer: &Tokenizer,
    text: &str,
    span: Range<usize>,
    max: usize,
) -> TrainResult<Option<(usize, Vec<u32>)>> {
    let ids = tokenizer.encode(&text[span.clone()])?;
    if ids.len() <= max {
        return Ok((!ids.is_empty()).then_some((span.end, ids)));
    }
    // Candidate ends: just before each newline, so the suffix starts with it.
    let ends: Vec<usize> = text[span.clone()]
        .match_indices('\n')
        .map(|(i, _)| span.start + i)
        .filter(|&e| !text[span.start..e].trim().is_empty())
        .collect();
    // Token counts grow with the end: binary search for the last end that fits.
    let (mut lo, mut hi) = (0, ends.len());
    let mut best = None;
    while lo < hi {
        let mid = (lo + hi) / 2;
        let ids = tokenizer.encode(&text[span.start..ends[mid]])?;
        if ids.len() <= max {
            best = Some((ends[mid], ids));
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(best)
}

/// `(start, end)` of the line holding byte `at`, without its newline.
fn line_bounds(text: &str, at: usize) -> (usize, usize) {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    (start, end)
}

/// The first bracket (`{`, `(` or `[`) at or after `from` (within `search` bytes) and its
/// matching closer (within `limit` bytes of it). A small scanner, not a parser: it skips `"..."`
/// strings, `//` and `/* */` comments and `'x'` character literals (a `'` that does not close
/// within a few bytes is a lifetime), and gives up on a mismatched closer.
pub fn bracket_block(
    text: &str,
    from: usize,
    search: usize,
    limit: usize,
) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let open = from
        + bytes[from..(from + search).min(bytes.len())]
            .iter()
            .position(|b| matches!(b, b'{' | b'(' | b'['))?;
    let mut stack = vec![closer(bytes[open])];
    let mut i = open + 1;
    let end = (open + limit).min(bytes.len());
    while i < end {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < end && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = text[i..].find('\n').map_or(end, |n| i + n);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..].find("*/").map_or(end, |n| i + 2 + n + 1);
            }
            b'\'' => {
                if bytes.get(i + 1) == Some(&b'\\') {
                    // `'\n'`, `'\''`, `'\u{..}'`: the escaped character, then the closing quote.
                    if let Some(n) = text.get(i + 3..).and_then(|rest| rest.find('\'')) {
                        i += 3 + n;
                    }
                } else if let Some(c) = text[i + 1..].chars().next() {
                    if bytes.get(i + 1 + c.len_utf8()) == Some(&b'\'') {
                        i += c.len_utf8() + 1;
                    }
                }
            }
            b @ (b'{' | b'(' | b'[') => stack.push(closer(b)),
            b @ (b'}' | b')' | b']') => {
                if stack.pop() != Some(b) {
                    return None;
                }
                if stack.is_empty() {
                    return Some((open, i));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn closer(open: u8) -> u8 {
    match open {
        b'{' => b'}',
        b'(' => b')',
        _ => b']',
    }
}

fn floor_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// A generator for (seed, stream, index), mixed with splitmix64 so nearby indices are unrelated.
fn rng_for(seed: u64, salt: u64, index: u64) -> StdRng {
    let mut x = seed ^ salt.rotate_left(32);
    x = splitmix(x) ^ index;
    StdRng::seed_from_u64(splitmix(splitmix(x)))
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Examples packed for one forward pass.
#[derive(Debug, Clone)]
pub struct Batch {
    pub batch: usize,
    pub len: usize,
    /// `[batch * len]` model input: masked tokens, EOS past each sequence's end.
    pub input: Vec<u32>,
    pub lens: Vec<usize>,
    /// Masked positions, flattened as `b * len + j`.
    pub rows: Vec<u32>,
    pub targets: Vec<u32>,
    /// Per row: the example's weight divided by the batch size, so the loss is `sum(w * ce)`.
    pub weights: Vec<f32>,
    /// Per row: the kind of example it belongs to.
    pub row_kind: Vec<ExampleKind>,
}

impl Batch {
    /// `examples` padded to `len` with the EOS of `setup`, masked with its mask id; each masked
    /// slot is scored by the row its logit shift names.
    pub fn new(examples: &[Example], len: usize, setup: &DiffusionSetup) -> Batch {
        let batch = examples.len();
        let mut out = Batch {
            batch,
            len,
            input: Vec::with_capacity(batch * len),
            lens: Vec::with_capacity(batch),
            rows: Vec::new(),
            targets: Vec::new(),
            weights: Vec::new(),
            row_kind: Vec::new(),
        };
        for (b, ex) in examples.iter().enumerate() {
            let mut input = ex.input(setup.mask_id);
            input.resize(len, setup.eos_id);
            out.input.extend(input);
            out.lens.push(ex.tokens.len());
            // Every masked token weighs 1 / (t * seq_len), whatever its canvas (MDLM normalises by
            // the sequence length): normalising by the canvas instead let EOS-padded FIM canvases
            // outweigh real code 32:1 and stalled training at unigram statistics.
            let w = ex.weight() * ex.canvas.len() as f32 / len as f32 / batch as f32;
            for &p in &ex.masked {
                let row = redraft_engine::sampler::logit_row(setup.logit_shift, p);
                out.rows.push((b * len + row) as u32);
                out.targets.push(ex.tokens[p]);
                out.weights.push(w);
                out.row_kind.push(ex.kind);
            }
        }
        out
    }
}
