//! A loaded checkpoint ready to fill in the middle: model + tokenizer + diffusion settings.
//!
//! This is the entry point callers use (`redraft complete`, the eval CLI, the LSP server): text
//! in, text out, with the sampler's controls passed through. [`EngineBatch`] is the same for a
//! server: requests join a running batch between denoising steps and leave as completions
//! (`engine/batch.rs`). Loading is in `engine/load.rs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cache::ContextCache;
use crate::checkpoint::WeightsSummary;
use crate::config::DiffusionSettings;
use crate::edit::sweep::SweepPieces;
use crate::edit::{canvas_length, EditFormat, EditPieces, EditRequest};
use crate::error::{Error, Result};
use crate::prompt::FimLayout;
use crate::qwen2::Qwen2;
use crate::sampler::{
    Canvas, CanvasView, Controls, Effort, Infill, PassStats, Sampler, SamplerConfig,
};
use crate::text::Draft;
use crate::tokenizer::Tokenizer;

mod batch;
mod load;

pub use batch::{EngineBatch, Finished};
pub use load::{inspect, load_settings, ModelFiles, ModelSummary, WeightsFile, GGUF_FILE};

pub const CONFIG_FILE: &str = "config.json";
pub const REDRAFT_FILE: &str = "redraft.json";
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// A fill-in-the-middle request in text.
#[derive(Debug, Clone)]
pub struct InfillRequest {
    pub prefix: String,
    pub suffix: String,
    /// Masked slots laid down at the start: the length prior (the context layer's choice); at
    /// most `max_tokens` are used.
    pub canvas_tokens: usize,
    /// The longest middle the model may write, in tokens: a canvas whose last slot the model
    /// fills grows a block at a time up to this.
    pub max_tokens: usize,
    /// Context kept on each side, in tokens (the nearest code is kept).
    pub max_prefix_tokens: usize,
    pub max_suffix_tokens: usize,
    pub sampler: SamplerConfig,
}

impl InfillRequest {
    pub fn new(prefix: impl Into<String>, suffix: impl Into<String>) -> InfillRequest {
        InfillRequest {
            prefix: prefix.into(),
            suffix: suffix.into(),
            canvas_tokens: 32,
            max_tokens: 32,
            max_prefix_tokens: 768,
            max_suffix_tokens: 256,
            sampler: SamplerConfig::default(),
        }
    }
}

/// Wall-clock split of a completion.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Timings {
    pub tokenize_ms: f64,
    pub model_ms: f64,
    pub total_ms: f64,
}

/// The middle the engine wrote, with how it got there.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Completion {
    /// The text of `tokens` up to the first bytes that are not UTF-8 ([`Tokenizer::text`]).
    pub middle: String,
    /// The tokens stopped spelling UTF-8 (bytes no character is made of, or a character cut
    /// off at the end): `middle` is the text before them, and the suggestion ends there.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub invalid_text: bool,
    pub tokens: Vec<u32>,
    /// Per token, the model's probability of it when it was committed ([`crate::sampler::Infill::probabilities`]).
    pub probabilities: Vec<f32>,
    pub ended_by_eos: bool,
    /// Whether the caller's stop rule ended the middle once its committed lead decided it
    /// ([`crate::sampler::StopRule`]).
    pub stopped: bool,
    pub steps: usize,
    pub forwards: usize,
    pub full_passes: usize,
    pub window_passes: usize,
    /// First passes that reused a cache across an edit ([`crate::sampler::Pass::Realign`]).
    pub realign_passes: usize,
    /// Canvas slots at the end: the canvas's length plus what it grew by.
    pub slots: usize,
    /// Steps after the one that committed the end (the work left once the length was decided).
    pub steps_after_end: Option<usize>,
    /// Canvas slots committed per model call (EOS padding included).
    pub tokens_per_forward: f64,
    pub hit_deadline: bool,
    pub prefix_tokens: usize,
    pub suffix_tokens: usize,
    pub timings: Timings,
}

/// A model directory, loaded.
pub struct Engine {
    model: Qwen2,
    tokenizer: Tokenizer,
    settings: DiffusionSettings,
    /// Per token id: never written into a canvas (the tokenizer's special tokens but the end).
    banned: Vec<bool>,
    /// How the model reads next edits, found once at load (`None`: it cannot make them).
    edit_format: Option<EditFormat>,
    /// A token that ends a middle besides EOS and pad ([`Sampler::ending_at`]): a Sweep-format
    /// model's `<|file_sep|>`.
    also_end: Option<u32>,
    layout: FimLayout,
    dir: PathBuf,
    weights: WeightsSummary,
}

impl Engine {
    pub fn model(&self) -> &Qwen2 {
        &self.model
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn settings(&self) -> &DiffusionSettings {
        &self.settings
    }

    /// The sampler `effort` means for this model: its own preset where its `redraft.json`
    /// tunes one ([`DiffusionSettings::efforts`]), else the built-in one.
    pub fn effort(&self, effort: Effort) -> SamplerConfig {
        SamplerConfig::preset(self.settings.efforts.get(effort))
    }

    /// Makes a kept cache exact again while nothing else needs the model (the runtime's idle
    /// refresh): [`Qwen2::refresh`], a stored full pass over its tokens that replaces it only
    /// once through; `stop`, asked twice a layer, leaves it as it was. `true` when
    /// refreshed; `false` when stopped or when it was exact already.
    pub fn refresh(&self, cache: &mut ContextCache, stop: &dyn Fn() -> bool) -> Result<bool> {
        self.model.refresh(cache, stop)
    }

    /// A denoising step's canvas as a client may be shown it (the one draft renderer: the
    /// language server's and the HTTP server's streams): [`Draft::render`], the middle ending
    /// at EOS or pad.
    pub fn draft(&self, view: &CanvasView) -> Draft {
        let (eos, pad) = (self.settings.eos_token_id, self.settings.pad_token_id);
        Draft::render(&self.tokenizer, &view.slots, |t| t == eos || t == pad)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What its weights are (format, types, bytes of its files), as its load read them.
    pub fn weights(&self) -> &WeightsSummary {
        &self.weights
    }

    pub fn sampler(&self) -> Sampler<'_> {
        let sampler =
            Sampler::new(self.settings, self.tokenizer.whitespace()).banning(&self.banned);
        match self.also_end {
            Some(token) => sampler.ending_at(token),
            None => sampler,
        }
    }

    /// The canvas for `request`: context trimmed to the budget (room left for the longest
    /// middle), keeping the code nearest the cursor on both sides.
    pub fn canvas(&self, request: &InfillRequest) -> Result<Canvas> {
        self.canvas_of_length(request, request.canvas_tokens.min(request.max_tokens))
    }

    fn canvas_of_length(&self, request: &InfillRequest, length: usize) -> Result<Canvas> {
        if length == 0 || request.max_tokens == 0 {
            return Err(Error::InvalidRequest(
                "canvas_tokens and max_tokens must be at least 1".into(),
            ));
        }
        let longest = length.max(request.max_tokens);
        // Positions past the model's training length were never seen: the whole canvas must fit.
        let bos = usize::from(self.settings.bos_token_id.is_some());
        let positions = self.model.config().max_position_embeddings;
        let Some(budget) = positions.checked_sub(bos + longest) else {
            return Err(Error::InvalidRequest(format!(
                "max_tokens {longest} does not fit the model's {positions} positions"
            )));
        };
        let markers = self.layout.added_tokens();
        // Only the context nearest the cursor can be kept: each side is encoded that far, so a
        // huge prefix or suffix costs what the model sees of it.
        let reach = |limit: usize| limit.min(budget.saturating_sub(markers));
        let mut prefix =
            (self.tokenizer).encode_tail(&request.prefix, reach(request.max_prefix_tokens))?;
        let mut suffix =
            (self.tokenizer).encode_head(&request.suffix, reach(request.max_suffix_tokens))?;
        let (keep_prefix, keep_suffix) = fit_context(
            prefix.len().min(request.max_prefix_tokens),
            suffix.len().min(request.max_suffix_tokens),
            budget.saturating_sub(markers),
        );
        prefix.drain(..prefix.len() - keep_prefix);
        suffix.truncate(keep_suffix);
        let (before, after) = self.layout.around(prefix, suffix);
        let canvas = Canvas::new(before, length, after);
        Ok(canvas.growing_to(longest))
    }

    /// How fill-in-the-middle requests are laid out for this model.
    pub fn layout(&self) -> FimLayout {
        self.layout
    }

    /// Fills the middle of `request`. `cache` may be kept across calls: a later request over the
    /// same context reuses it.
    pub fn complete(
        &self,
        request: &InfillRequest,
        cache: &mut ContextCache,
        controls: Controls<'_>,
    ) -> Result<Completion> {
        let started = Instant::now();
        let canvas = self.canvas(request)?;
        self.run_one(&canvas, &request.sampler, cache, controls, started)
    }

    /// Fills the middle of `request` once per canvas length in `lengths`, as one batch: every
    /// model call serves all of them (the candidates of an explicitly invoked completion cost
    /// about one request). The context is fitted for the longest canvas and shared; each
    /// canvas may grow to `request.max_tokens`.
    pub fn complete_lengths(
        &self,
        request: &InfillRequest,
        lengths: &[usize],
        cache: &mut ContextCache,
        controls: Controls<'_>,
    ) -> Result<Vec<Completion>> {
        let started = Instant::now();
        let Some(&longest) = lengths.iter().max() else {
            return Err(Error::InvalidRequest("no canvas length given".into()));
        };
        let widest = self.canvas_of_length(request, longest)?;
        let canvases: Vec<Canvas> = lengths
            .iter()
            .map(|&length| Canvas {
                length,
                ..widest.clone()
            })
            .collect();
        let admitted = Admitted::now(&widest, started);
        let sampled =
            self.sampler()
                .run(&self.model, cache, &canvases, &request.sampler, controls)?;
        let stats = sampled.stats;
        sampled
            .infills
            .iter()
            .map(|infill| self.completion(&admitted, infill, &stats))
            .collect()
    }

    /// Rewrites the editable region of `request`: the completion's `middle` is the new
    /// region (the old one, unchanged, when the model sees nothing to edit). `cache` may be
    /// kept across calls, as for [`Engine::complete`].
    pub fn next_edit(
        &self,
        request: &EditRequest,
        cache: &mut ContextCache,
        controls: Controls<'_>,
    ) -> Result<Completion> {
        let started = Instant::now();
        let canvas = self.edit_canvas(request)?;
        self.run_one(&canvas, &request.sampler, cache, controls, started)
    }

    /// The old region's tokens as a next edit's canvas shows them (its draft; what a rewrite is
    /// told apart from): the region tokenized whole, as a block ending in a newline for a Sweep
    /// model.
    pub fn edit_draft(&self, region: &str) -> Result<Vec<u32>> {
        match self.edit_format()? {
            EditFormat::Markers(_) => self.tokenizer.encode(region),
            EditFormat::Sweep { .. } => self
                .tokenizer
                .encode(&redraft_prompts::sweep::ended(region)),
        }
    }

    /// The canvas for a next edit: the prompt laid out around it (see [`crate::edit`]), the old
    /// region as its draft, room to grow to the request's `max_tokens` within the model's
    /// positions.
    pub fn edit_canvas(&self, request: &EditRequest) -> Result<Canvas> {
        if request.max_tokens == Some(0) {
            return Err(Error::InvalidRequest(
                "max_tokens must be at least 1".into(),
            ));
        }
        // Both layouts keep some pieces whole and fit the rest around them.
        enum Pieces {
            Markers(EditPieces),
            Sweep(SweepPieces),
        }
        let prompt = request.prompt();
        let bos = usize::from(self.settings.bos_token_id.is_some());
        let room = self
            .model
            .config()
            .max_position_embeddings
            .saturating_sub(bos);
        // A region (or, for Sweep, the region as it was) of more tokens than the model has
        // positions is refused before it is encoded whole: a megabyte line of minified code
        // took seconds on the thread that runs the model.
        let format = self.edit_format()?;
        let kept_whole: &[&str] = match format {
            EditFormat::Markers(_) => &[prompt.region],
            EditFormat::Sweep { .. } => &[prompt.region, prompt.original],
        };
        for text in kept_whole {
            if self.tokenizer.count_up_to(text, room)? > room {
                return Err(Error::InvalidRequest(format!(
                    "the editable region ({} bytes) is more tokens than the model's {room} \
                     positions: choose a smaller region{}",
                    text.len(),
                    if text.trim_end().contains('\n') {
                        " (fewer lines around the cursor)"
                    } else {
                        " (this one is the cursor's line alone: a line this long cannot have a \
                         next edit on this model)"
                    }
                )));
            }
        }
        let pieces = match format {
            EditFormat::Markers(markers) => Pieces::Markers(EditPieces::tokenize(
                &self.tokenizer,
                markers,
                &prompt,
                room,
            )?),
            EditFormat::Sweep { file_sep } => Pieces::Sweep(SweepPieces::tokenize(
                &self.tokenizer,
                file_sep,
                &prompt,
                room,
            )?),
        };
        let (draft, fixed) = match &pieces {
            Pieces::Markers(p) => (p.draft.len(), p.fixed_len()),
            Pieces::Sweep(p) => (p.draft.len(), p.fixed_len()),
        };
        // What the fixed pieces leave; past that, `fit` says the region is too big.
        let longest = request
            .max_tokens
            .unwrap_or(2 * draft + 16)
            .min(room.saturating_sub(fixed))
            .max(1);
        let budget = room - longest.min(room);
        let layout = match pieces {
            Pieces::Markers(p) => p.fit(budget)?,
            Pieces::Sweep(p) => p.fit(budget)?,
        };
        Ok(Canvas::new(
            layout.prefix,
            canvas_length(draft).min(longest),
            layout.suffix,
        )
        .growing_to(longest)
        .with_draft(layout.draft))
    }

    /// How this model reads a next-edit request; an error for a model that cannot make next
    /// edits (neither redraft's edit markers nor an autoregressive `<|file_sep|>`).
    pub fn edit_format(&self) -> Result<EditFormat> {
        match self.edit_format {
            Some(format) => Ok(format),
            // Looked up again for the error that names the missing marker.
            None => EditFormat::of(&self.tokenizer, self.settings.attention),
        }
    }

    /// Fills one canvas; `started` is when the request began (tokenizing is what came before).
    fn run_one(
        &self,
        canvas: &Canvas,
        sampler: &SamplerConfig,
        cache: &mut ContextCache,
        controls: Controls<'_>,
        started: Instant,
    ) -> Result<Completion> {
        let admitted = Admitted::now(canvas, started);
        let sampled = self.sampler().run(
            &self.model,
            cache,
            std::slice::from_ref(canvas),
            sampler,
            controls,
        )?;
        self.completion(&admitted, &sampled.infills[0], &sampled.stats)
    }

    /// The text of `infill` with how it got there; `stats` are the model calls it took part in.
    fn completion(
        &self,
        admitted: &Admitted,
        infill: &Infill,
        stats: &PassStats,
    ) -> Result<Completion> {
        let text = self.tokenizer.text(&infill.tokens)?;
        Ok(Completion {
            invalid_text: !text.is_complete(),
            middle: text.text,
            tokens: infill.tokens.clone(),
            probabilities: infill.probabilities.clone(),
            ended_by_eos: infill.ended_by_eos,
            stopped: infill.stopped,
            steps: infill.steps,
            forwards: stats.forwards,
            full_passes: stats.full_passes,
            window_passes: stats.window_passes,
            realign_passes: stats.realign_passes,
            slots: infill.slots,
            steps_after_end: infill.steps_after_end,
            tokens_per_forward: infill.slots as f64 / stats.forwards.max(1) as f64,
            hit_deadline: stats.hit_deadline,
            prefix_tokens: admitted.prefix_tokens,
            suffix_tokens: admitted.suffix_tokens,
            timings: Timings {
                tokenize_ms: ms(admitted.tokenized),
                model_ms: ms(stats.model_time),
                total_ms: ms(admitted.started.elapsed()),
            },
        })
    }
}

/// What a [`Completion`] reports of its request besides the infill.
struct Admitted {
    prefix_tokens: usize,
    suffix_tokens: usize,
    /// When the request began.
    started: Instant,
    /// Time spent building its canvas.
    tokenized: Duration,
}

impl Admitted {
    /// A request whose canvas is ready now.
    fn now(canvas: &Canvas, started: Instant) -> Admitted {
        Admitted {
            prefix_tokens: canvas.prefix.len(),
            suffix_tokens: canvas.suffix.len(),
            started,
            tokenized: started.elapsed(),
        }
    }
}

/// How many prefix and suffix tokens to keep (nearest the cursor) when only `budget` fit: the
/// prefix gets three quarters, and either side's unused share goes to the other.
pub fn fit_context(prefix: usize, suffix: usize, budget: usize) -> (usize, usize) {
    if prefix + suffix <= budget {
        return (prefix, suffix);
    }
    let prefix_share = budget * 3 / 4;
    let keep_suffix = suffix.min(budget - prefix_share.min(prefix));
    (prefix.min(budget - keep_suffix), keep_suffix)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of canvas lengths gives each length the middle it would get alone: batching only
    /// shares the model calls (padding is masked out, each canvas reads its own rows). Exactly
    /// so without the approximate cache; with it, what a window pass recomputes (and when a
    /// canvas that grew forces a full pass) follows the whole batch.
    #[test]
    fn batched_lengths_equal_separate_requests() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
        let engine = Engine::load(&dir).unwrap();
        let mut request = InfillRequest::new("fn add(a: u32, b: u32) -> u32 {\n    ", "\n}\n");
        request.sampler = SamplerConfig::effort(Effort::High);
        request.sampler.cache.enabled = false;
        let lengths = [3, 9, 5];
        let batch = engine
            .complete_lengths(
                &request,
                &lengths,
                &mut ContextCache::default(),
                Controls::default(),
            )
            .unwrap();
        assert_eq!(batch.len(), lengths.len());
        for (completion, &length) in batch.iter().zip(&lengths) {
            request.canvas_tokens = length;
            let alone = engine
                .complete(&request, &mut ContextCache::default(), Controls::default())
                .unwrap();
            assert_eq!(completion.tokens, alone.tokens, "length {length}");
            assert_eq!(completion.middle, alone.middle);
            assert!(completion.tokens.len() <= request.max_tokens);
        }
        assert!(engine
            .complete_lengths(
                &request,
                &[],
                &mut ContextCache::default(),
                Controls::default()
            )
            .is_err());
        assert!(engine
            .complete_lengths(
                &request,
                &[4, 0],
                &mut ContextCache::default(),
                Controls::default()
            )
            .is_err());
    }

    /// The context leaves room for the canvas to grow to `max_tokens`, and the canvas starts at
    /// `canvas_tokens` (never more than `max_tokens`).
    #[test]
    fn the_canvas_starts_at_the_prior_with_room_to_grow() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
        let engine = Engine::load(&dir).unwrap();
        let positions = engine.model().config().max_position_embeddings;
        let mut request = InfillRequest::new("let x = 1;\n".repeat(200), "}\n".repeat(200));
        request.canvas_tokens = 8;
        request.max_tokens = 40;
        let canvas = engine.canvas(&request).unwrap();
        assert_eq!((canvas.length, canvas.max_length), (8, 40));
        assert_eq!(canvas.prefix.len() + canvas.suffix.len() + 40, positions);
        request.max_tokens = 4;
        let capped = engine.canvas(&request).unwrap();
        assert_eq!((capped.length, capped.max_length), (4, 4));
        request.max_tokens = positions + 1;
        assert!(engine.canvas(&request).is_err());
    }

    /// The prompt's markers are never written into a canvas; the end is.
    #[test]
    fn special_tokens_but_the_end_are_banned_from_canvases() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
        let engine = Engine::load(&dir).unwrap();
        let markers = crate::edit::EditMarkers::of(engine.tokenizer()).unwrap();
        for id in [
            markers.file_sep,
            markers.cursor,
            markers.edit_start,
            markers.edit_end,
        ] {
            assert!(engine.banned[id as usize], "marker {id} is banned");
        }
        let settings = engine.settings();
        assert!(!engine.banned[settings.eos_token_id as usize]);
        assert!(!engine.banned[settings.pad_token_id as usize]);
        let text = engine.tokenizer().encode("fn main() {}").unwrap();
        assert!(text.iter().all(|&t| !engine.banned[t as usize]));
    }

    #[test]
    fn context_fits_the_budget_keeping_three_quarters_for_the_prefix() {
        assert_eq!(fit_context(10, 5, 100), (10, 5));
        assert_eq!(fit_context(1000, 1000, 100), (75, 25));
        assert_eq!(fit_context(1000, 10, 100), (90, 10));
        assert_eq!(fit_context(10, 1000, 100), (10, 90));
        assert_eq!(fit_context(1000, 1000, 0), (0, 0));
    }
}
