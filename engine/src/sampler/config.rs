//! How to decode: the [`SamplerConfig`] a request carries (an [`Effort`] preset and its
//! overrides: confidence, schedule, steps, guesses) and the context cache's [`CachePolicy`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What "confident" means when choosing which slots to commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confidence {
    /// Probability of the chosen token.
    Probability,
    /// Top-1 minus top-2 probability.
    Margin,
    /// Negative entropy of the slot's distribution, in nats (0 is certain).
    NegEntropy,
}

/// How many slots a step commits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Schedule {
    /// Every slot whose confidence is at least `tau`, and at least one.
    Threshold { tau: f32 },
    /// The `k` most confident slots.
    TopK { k: usize },
}

/// The approximate context cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachePolicy {
    pub enabled: bool,
    /// Recompute every position (and refill the cache) every this many steps.
    pub refresh_every: Option<usize>,
    /// Reuse of a caller's cache across an edit of the context
    /// ([`Pass::Realign`](super::Pass::Realign)); `None`: a changed context costs a stored full
    /// pass (exact). (`edit` in settings written before the rename.)
    #[serde(default, alias = "edit")]
    pub realign: Option<Realign>,
    /// A stored full pass computes at most this many positions past those it takes from the
    /// cache: a longer prompt is computed over several passes first, steps in which no slot
    /// commits ([`Denoiser::stored_prefix`](super::Denoiser::stored_prefix): causal and block-causal models only). Between
    /// them a cancel is seen, and in a model call shared with other requests a new prompt
    /// costs the others one piece's rows a step instead of all of its rows at once. `None`:
    /// one pass.
    #[serde(default)]
    pub prompt_chunk: Option<usize>,
}

/// How a request's first pass reuses a cache whose tokens differ from the request's by edits
/// (a keystroke): positions in unchanged runs keep their cached keys/values (moved ones
/// re-rotated to their new positions), `radius` tokens on each side of each change and the
/// window are recomputed. Before the first change of a causal or block-causal model that is
/// exact; everywhere else the kept positions attended to the old tokens, which is the
/// approximation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Realign {
    /// Tokens recomputed on each side of each changed run.
    pub radius: usize,
    /// Approximate passes a cache may take in a row: the request after that many pays an exact
    /// stored full pass (0: never approximate).
    pub refresh_after: usize,
}

impl Realign {
    /// The shipped setting (docs/reports/real-weights/keystroke.md): on the real 0.5B at 1k tokens
    /// a keystroke's first pass costs about 2x a cached step at radius 8 (1.5x at 4, 2.5x at
    /// 16); on the default model 93% of HumanEval single-line middles after three keystrokes are
    /// the exact pass's (90% at 4, 96% at 16).
    pub const DEFAULT: Realign = Realign {
        radius: 8,
        refresh_after: 8,
    };
}

/// Quality/speed presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effort {
    Low,
    Medium,
    High,
}

impl Effort {
    pub const ALL: [Effort; 3] = [Effort::Low, Effort::Medium, Effort::High];

    /// As flags, settings and `redraft.json` write it.
    pub fn name(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

impl std::str::FromStr for Effort {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Effort, String> {
        Effort::ALL
            .into_iter()
            .find(|effort| effort.name() == s)
            .ok_or_else(|| format!("unknown effort `{s}` (low, medium or high)"))
    }
}

/// Everything that decides how the sampler decodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplerConfig {
    pub schedule: Schedule,
    pub confidence: Confidence,
    /// Cap on denoising steps (model calls) per request; `None`: as many as there are slots.
    pub max_steps: Option<usize>,
    /// 0 is greedy.
    pub temperature: f32,
    pub seed: u64,
    pub cache: CachePolicy,
    /// The bar for a slot whose vote agrees with the canvas's [`Canvas::draft`](super::Canvas::draft) (the text it
    /// rewrites), in place of the schedule's: a copied token is committed once the model is
    /// this sure of it. `None`: drafts are ignored.
    #[serde(default)]
    pub draft_tau: Option<f32>,
    /// Causal greedy decoding of a canvas without a draft guesses its next tokens from the
    /// request's own context, where the lead's last tokens occur there (prompt lookup; see
    /// `Sampler::speculate`): fewer passes, the same tokens.
    #[serde(default)]
    pub guess_context: bool,
}

/// One effort's decoding: how many slots a step commits and the cap on steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    pub schedule: Schedule,
    /// `None`: as many steps as there are slots.
    #[serde(default)]
    pub max_steps: Option<usize>,
}

impl Preset {
    /// Why this preset cannot decode, if it cannot: a bar outside (0, 1], no slot per step or
    /// no step at all.
    pub fn check(&self) -> std::result::Result<(), String> {
        match self.schedule {
            Schedule::Threshold { tau } if !(tau > 0.0 && tau <= 1.0) => {
                return Err(format!("tau {tau} is not in (0, 1]"))
            }
            Schedule::TopK { k: 0 } => return Err("k is 0: no slot would ever commit".into()),
            _ => {}
        }
        if self.max_steps == Some(0) {
            return Err("max_steps is 0".into());
        }
        Ok(())
    }
}

/// What each [`Effort`] means for one model: the built-in presets unless its `redraft.json`
/// tunes them (`efforts`; [`crate::config::DiffusionSettings::efforts`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Efforts {
    pub low: Preset,
    pub medium: Preset,
    pub high: Preset,
}

impl Efforts {
    /// Measured on the 2M model that was the default until a GPU-trained one (scripts/decoding-bench,
    /// docs/performance.md "Decoding"): a step cap that makes weak slots commit several per
    /// step wrote better middles than waiting for confidence, at a third of the forward
    /// passes; `high` commits one decision per step (the quality ceiling).
    pub const BUILT_IN: Efforts = Efforts {
        low: Preset {
            schedule: Schedule::Threshold { tau: 0.7 },
            max_steps: Some(4),
        },
        medium: Preset {
            schedule: Schedule::Threshold { tau: 0.9 },
            max_steps: Some(8),
        },
        high: Preset {
            schedule: Schedule::TopK { k: 1 },
            max_steps: None,
        },
    };

    pub fn get(&self, effort: Effort) -> Preset {
        match effort {
            Effort::Low => self.low,
            Effort::Medium => self.medium,
            Effort::High => self.high,
        }
    }

    fn get_mut(&mut self, effort: Effort) -> &mut Preset {
        match effort {
            Effort::Low => &mut self.low,
            Effort::Medium => &mut self.medium,
            Effort::High => &mut self.high,
        }
    }

    /// These presets with `tuned`'s in place of the ones it names (`redraft.json`'s
    /// `efforts`); an error names a preset that cannot decode.
    pub fn tuned(
        mut self,
        tuned: &BTreeMap<Effort, Preset>,
    ) -> std::result::Result<Efforts, String> {
        for (&effort, &preset) in tuned {
            preset
                .check()
                .map_err(|why| format!("the `{}` preset: {why}", effort.name()))?;
            *self.get_mut(effort) = preset;
        }
        Ok(self)
    }
}

impl Default for Efforts {
    fn default() -> Efforts {
        Efforts::BUILT_IN
    }
}

impl SamplerConfig {
    /// The built-in preset of `effort` ([`Efforts::BUILT_IN`]). A loaded model's own presets,
    /// which its `redraft.json` may tune, are [`crate::Engine::effort`]'s.
    pub fn effort(effort: Effort) -> SamplerConfig {
        SamplerConfig::preset(Efforts::BUILT_IN.get(effort))
    }

    /// Greedy decoding with `preset`'s schedule and step cap, the context cache on (edit reuse
    /// at [`Realign::DEFAULT`]) and guesses from the context.
    pub fn preset(preset: Preset) -> SamplerConfig {
        let Preset {
            schedule,
            max_steps,
        } = preset;
        SamplerConfig {
            schedule,
            confidence: Confidence::Probability,
            max_steps,
            temperature: 0.0,
            seed: 0,
            cache: CachePolicy {
                enabled: true,
                refresh_every: None,
                realign: Some(Realign::DEFAULT),
                prompt_chunk: None,
            },
            draft_tau: None,
            guess_context: true,
        }
    }
}

impl Default for SamplerConfig {
    fn default() -> SamplerConfig {
        SamplerConfig::effort(Effort::Medium)
    }
}
