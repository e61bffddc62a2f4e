//! The backend workers: FIM jobs sent to a remote backend run here, off the model thread. A
//! backend job is a network round trip whose work is done by another process; on the model
//! thread it held every lane being decoded (and, one job at a time, the whole queue) for as long
//! as the backend took. A few workers take those jobs from the same queue ([`Queue::next_remote`],
//! in order, past any model load) and answer them the way the loops answer theirs: a job whose
//! client left is answered as cancelled without a request, a cancel raised mid-way closes the
//! request ([`backend_job`]), a panic fails the job and not the server, and the `running` gauge
//! counts the job while it runs.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use super::run::{backend_job, internal_error};
use super::{JobError, Queue, Work};
use crate::backend::{Backend, BackendConfig};

/// Backend jobs run at once, at most. A worker only waits on the network, so a few cost next to
/// nothing, and more than one lets a stuck or slow backend request not hold up the next one (an
/// editor whose user types on cancels its request and sends another). Few, because they are
/// also the connections the server opens to the backend at once: a door that wants more in
/// flight should batch on the backend's side, not here. The rest wait in the queue, under its
/// bound.
pub const BACKEND_WORKERS: usize = 4;

/// The remote backends the workers have used: one client, shared by the workers (it keeps its
/// connections), built again when a job names another configuration (as a door's settings
/// change); a worker still using the old one keeps it until its request ends.
#[derive(Default)]
pub struct Remote {
    backend: Mutex<Option<Arc<Backend>>>,
}

impl Remote {
    /// The client for `config`.
    pub fn backend(&self, config: &BackendConfig) -> Result<Arc<Backend>, JobError> {
        // A panic while building a client leaves nothing half done: the old one or none.
        let mut backend = self.backend.lock().unwrap_or_else(|e| e.into_inner());
        match backend.as_ref() {
            Some(built) if built.config() == config => Ok(Arc::clone(built)),
            _ => {
                *backend = None;
                let built = Arc::new(
                    Backend::new(config.clone()).map_err(|e| JobError::Backend(e.to_string()))?,
                );
                *backend = Some(Arc::clone(&built));
                Ok(built)
            }
        }
    }
}

/// One worker: runs the queue's backend jobs until it is closed and holds none.
pub fn work(queue: &Queue, remote: &Remote, door: &'static str) {
    let metrics = queue.metrics();
    while let Some(job) = queue.next_remote() {
        if job.abandoned() {
            job.answer(Err(JobError::Cancelled), metrics);
            continue;
        }
        let Work::Fim(work) = &job.work else {
            unreachable!("only FIM jobs are sent to a backend");
        };
        metrics.running.inc();
        // A bug on one request must not stop the server.
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| backend_job(remote, &job, work)))
            .unwrap_or_else(|_| internal_error(door));
        // Before the answer: a door that reads the gauge once answered sees the job done.
        metrics.running.dec();
        job.answer(result, metrics);
    }
}
