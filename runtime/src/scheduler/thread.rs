//! The inference thread: it holds the model (or none), runs a loop over the queue on it, and
//! between loops loads the model a door asked for. A loop ends when a load is next in the queue
//! (the jobs before it answered, a batched loop's running ones finished), so every job runs on
//! the model that was loaded when it was submitted; a new model starts with no kept caches.
//! With no model, the jobs that need one are answered [`JobError::NoModel`].
//!
//! The thread also owns the backend workers (`remote`), which run FIM jobs sent to a remote
//! backend whatever the model thread does (loading, decoding, or holding no model); it ends once
//! the queue is closed and they, too, have answered every job it held.

use std::time::Duration;

use redraft_engine::Engine;

use super::queue::ModelFacts;
use super::remote::{self, Remote, BACKEND_WORKERS};
use super::{batched, serial, JobError, LoadFailure, LoopConfig, Queue};

pub fn run(engine: Option<Engine>, queue: &Queue, config: LoopConfig, delay: Option<Duration>) {
    // One client per backend configuration, shared by the workers, kept across loops and models.
    let remote = Remote::default();
    std::thread::scope(|scope| {
        for n in 0..BACKEND_WORKERS {
            std::thread::Builder::new()
                .name(format!("redraft-backend-{n}"))
                .spawn_scoped(scope, || remote::work(queue, &remote, config.door))
                .expect("spawning a backend worker");
        }
        model_thread(engine, queue, config, delay);
    });
}

/// The model's side: loops over the queue's jobs for the model, and the loads between them.
fn model_thread(
    mut engine: Option<Engine>,
    queue: &Queue,
    config: LoopConfig,
    delay: Option<Duration>,
) {
    let mut origin = engine.as_ref().map(origin_of);
    loop {
        match &engine {
            Some(engine) if config.max_batch > 1 => batched::run(engine, queue, config, delay),
            Some(engine) => serial::run(engine, queue, config, delay),
            None => without_model(queue),
        }
        let Some(mut load) = queue.next_load() else {
            // Closed, with no job for the model left (the backend workers finish theirs).
            return;
        };
        let mut stderr = redraft_models::TerminalProgress::new();
        let progress: &mut dyn redraft_models::Progress = match load.progress.as_mut() {
            Some(progress) => progress.as_mut(),
            None => &mut stderr,
        };
        // Found, downloaded and read before the old model goes: a model that fails there (a
        // mistyped path or name, a file that is not a model) leaves the old one serving.
        let checked =
            crate::default_model::check_reporting(load.model.as_deref(), load.device, progress);
        let loaded = checked.and_then(|checked| {
            // The old model goes first: two need not fit in memory at once.
            engine = None;
            origin = None;
            crate::default_model::load_checked(checked)
        });
        let answer = match loaded {
            Ok(loaded) => {
                let from = origin_of(&loaded);
                queue.loaded(Ok(ModelFacts::of(&loaded)));
                engine = Some(loaded);
                origin = Some(from.clone());
                Ok(from)
            }
            Err(err) => {
                let reason = format!("{err:#}");
                match &engine {
                    Some(kept) => queue.loaded(Ok(ModelFacts::of(kept))),
                    None => queue.loaded(Err(reason.clone())),
                }
                Err(LoadFailure {
                    reason,
                    kept: origin.clone(),
                })
            }
        };
        let _ = load.reply.send(answer);
    }
}

/// Where a loaded model came from and the device it runs on.
fn origin_of(engine: &Engine) -> String {
    format!(
        "{} on {}",
        engine.dir().display(),
        redraft_engine::device::describe(engine.model().device())
    )
}

/// The loop without a model, until a load is next or the queue holds no job for the model and
/// is closed.
fn without_model(queue: &Queue) {
    let metrics = queue.metrics();
    while let Some(job) = queue.next() {
        let result = if job.abandoned() {
            Err(JobError::Cancelled)
        } else {
            Err(JobError::NoModel(
                queue
                    .model()
                    .missing
                    .unwrap_or_else(|| "none was asked for".into()),
            ))
        };
        job.answer(result, metrics);
    }
}
