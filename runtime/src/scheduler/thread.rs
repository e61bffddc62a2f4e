//! The inference thread: it holds the model (or none), runs a loop over the queue on it, and
//! between loops loads the model a door asked for. A loop ends when a load is next in the queue
//! (the jobs before it answered, a batched loop's running ones finished), so every job runs on
//! the model that was loaded when it was submitted; a new model starts with no kept caches.
//! With no model, FIM jobs sent to a remote backend still run, and the rest are answered
//! [`JobError::NoModel`].

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use redraft_engine::Engine;

use super::run::{backend_job, Remote};
use super::{batched, serial, JobError, LoopConfig, Queue, Work};

pub fn run(mut engine: Option<Engine>, queue: &Queue, config: LoopConfig, delay: Option<Duration>) {
    // One client per backend configuration, kept across loops and models.
    let mut remote = Remote::default();
    loop {
        match &engine {
            Some(engine) if config.max_batch > 1 => {
                batched::run(engine, queue, config, delay, &mut remote)
            }
            Some(engine) => serial::run(engine, queue, config, delay, &mut remote),
            None => without_model(queue, config, &mut remote),
        }
        let Some(mut load) = queue.next_load() else {
            // Closed and drained.
            return;
        };
        // The old model goes first: two need not fit in memory at once.
        engine = None;
        let mut stderr = redraft_models::TerminalProgress::new();
        let progress: &mut dyn redraft_models::Progress = match load.progress.as_mut() {
            Some(progress) => progress.as_mut(),
            None => &mut stderr,
        };
        let loaded = crate::default_model::load_or_default_reporting(
            load.model.as_deref(),
            load.device,
            progress,
        );
        let answer = match loaded {
            Ok(loaded) => {
                let origin = format!(
                    "{} on {}",
                    loaded.dir().display(),
                    redraft_engine::device::describe(loaded.model().device())
                );
                queue.loaded(Ok(loaded.model().config().max_position_embeddings));
                engine = Some(loaded);
                Ok(origin)
            }
            Err(err) => {
                let why = format!("{err:#}");
                queue.loaded(Err(why.clone()));
                Err(why)
            }
        };
        let _ = load.reply.send(answer);
    }
}

/// The loop without a model, until a load is next or the queue is closed and drained.
fn without_model(queue: &Queue, config: LoopConfig, remote: &mut Remote) {
    let metrics = queue.metrics();
    while let Some(job) = queue.next() {
        if job.abandoned() {
            job.answer(Err(JobError::Cancelled), metrics);
            continue;
        }
        let result = match &job.work {
            Work::Fim(work) if work.backend.is_some() => {
                std::panic::catch_unwind(AssertUnwindSafe(|| backend_job(remote, &job, work)))
                    .unwrap_or_else(|_| {
                        eprintln!(
                            "{}: a job failed unexpectedly (a bug); the server goes on",
                            config.door
                        );
                        Err(JobError::Failed("internal error".into()))
                    })
            }
            _ => Err(JobError::NoModel(
                queue
                    .model()
                    .missing
                    .unwrap_or_else(|| "none was asked for".into()),
            )),
        };
        job.answer(result, metrics);
    }
}
