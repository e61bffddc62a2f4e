//! The one-at-a-time loop: each queued job runs alone through the pipeline (a FIM job's
//! candidates still share their model calls), under the cache policy [`cache_policy`] chose,
//! each from the kept cache of the job most like it ([`KeptCaches`], as the batched loop keeps
//! them), refreshing a recent one while idle ([`idle`]). A job whose client left before it
//! started is answered as cancelled without running the model; one whose client leaves mid-way
//! stops at the next denoising step (or, in an exact pass, the next layer). FIM jobs sent to a
//! remote backend are not this loop's: the backend workers run them.
//!
//! A job run ahead of any request ([`super::Submit::wanted`]: the language server's next edit,
//! precomputed in a pause) makes way for a request that comes while it runs: it stops as a
//! cancelled one does and is queued again, first among the jobs nobody waits for, behind the
//! requests. A keystroke's completion in another document so waits for a fraction of the
//! precompute's pass, not for all of its passes; the precompute starts over after it. While a
//! request waits for the job itself, it does not make way; once that request has gone (its flag
//! down again), it does.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redraft_engine::Engine;

use super::idle;
use super::kept::{self, KeptCaches};
use super::run::{edit_job, fim_job, internal_error, Steering};
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
        for client in queue.take_forgotten() {
            kept.forget(&client, metrics);
        }
        // A gauge the backend workers count their jobs in too.
        metrics.running.inc();
        let policy = cache_policy(&job.work, &config.cache);
        let key = kept::key(&job);
        let mut cache = kept.take(&key, metrics);
        let ahead = job.ahead_of_requests();
        let made_way = AtomicBool::new(false);
        let make_way = || {
            let now = ahead
                .as_ref()
                .is_some_and(|wanted| !wanted.load(Ordering::Relaxed))
                && queue.request_waiting();
            if now {
                made_way.store(true, Ordering::Relaxed);
            }
            now
        };
        let steering = Steering {
            delay,
            interrupt: ahead.is_some().then_some(&make_way),
        };
        // A bug on one request must not stop the server (nor leave a cache it half wrote).
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| match &job.work {
            Work::Fim(work) => fim_job(engine, &mut cache, policy, &job, work, steering, metrics),
            Work::Edit(work) => edit_job(engine, &mut cache, policy, &job, work, steering, metrics),
        }));
        if result.is_ok() {
            kept.keep(&key, cache, metrics);
        }
        let result = result.unwrap_or_else(|_| internal_error(config.door));
        metrics.running.dec();
        let stopped = matches!(result, Err(JobError::Cancelled));
        // Put back even if a request came to wait for it since it stopped: it is wanted then,
        // and first in the queue, so it runs again at once.
        if stopped && made_way.load(Ordering::Relaxed) && !job.abandoned() {
            metrics.requeued(job.work.kind());
            queue.put_back(job);
            continue;
        }
        job.answer(result, metrics);
    }
}
