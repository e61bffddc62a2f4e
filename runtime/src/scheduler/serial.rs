//! The one-at-a-time loop: each queued job runs alone through the pipeline (a FIM job's
//! candidates still share their model calls), each from the kept cache of the job most like it
//! ([`KeptCaches`], as the batched loop keeps them). A job whose
//! client left before it started is answered as cancelled without running the model; one whose
//! client leaves mid-way stops at the next denoising step.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use redraft_engine::Engine;

use super::kept::{self, KeptCaches};
use super::run::{edit_job, fim_job};
use super::{JobError, Queue, Work};

pub fn run(engine: &Engine, queue: &Queue, kept_bytes: usize, delay: Option<Duration>) {
    let mut kept = KeptCaches::new(kept_bytes);
    let metrics = queue.metrics();
    while let Some(job) = queue.next() {
        if job.abandoned() {
            job.answer(Err(JobError::Cancelled), metrics);
            continue;
        }
        metrics.running.set(1);
        let key = kept::key(&job.work);
        let mut cache = kept.take(key, metrics);
        // A bug on one request must not stop the server (nor leave a cache it half wrote).
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| match &job.work {
            Work::Fim(work) => fim_job(engine, &mut cache, &job, work, delay, metrics),
            Work::Edit(work) => edit_job(engine, &mut cache, &job, work, delay, metrics),
        }));
        let result = match result {
            Ok(result) => {
                kept.keep(key, cache, metrics);
                result
            }
            Err(_) => {
                eprintln!("redraft serve: a job failed unexpectedly (a bug); the server goes on");
                Err(JobError::Failed("internal error".into()))
            }
        };
        metrics.running.set(0);
        job.answer(result, metrics);
    }
}
