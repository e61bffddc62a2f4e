//! [`EngineBatch`]: the engine for a server, requests joining a running batch between
//! denoising steps and leaving as completions.

use std::collections::HashMap;
use std::time::Instant;

use super::{Admitted, Completion, Engine, InfillRequest};
use crate::cache::ContextCache;
use crate::edit::EditRequest;
use crate::error::{Error, Result};
use crate::sampler::{
    step_together, Batch, CachePolicy, Canvas, MemberControls, MemberId, MemberOutcome, PassStats,
    SamplerConfig,
};

impl Engine {
    /// A batch that requests join and leave between denoising steps (what a server runs: see
    /// [`EngineBatch`]), under one cache policy, with a cache of its own.
    pub fn batch(&self, cache: CachePolicy) -> EngineBatch<'_> {
        self.batch_from(cache, ContextCache::default())
    }

    /// [`Engine::batch`] starting from `kept`, the cache an earlier batch left
    /// ([`EngineBatch::into_cache`]): when the policy allows edit reuse and the first requests'
    /// tokens differ from the kept ones by edits, the first pass realigns it
    /// ([`crate::sampler::Pass::Realign`]) instead of recomputing every position.
    pub fn batch_from(&self, cache: CachePolicy, kept: ContextCache) -> EngineBatch<'_> {
        EngineBatch {
            engine: self,
            batch: self.sampler().batch(cache),
            cache: kept,
            admitted: HashMap::new(),
        }
    }
}

/// The requests a step of an [`EngineBatch`] finished: completed, failed or cancelled.
pub type Finished = Vec<(MemberId, Result<Completion>)>;

/// Requests decoded together, joining at the next denoising step and leaving when done: the
/// engine's face of [`Batch`] (see it for the cache rule), for a server that batches whatever
/// is in flight, fill-in-the-middle and next-edit requests alike. Each request keeps its own
/// sampler config, cancel flag, deadline and stream; the batch holds the cache.
pub struct EngineBatch<'e> {
    engine: &'e Engine,
    batch: Batch<'e>,
    cache: ContextCache,
    admitted: HashMap<MemberId, Admitted>,
}

impl<'e> EngineBatch<'e> {
    /// Adds a fill-in-the-middle request (its canvas as [`Engine::complete`] builds it).
    pub fn join(
        &mut self,
        request: &InfillRequest,
        controls: MemberControls<'e>,
    ) -> Result<MemberId> {
        let started = Instant::now();
        let canvas = self.engine.canvas(request)?;
        self.admit(&canvas, request.sampler.clone(), controls, started)
    }

    /// Adds a next-edit request (its canvas as [`Engine::next_edit`] builds it).
    pub fn join_edit(
        &mut self,
        request: &EditRequest,
        controls: MemberControls<'e>,
    ) -> Result<MemberId> {
        let started = Instant::now();
        let canvas = self.engine.edit_canvas(request)?;
        self.admit(&canvas, request.sampler.clone(), controls, started)
    }

    /// Adds a canvas built by the caller, decoded under `config`.
    pub fn join_canvas(
        &mut self,
        canvas: &Canvas,
        config: SamplerConfig,
        controls: MemberControls<'e>,
    ) -> Result<MemberId> {
        self.admit(canvas, config, controls, Instant::now())
    }

    fn admit(
        &mut self,
        canvas: &Canvas,
        config: SamplerConfig,
        controls: MemberControls<'e>,
        started: Instant,
    ) -> Result<MemberId> {
        let admitted = Admitted::now(canvas, started);
        let id = self.batch.join(canvas, config, controls)?;
        self.admitted.insert(id, admitted);
        Ok(id)
    }

    /// One denoising step over every request in the batch (see [`Batch::step`]): the requests
    /// that finished, as completions whose `forwards`, passes, `model_ms` and `hit_deadline`
    /// count the model calls each took part in, and `total_ms` runs from its join; a cancelled
    /// one as [`Error::Cancelled`]. A model error fails the step for everyone.
    pub fn step(&mut self) -> Result<Finished> {
        let mut left = EngineBatch::step_together(&mut [self])?;
        Ok(left.pop().expect("one batch, one answer"))
    }

    /// One denoising step of several batches of one engine, each with its own cache, in one
    /// model call ([`step_together`]): [`EngineBatch::step`] for each, the batches' rows
    /// multiplied by the weights together whatever their positions. A model error fails the
    /// step for every batch; batches of different engines are refused.
    pub fn step_together(batches: &mut [&mut EngineBatch<'e>]) -> Result<Vec<Finished>> {
        let Some(engine) = batches.first().map(|b| b.engine) else {
            return Ok(Vec::new());
        };
        if batches.iter().any(|b| !std::ptr::eq(b.engine, engine)) {
            return Err(Error::InvalidRequest(
                "batches of different engines cannot share a model call".into(),
            ));
        }
        let mut lanes: Vec<(&mut Batch<'e>, &mut ContextCache)> = batches
            .iter_mut()
            .map(|b| (&mut b.batch, &mut b.cache))
            .collect();
        let left = step_together(&engine.model, &mut lanes)?;
        Ok(batches
            .iter_mut()
            .zip(left)
            .map(|(batch, left)| {
                left.into_iter()
                    .map(|(id, outcome)| {
                        let admitted = batch.admitted.remove(&id).expect("joined through admit");
                        let completion = match outcome {
                            MemberOutcome::Filled { infill, stats } => {
                                engine.completion(&admitted, &infill, &stats)
                            }
                            MemberOutcome::Cancelled => Err(Error::Cancelled),
                        };
                        (id, completion)
                    })
                    .collect()
            })
            .collect())
    }

    /// Requests still being filled.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// Every model call the batch has made so far.
    pub fn stats(&self) -> PassStats {
        self.batch.stats()
    }

    /// The batch's cache, for a later batch to start from ([`Engine::batch_from`]).
    pub fn into_cache(self) -> ContextCache {
        self.cache
    }
}
