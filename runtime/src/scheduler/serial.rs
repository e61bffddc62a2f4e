//! The one-at-a-time loop: each queued job runs alone through the pipeline (a FIM job's
//! candidates still share their model calls), under the cache policy [`cache_policy`] chose,
//! each from the kept cache of the job most like it ([`KeptCaches`], as the batched loop keeps
//! them), refreshing a recent one while idle ([`idle`]). A job whose client left before it started is answered as cancelled without running
//! the model; one whose client leaves mid-way stops at the next denoising step. FIM jobs sent
//! to a remote backend are not this loop's: the backend workers run them.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use redraft_engine::Engine;

use super::idle;
use super::kept::{self, KeptCaches};
use super::run::{edit_job, fim_job, internal_error};
use super::{cache_policy, JobError, LoopConfig, Queue, Work};

/// Runs jobs until a model load is next or the queue holds none for the model and is closed.
pub fn run(engine: &Engine, queue: &Queue, config: LoopConfig, delay: Option<Duration>) {
    let mut kept = KeptCaches::new(config.kept_bytes);
    let metrics = queue.metrics();
    while let Some(job) = idle::next_job(engine, queue, &mut kept, config.idle_refresh) {
        if job.abandoned() {
            job.answer(Err(JobError::Cancelled), metrics);
            continue;
        }
        // A gauge the backend workers count their jobs in too.
        metrics.running.inc();
        let policy = cache_policy(&job.work, &config.cache);
        let key = kept::key(&job);
        let mut cache = kept.take(&key, metrics);
        // A bug on one request must not stop the server (nor leave a cache it half wrote).
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| match &job.work {
            Work::Fim(work) => fim_job(engine, &mut cache, policy, &job, work, delay, metrics),
            Work::Edit(work) => edit_job(engine, &mut cache, policy, &job, work, delay, metrics),
        }));
        if result.is_ok() {
            kept.keep(&key, cache, metrics);
        }
        let result = result.unwrap_or_else(|_| internal_error(config.door));
        metrics.running.dec();
        job.answer(result, metrics);
    }
}
