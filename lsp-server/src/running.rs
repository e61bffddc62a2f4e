//! The jobs running for requests on a document's own text, by where they were asked: a client
//! that shows both inline suggestions and a completion menu, given `completionItems: true`
//! (Neovim's plugin beside nvim-cmp or blink.cmp), sends both requests at each keystroke, at the
//! same place, the menu's at once and the inline one after its debounce. The one that comes second waits for
//! the first one's job and answers as it does (its suggestions, none, or nothing where the job
//! failed) instead of running the model again; it runs its own job where that brought nothing
//! it can use (the first one was cancelled, computed fewer candidates than it asks for, or ran
//! under a model or settings since changed).
//!
//! Requests of one kind need none of this: a newer one cancels the older (`cancel.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use super::cancel::CancelToken;
use super::document_key::DocumentKey;
use super::type_through::Generation;

/// Where a request asks: the document's text (its `edited_at`, which names it exactly) and the
/// cursor in it, a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub edited_at: u64,
    pub cursor: usize,
}

struct Entry {
    id: u64,
    place: Place,
    candidates: usize,
    /// The request's token: a cancelled request's job brings nothing to share.
    token: CancelToken,
    /// The job's answer once it has one; the sender dropped when the job ends, which wakes
    /// those waiting.
    ended: watch::Receiver<Option<Answer>>,
}

/// A job's suggestions, best first (`None`: it failed, and its request answered nothing), and
/// the [`Generation`] of the type-through cache its request took before it started (what it ran
/// under).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub texts: Option<Vec<String>>,
    pub generation: Generation,
}

/// The jobs running per document (see the module documentation).
#[derive(Default)]
pub struct Running {
    jobs: Mutex<HashMap<DocumentKey, Vec<Entry>>>,
    next_id: Mutex<u64>,
}

/// A job's registration: dropping it (the job answered, failed or was cancelled) forgets it and
/// wakes the requests waiting on it.
pub struct Registered {
    key: DocumentKey,
    id: u64,
    running: Arc<Running>,
    answer: watch::Sender<Option<Answer>>,
}

impl Registered {
    /// The job answered or failed: those waiting get `answer` once it ends.
    pub fn answered(&self, answer: Answer) {
        self.answer.send_replace(Some(answer));
    }
}

/// What a request does about the job running at its place: see [`Running::turn`].
pub enum Turn {
    /// Wait for the job running there.
    Wait(Ending),
    /// Run its own, registered.
    Run(Registered),
}

/// A running job another request waits on.
pub struct Ending(watch::Receiver<Option<Answer>>);

impl Ending {
    /// The job's answer once it has ended; `None` where it ended without one (cancelled).
    pub async fn ended(mut self) -> Option<Answer> {
        // The job's end is the sender's drop.
        while self.0.changed().await.is_ok() {}
        self.0.borrow().clone()
    }
}

impl Running {
    /// For a request at `place` asking for `candidates` suggestions: wait for a job running
    /// there for a request not cancelled, computing at least as many, or, where none is, run its
    /// own, registered under the same lock (a request coming meanwhile waits for it).
    pub fn turn(
        self: &Arc<Self>,
        key: &DocumentKey,
        place: Place,
        candidates: usize,
        token: &CancelToken,
    ) -> Turn {
        let mut jobs = lock(&self.jobs);
        match Running::find(&jobs, key, place, candidates) {
            Some(ending) => Turn::Wait(ending),
            None => Turn::Run(self.register_in(&mut jobs, key, place, candidates, token)),
        }
    }

    /// Registers the job of a request asking at `place` for `candidates` suggestions, until the
    /// returned registration is dropped.
    fn register_in(
        self: &Arc<Self>,
        jobs: &mut HashMap<DocumentKey, Vec<Entry>>,
        key: &DocumentKey,
        place: Place,
        candidates: usize,
        token: &CancelToken,
    ) -> Registered {
        let id = {
            let mut next = lock(&self.next_id);
            *next += 1;
            *next
        };
        let (answer, ended) = watch::channel(None);
        jobs.entry(key.clone()).or_default().push(Entry {
            id,
            place,
            candidates,
            token: token.clone(),
            ended,
        });
        Registered {
            key: key.clone(),
            id,
            running: self.clone(),
            answer,
        }
    }

    /// A job still running at `place` that computes at least `candidates` suggestions for a
    /// request not cancelled, if there is one.
    #[cfg(test)]
    fn at(&self, key: &DocumentKey, place: Place, candidates: usize) -> Option<Ending> {
        Running::find(&lock(&self.jobs), key, place, candidates)
    }

    fn find(
        jobs: &HashMap<DocumentKey, Vec<Entry>>,
        key: &DocumentKey,
        place: Place,
        candidates: usize,
    ) -> Option<Ending> {
        jobs.get(key)?
            .iter()
            .find(|entry| {
                entry.place == place
                    && entry.candidates >= candidates
                    && !entry.token.is_cancelled()
            })
            .map(|entry| Ending(entry.ended.clone()))
    }

    /// Jobs registered (for tests of the bookkeeping).
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.jobs).values().map(Vec::len).sum()
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut jobs = lock(&self.running.jobs);
        if let Some(entries) = jobs.get_mut(&self.key) {
            entries.retain(|entry| entry.id != self.id);
            if entries.is_empty() {
                jobs.remove(&self.key);
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update leaves the map whole, so a panic elsewhere under the lock changes nothing.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::type_through::TypeThrough;
    use super::*;

    fn key() -> DocumentKey {
        DocumentKey::parse("file:///t/a.rs")
    }

    /// The registration of a job at [`HERE`], where none runs yet.
    fn runs(running: &Arc<Running>, candidates: usize, token: &CancelToken) -> Registered {
        match running.turn(&key(), HERE, candidates, token) {
            Turn::Run(registered) => registered,
            Turn::Wait(_) => panic!("a job runs there already"),
        }
    }

    const HERE: Place = Place {
        edited_at: 7,
        cursor: 12,
    };

    #[tokio::test]
    async fn a_request_at_the_same_place_waits_for_the_job_running_there_until_it_ends() {
        let running = Arc::new(Running::default());
        let token = CancelToken::default();
        let job = runs(&running, 3, &token);
        let ending = running
            .at(&key(), HERE, 1)
            .expect("the job at the same place");
        let waiting = tokio::spawn(ending.ended());
        let answer = Answer {
            texts: Some(vec!["a();".into(), "b();".into()]),
            generation: TypeThrough::default().generation(),
        };
        job.answered(answer.clone());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "the job has answered, not ended");
        drop(job);
        let got = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when the job ended")
            .unwrap();
        assert_eq!(got, Some(answer));
        assert_eq!(running.len(), 0);
        assert!(running.at(&key(), HERE, 1).is_none());
    }

    #[test]
    fn only_a_job_at_the_same_text_and_cursor_with_enough_candidates_and_not_cancelled_is_shared() {
        let running = Arc::new(Running::default());
        let token = CancelToken::default();
        let _job = runs(&running, 1, &token);
        let later_text = Place {
            edited_at: 8,
            ..HERE
        };
        let elsewhere = Place { cursor: 13, ..HERE };
        assert!(running.at(&key(), later_text, 1).is_none());
        assert!(running.at(&key(), elsewhere, 1).is_none());
        assert!(running
            .at(&DocumentKey::parse("file:///t/b.rs"), HERE, 1)
            .is_none());
        assert!(running.at(&key(), HERE, 3).is_none(), "it computes one");
        assert!(running.at(&key(), HERE, 1).is_some());
        token.cancel();
        assert!(running.at(&key(), HERE, 1).is_none(), "cancelled");
    }

    #[test]
    fn the_first_request_at_a_place_runs_and_the_next_waits_for_it() {
        let running = Arc::new(Running::default());
        let token = CancelToken::default();
        let Turn::Run(first) = running.turn(&key(), HERE, 1, &token) else {
            panic!("nothing runs there yet");
        };
        assert!(matches!(
            running.turn(&key(), HERE, 1, &CancelToken::default()),
            Turn::Wait(_)
        ));
        // Asking for more candidates than it computes: runs its own beside it.
        let Turn::Run(second) = running.turn(&key(), HERE, 3, &CancelToken::default()) else {
            panic!("the running job computes one");
        };
        assert_eq!(running.len(), 2);
        drop((first, second));
        assert_eq!(running.len(), 0);
    }

    #[tokio::test]
    async fn a_job_that_ended_before_it_was_waited_on_is_no_wait() {
        let running = Arc::new(Running::default());
        let token = CancelToken::default();
        let job = runs(&running, 1, &token);
        let ending = running.at(&key(), HERE, 1).unwrap();
        drop(job);
        let got = tokio::time::timeout(Duration::from_secs(5), ending.ended())
            .await
            .expect("no wait");
        assert_eq!(got, None, "it ended without an answer");
    }
}
