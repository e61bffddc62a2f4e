//! The idle refresh. A keystroke's job starts from its client's kept cache and realigns it
//! across the edit, recomputing only around the change; the positions it keeps attended to the
//! old text, so the cache drifts, and after `Realign::refresh_after` realigning passes in a row
//! a job pays an exact stored full pass instead (on the default preset's shape at 1k tokens,
//! ~170 ms against ~18 ms: a keystroke in nine waits for it). When no job for the model comes for
//! the loop's `idle_refresh` (a pause in typing), the loop recomputes the newest of the recent
//! kept caches a realigning pass left approximate, exactly over the tokens it holds
//! ([`Engine::refresh`]): the next keystroke then realigns from an exact cache, and the forced
//! exact pass moves off the keystrokes into the pauses.
//!
//! A job that arrives meanwhile stops the refresh at the next half layer (the wait it costs is
//! at most half a layer's share of a full pass: ~15 ms on the default preset's shape at 1k
//! tokens) and finds the cache as it was; the refresh is tried
//! again at the next pause. Counted in `redraft_idle_refreshes_total` by outcome.
//!
//! A job run ahead of any request (the language server's next edit, precomputed in the same
//! pause, `Submit::wanted`) does not: it waits for a refresh that is due, and comes right after
//! it, unless a request comes to wait for it. Otherwise, in a short pause (half a second), the
//! precompute takes the pause and the next keystroke pays the exact pass after all. Once it
//! runs, the serial loop makes it give way to any request that comes (`serial`).

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use redraft_engine::Engine;

use super::kept::KeptCaches;
use super::queue::Waited;
use super::{Job, Queue};

/// How long the model's loop waits with nothing to do before it refreshes a kept cache, unless
/// a door says otherwise: longer than the gaps between keystrokes within a word at a brisk
/// typing pace, shorter than a pause, and than the language server's next-edit debounce
/// (300 ms), so that in a short pause the refresh has begun when the precompute comes.
pub const DEFAULT_IDLE_REFRESH: Duration = Duration::from_millis(200);

/// The next job for the model ([`Queue::next`]), refreshing a recent kept cache whenever none
/// comes for `idle` and one needs it ([`KeptCaches::refresh_recent`]). `None` when the loop should end.
pub fn next_job(
    engine: &Engine,
    queue: &Queue,
    kept: &mut KeptCaches,
    idle: Option<Duration>,
) -> Option<Job> {
    loop {
        let Some(idle) = idle.filter(|_| kept.needs_refresh()) else {
            return queue.next();
        };
        match queue.next_within(idle) {
            Waited::Job(job) => return Some(*job),
            Waited::Ended => return None,
            Waited::Idle => {
                refresh(engine, queue, kept);
                // One refresh goes before the jobs nobody waits for yet; they come next.
                if let Some(job) = queue.try_next_if(|_| true) {
                    return Some(job);
                }
            }
        }
    }
}

/// Refreshes a recent kept cache, stopping when the model has other work.
fn refresh(engine: &Engine, queue: &Queue, kept: &mut KeptCaches) {
    let metrics = queue.metrics();
    let stop = || queue.model_work_waiting();
    // A bug in a refresh must not stop the server: the cache it was refreshing is dropped.
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        kept.refresh_recent(|cache| engine.refresh(cache, &stop), metrics)
    }));
    let outcome = match outcome {
        Ok(None) => return,
        Ok(Some(Ok(true))) => "done",
        Ok(Some(Ok(false))) => "stopped",
        Ok(Some(Err(err))) => {
            crate::stderr_line(format_args!(
                "redraft: refreshing a kept cache failed (dropped it): {err:#}"
            ));
            "failed"
        }
        Err(_) => {
            crate::stderr_line(format_args!(
                "redraft: refreshing a kept cache panicked (dropped it)"
            ));
            "failed"
        }
    };
    metrics.idle_refresh(outcome);
}
