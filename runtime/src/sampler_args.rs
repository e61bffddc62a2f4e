//! The decoding flags `redraft complete` and `redraft eval` share (and each `--sweep` setting
//! is parsed with): an effort preset plus overrides.

use redraft_context::edit::EditBudget;
use redraft_engine::sampler::{Confidence, Effort, Efforts, Realign, SamplerConfig, Schedule};

#[derive(clap::Args, Debug, Clone)]
pub struct SamplerArgs {
    /// Quality/speed preset: low, medium or high.
    #[arg(long, default_value = "medium")]
    pub effort: Effort,
    /// Commit every slot at least this confident (threshold decoding; above 0, at most 1).
    #[arg(long, conflicts_with = "per_step", value_parser = parse_tau)]
    pub tau: Option<f32>,
    /// Commit exactly this many slots per step instead of a threshold (1: the quality ceiling).
    #[arg(long, value_parser = parse_at_least_one)]
    pub per_step: Option<usize>,
    /// Cap on denoising steps.
    #[arg(long, value_parser = parse_at_least_one)]
    pub steps: Option<usize>,
    /// Confidence measure: probability, margin or neg-entropy.
    #[arg(long, value_parser = parse_confidence)]
    pub confidence: Option<Confidence>,
    /// Recompute every position at every step (no context cache).
    #[arg(long)]
    pub no_cache: bool,
    /// Refresh the context cache every N steps.
    #[arg(long, value_parser = parse_at_least_one)]
    pub refresh_every: Option<usize>,
    /// A kept cache across an edit of the context: recompute RADIUS tokens on each side of each
    /// change and reuse the rest (approximate), or `off` (an edit costs an exact full pass)
    /// [default: 8]. Only a cache kept across requests (eval --typed) meets an edit.
    #[arg(long, value_name = "RADIUS|off", value_parser = parse_edit_reuse)]
    pub edit_reuse: Option<EditReuseFlag>,
    /// With --edit-reuse: approximate first passes in a row before a request pays an exact one
    /// [default: 8].
    #[arg(long)]
    pub edit_refresh: Option<usize>,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0, value_parser = parse_temperature)]
    pub temperature: f32,
    /// Sampling seed (a negative one is its 64 bits as unsigned, as the HTTP server reads it).
    #[arg(long, default_value_t = 0, value_parser = parse_seed, allow_negative_numbers = true)]
    pub seed: u64,
    /// Autoregressive models: no guessing of the next tokens from the request's context
    /// (greedy decoding checks guesses, so the text is the same; only the passes differ).
    #[arg(long)]
    pub no_guess: bool,
    /// Next edits: commit a token copied from the old region once the model is this sure of it
    /// [default: 0.5; above 0, at most 1].
    #[arg(long, conflicts_with = "no_draft", value_parser = parse_tau)]
    pub draft_tau: Option<f32>,
    /// Next edits: no lower bar for copies of the old region (every slot waits for --tau).
    #[arg(long)]
    pub no_draft: bool,
    /// Next edits: a rewrite changing more than this share of the region (0 or more) is no
    /// suggestion [default: 0.5].
    #[arg(long, value_parser = parse_share)]
    pub max_change: Option<f64>,
    /// Next edits: a rewrite whose least probable changed token the model gave less than this
    /// (0 to 1) is no suggestion [default: the model's own bar, `edit_min_confidence` in its
    /// redraft.json, else 0].
    #[arg(long, value_parser = parse_probability)]
    pub min_edit_confidence: Option<f32>,
}

/// A number from 0 to 1 (a confidence bar's flag).
pub fn parse_probability(text: &str) -> Result<f32, String> {
    text.parse::<f32>()
        .ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| format!("expected a number from 0 to 1, got `{text}`"))
}

/// `--max-change`: a share of the region, 0 or more (a rewrite may insert more than the region
/// holds, so above 1 is a looser guard, not a mistake); `nan` would silently turn the guard off.
pub fn parse_share(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|share| *share >= 0.0)
        .ok_or_else(|| format!("expected a share of the region, 0 or more, got `{text}`"))
}

/// A commit bar (`--tau`, `--draft-tau`): above 0 and at most 1, as a preset's in `redraft.json`.
pub fn parse_tau(text: &str) -> Result<f32, String> {
    text.parse::<f32>()
        .ok()
        .filter(|t| *t > 0.0 && *t <= 1.0)
        .ok_or_else(|| format!("expected a number above 0 and at most 1, got `{text}`"))
}

/// `--temperature`: 0 (greedy) or more, finite.
pub fn parse_temperature(text: &str) -> Result<f32, String> {
    text.parse::<f32>()
        .ok()
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| format!("expected a number from 0 (greedy) up, got `{text}`"))
}

/// `--seed`: a 64-bit seed, signed or unsigned (-1 is `u64::MAX`, as over HTTP).
pub fn parse_seed(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .or_else(|_| text.parse::<i64>().map(|seed| seed as u64))
        .map_err(|_| {
            format!("expected a whole number (a signed or unsigned 64-bit seed), got `{text}`")
        })
}

/// A count of milliseconds, 0 or more (`--deadline-ms`).
pub fn parse_millis(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("expected a whole number of milliseconds, 0 or more, got `{text}`"))
}

/// `--steps`, `--per-step`, `--refresh-every`: a count of 1 or more.
pub fn parse_at_least_one(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("expected a whole number of 1 or more, got `{text}`"))
}

/// `--edit-reuse`: a radius, or `None` for `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EditReuseFlag(pub Option<usize>);

impl EditReuseFlag {
    /// `base` with this flag's radius, or `None` for `off`.
    pub fn over(self, base: Realign) -> Option<Realign> {
        self.0.map(|radius| Realign { radius, ..base })
    }
}

pub fn parse_edit_reuse(s: &str) -> Result<EditReuseFlag, String> {
    match s {
        "off" => Ok(EditReuseFlag(None)),
        n => n
            .parse()
            .map(|r| EditReuseFlag(Some(r)))
            .map_err(|_| format!("--edit-reuse takes a radius in tokens or `off`, not `{n}`")),
    }
}

fn parse_confidence(s: &str) -> Result<Confidence, String> {
    match s {
        "probability" => Ok(Confidence::Probability),
        "margin" => Ok(Confidence::Margin),
        "neg-entropy" => Ok(Confidence::NegEntropy),
        other => Err(format!(
            "unknown confidence `{other}` (probability, margin or neg-entropy)"
        )),
    }
}

impl SamplerArgs {
    /// The effort's preset among `efforts` (the model's: [`redraft_engine::Engine::effort`]'s)
    /// with the overrides applied.
    pub fn config(&self, efforts: Efforts) -> SamplerConfig {
        let mut config = SamplerConfig::preset(efforts.get(self.effort));
        if let Some(tau) = self.tau {
            config.schedule = Schedule::Threshold { tau };
        }
        if let Some(k) = self.per_step {
            config.schedule = Schedule::TopK { k };
        }
        if self.steps.is_some() {
            config.max_steps = self.steps;
        }
        if let Some(confidence) = self.confidence {
            config.confidence = confidence;
        }
        config.cache.enabled = !self.no_cache;
        config.cache.refresh_every = self.refresh_every;
        if let Some(flag) = self.edit_reuse {
            config.cache.realign = flag.over(config.cache.realign.unwrap_or(Realign::DEFAULT));
        }
        if let (Some(edit), Some(n)) = (config.cache.realign.as_mut(), self.edit_refresh) {
            edit.refresh_after = n;
        }
        config.temperature = self.temperature;
        config.seed = self.seed;
        config.draft_tau = if self.no_draft { None } else { self.draft_tau };
        config.guess_context = !self.no_guess;
        config
    }

    /// [`SamplerArgs::config`] for next edits: copies of the old region commit at the draft
    /// bar unless `--no-draft`.
    pub fn edit_config(&self, efforts: Efforts) -> SamplerConfig {
        let mut config = self.config(efforts);
        if !self.no_draft && config.draft_tau.is_none() {
            config.draft_tau = Some(redraft_suggest::edit::DRAFT_TAU);
        }
        config
    }

    /// The next-edit budget for a model of `positions` positions, with `--max-change`.
    pub fn edit_budget(&self, positions: usize) -> EditBudget {
        let mut budget = EditBudget::for_positions(positions);
        if let Some(fraction) = self.max_change {
            budget.max_changed_fraction = fraction;
        }
        budget.min_confidence = self.min_edit_confidence;
        budget
    }

    /// The flags as a user would write them, defaults left out (`--effort low --tau 0.5`).
    pub fn describe(&self) -> String {
        let effort = match self.effort {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        };
        let mut parts = vec![format!("--effort {effort}")];
        let mut add = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                parts.push(format!("--{flag} {value}").trim_end().to_string());
            }
        };
        add("tau", self.tau.map(|t| t.to_string()));
        add("per-step", self.per_step.map(|k| k.to_string()));
        add("steps", self.steps.map(|s| s.to_string()));
        add(
            "confidence",
            self.confidence.map(|c| {
                match c {
                    Confidence::Probability => "probability",
                    Confidence::Margin => "margin",
                    Confidence::NegEntropy => "neg-entropy",
                }
                .to_string()
            }),
        );
        add("no-cache", self.no_cache.then(String::new));
        add("refresh-every", self.refresh_every.map(|r| r.to_string()));
        add(
            "edit-reuse",
            self.edit_reuse
                .map(|EditReuseFlag(r)| r.map_or("off".into(), |r| r.to_string())),
        );
        add("edit-refresh", self.edit_refresh.map(|n| n.to_string()));
        add(
            "temperature",
            (self.temperature != 0.0).then(|| self.temperature.to_string()),
        );
        add("seed", (self.seed != 0).then(|| self.seed.to_string()));
        add("no-guess", self.no_guess.then(String::new));
        add("draft-tau", self.draft_tau.map(|t| t.to_string()));
        add("no-draft", self.no_draft.then(String::new));
        add("max-change", self.max_change.map(|f| f.to_string()));
        add(
            "min-edit-confidence",
            self.min_edit_confidence.map(|p| p.to_string()),
        );
        parts.join(" ")
    }
}
