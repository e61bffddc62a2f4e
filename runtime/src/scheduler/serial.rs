//! The one-at-a-time loop: each queued job runs alone through the pipeline (a FIM job's
//! candidates still share their model calls), each from the kept cache of the job most like it
//! ([`KeptCaches`], as the batched loop keeps them), or through a remote backend when its work
//! names one. A job whose client left before it started is answered as cancelled without
//! running the model; one whose client leaves mid-way stops at the next denoising step.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use redraft_engine::Engine;

use super::kept::{self, KeptCaches};
use super::run::{backend_job, edit_job, fim_job, Remote};
use super::{JobError, LoopConfig, Queue, Work};

/// Runs jobs until a model load is next or the queue is closed and drained.
pub fn run(
    engine: &Engine,
    queue: &Queue,
    config: LoopConfig,
    delay: Option<Duration>,
    remote: &mut Remote,
) {
    let mut kept = KeptCaches::new(config.kept_bytes);
    let metrics = queue.metrics();
    while let Some(job) = queue.next() {
        if job.abandoned() {
            job.answer(Err(JobError::Cancelled), metrics);
            continue;
        }
        metrics.running.set(1);
        // A bug on one request must not stop the server (nor leave a cache it half wrote).
        let result = match &job.work {
            Work::Fim(work) if work.backend.is_some() => {
                std::panic::catch_unwind(AssertUnwindSafe(|| backend_job(remote, &job, work)))
            }
            work => {
                let key = kept::key(&job);
                let mut cache = kept.take(&key, metrics);
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| match work {
                    Work::Fim(work) => fim_job(engine, &mut cache, &job, work, delay, metrics),
                    Work::Edit(work) => edit_job(engine, &mut cache, &job, work, delay, metrics),
                }));
                if result.is_ok() {
                    kept.keep(&key, cache, metrics);
                }
                result
            }
        };
        let result = result.unwrap_or_else(|_| {
            eprintln!(
                "{}: a job failed unexpectedly (a bug); the server goes on",
                config.door
            );
            Err(JobError::Failed("internal error".into()))
        });
        metrics.running.set(0);
        job.answer(result, metrics);
    }
}
