//! Cancellation of inline completion requests, from three sources: `$/cancelRequest` (tower-lsp
//! drops the handler's future, and the [`Ticket`]'s drop raises the flag), a newer request on
//! the same document, and an edit of that document. The flag is the one the sampler checks
//! between denoising steps (each job's cancel flag in the runtime); the notifier lets a waiting
//! handler answer at once, even while the model is still busy with something else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::document_key::DocumentKey;

/// One request's cancel flag.
#[derive(Clone, Default)]
pub struct CancelToken {
    flag: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl CancelToken {
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
        // `notify_one` keeps a permit when nobody waits yet, so a later `cancelled()` returns.
        self.notify.notify_one();
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// The flag the sampler polls.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// Resolves once the request is cancelled.
    pub async fn cancelled(&self) {
        while !self.is_cancelled() {
            self.notify.notified().await;
        }
    }

    fn same(&self, other: &CancelToken) -> bool {
        Arc::ptr_eq(&self.flag, &other.flag)
    }
}

/// The newest inline request per document.
#[derive(Default)]
pub struct InFlight {
    newest: Mutex<HashMap<DocumentKey, CancelToken>>,
}

impl InFlight {
    /// Registers a new request on the document `key`, cancelling the one before it. Call this
    /// before the handler's first `.await`, so requests are ordered as they arrived.
    pub fn begin(self: &Arc<Self>, key: &DocumentKey) -> Ticket {
        let token = CancelToken::default();
        let older = self.lock().insert(key.clone(), token.clone());
        if let Some(older) = older {
            older.cancel();
        }
        Ticket {
            key: key.clone(),
            token,
            in_flight: self.clone(),
        }
    }

    /// An edit makes any running request on the document `key` stale.
    pub fn edited(&self, key: &DocumentKey) {
        if let Some(token) = self.lock().remove(key) {
            token.cancel();
        }
    }

    /// Requests not yet finished (for tests of the bookkeeping).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<DocumentKey, CancelToken>> {
        // A panic elsewhere while holding this lock leaves a map that is still consistent.
        self.newest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A request's hold on its token: dropping it (the request finished, or tower-lsp dropped the
/// handler on `$/cancelRequest`) stops any work still running for it and forgets it.
pub struct Ticket {
    key: DocumentKey,
    token: CancelToken,
    in_flight: Arc<InFlight>,
}

impl Ticket {
    pub fn token(&self) -> &CancelToken {
        &self.token
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.token.cancel();
        let mut newest = self.in_flight.lock();
        if newest.get(&self.key).is_some_and(|t| t.same(&self.token)) {
            newest.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> DocumentKey {
        DocumentKey::parse(&format!("file:///t/{name}"))
    }

    #[test]
    fn newer_requests_and_edits_cancel_and_drops_forget() {
        let in_flight = Arc::new(InFlight::default());
        let first = in_flight.begin(&key("a"));
        let other = in_flight.begin(&key("b"));
        let second = in_flight.begin(&key("a"));
        assert!(
            first.token().is_cancelled(),
            "a newer request on a cancels the older"
        );
        assert!(!second.token().is_cancelled() && !other.token().is_cancelled());
        drop(first);
        assert_eq!(
            in_flight.len(),
            2,
            "dropping a superseded ticket leaves the newer one"
        );
        in_flight.edited(&key("a"));
        assert!(second.token().is_cancelled());
        let flag = other.token().flag();
        drop(other);
        assert!(
            flag.load(Ordering::Relaxed),
            "a dropped request stops its work"
        );
        drop(second);
        assert_eq!(in_flight.len(), 0);
    }

    #[tokio::test]
    async fn cancelled_resolves_whether_cancel_came_before_or_after() {
        let token = CancelToken::default();
        token.cancel();
        token.cancelled().await;
        let token = CancelToken::default();
        let waiter = tokio::spawn({
            let token = token.clone();
            async move { token.cancelled().await }
        });
        tokio::task::yield_now().await;
        token.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }
}
