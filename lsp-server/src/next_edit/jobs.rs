//! The next-edit jobs: at most one per document, started by a request, by an edit pause
//! (`nextEdit.debounceMs`) or by an accepted suggestion, and kept until the document changes.
//! A request for the text, history and cursor a job was started for waits on that job, or takes
//! its result if it is done, instead of starting another; a job for other text, another cursor
//! or an older history (another document was edited or closed since: the model would see other
//! recent edits) replaces it (the older one is cancelled through the same [`InFlight`]
//! bookkeeping inline completions use). No job starts on a snapshot the document changed (or
//! closed) after: its answer could only be thrown away.
//!
//! Cancellation is the completions': an edit of the document cancels its job at the sampler's
//! next step, and so does `$/cancelRequest` of the request that started it, once nobody else
//! waits on it. A precomputed job nobody waits on is not cancelled by requests for other
//! documents: the runtime runs it behind every job someone waits for, and one that is running
//! when such a job comes makes way for it and runs again after it (`Submit::wanted`), so it is
//! ready when the user comes back to its document. A request that joined it and went away
//! leaves it making way again. Once the history moves on (an edit of another document: see
//! [`Snapshots::history_generation`]), no request can join a job computed with the older one:
//! those nobody waits for are stopped, or forgotten if done, when the document owner reports
//! the change and before any job starts, so they neither hold one of the places below nor run
//! ahead of a live precompute in the runtime's queue.
//!
//! A precompute gives way to a request's job for the document (the request may have asked at
//! another cursor than where the last change ended, inside an auto-closed bracket or after a
//! click: its cursor is the better guess of where the user is). While that job runs the
//! precompute never replaces it, and it is tried again once the job ends, if the document is
//! still the text it was for: a request that went away, or a job that failed, leaves the
//! pause's suggestion to compute; a job that answered this text and history keeps its answer
//! for a request there again, and the precompute is not needed. At most [`MAX_PRECOMPUTES`] run
//! ahead of any request at once, a new one stopping the oldest: the runtime's queue, which
//! completions share, never fills with them (a full queue answers its cancelled jobs at once to
//! make room). A job that ended in an error is never joined; the next request computes again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use redraft_context::edit::HistoryEdit;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tower_lsp_server::ls_types::Uri;

use crate::cancel::{InFlight, Ticket};
use crate::config::Settings;
use crate::document::Offer;
use crate::document_key::DocumentKey;
use crate::documents::{Changed, Documents, Snapshots};
use crate::inference::{EditJob, EditRunner, JobError, NextEdit};
use crate::log::Log;
use crate::stream::JobStream;
use crate::workspace::Workspace;

/// Precomputed jobs nobody waits for yet, at most (across documents): a new one stops the
/// oldest, so the document the user paused in last always gets one, and a change of many
/// documents at once (a workspace-wide replace) keeps a few running, not one for each in the
/// runtime's queue of 64; the others are computed on request.
const MAX_PRECOMPUTES: usize = 4;

/// Who started a job: a request waits on it; a precomputed one waits for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Request,
    Precompute,
}

/// A job's answer, which every request for the same text and cursor shares.
pub type Answer = Shared<BoxFuture<'static, Result<Arc<NextEdit>, JobError>>>;

/// Why [`NextEdits::job`] started no job and joined none.
pub enum NotStarted {
    /// The document changed or closed after the snapshot was taken: a job would compute on
    /// text the client no longer has.
    Stale,
    /// A precompute gives way to a request's job for the document: one still running (`Some`:
    /// its answer, after which the precompute may be tried again), or one that answered this
    /// text and history (`None`).
    GivesWay(Option<Answer>),
}

struct Entry {
    /// The document as the snapshot the job was started on names it (for the log).
    uri: Uri,
    /// Tells this entry from a later one for the same document.
    key: u64,
    edited_at: u64,
    /// The snapshot's [`Snapshots::history_generation`]: the history the model was shown.
    history: u64,
    cursor: usize,
    origin: Origin,
    /// Requests awaiting the answer now.
    waiters: usize,
    /// Raised when the first request comes to wait (a precomputed job's, in the runtime's
    /// queue: until then it lets the idle refresh go first).
    wanted: Arc<AtomicBool>,
    answer: Answer,
    /// Dropping the entry cancels the job if it is still running.
    _ticket: Ticket,
}

impl Entry {
    fn done(&self) -> bool {
        self.answer.peek().is_some()
    }

    fn failed(&self) -> bool {
        matches!(self.answer.peek(), Some(Err(_)))
    }

    /// A precomputed job still under way that no request waits for.
    fn ahead(&self) -> bool {
        self.origin == Origin::Precompute && self.waiters == 0 && !self.done()
    }
}

#[derive(Default)]
struct State {
    jobs: HashMap<DocumentKey, Entry>,
    /// The stamp of each open document's last edit (or open): an answer computed before it
    /// moved is stale. Stamps come from one counter for all documents, and a document's goes
    /// with its close, so a stamp read before a close and an open of the document never
    /// matches again, and only open documents have one.
    stamps: HashMap<DocumentKey, u64>,
    last_stamp: u64,
    next_key: u64,
    /// The id of the next edit last offered per document, and the document as the request
    /// answered with it named it.
    offers: HashMap<DocumentKey, (u64, Uri)>,
    /// Where an inline completion is showing: the document's text (`edited_at`) and line.
    inline_shown: HashMap<DocumentKey, (u64, usize)>,
}

impl State {
    fn next_stamp(&mut self) -> u64 {
        self.last_stamp += 1;
        self.last_stamp
    }

    /// Takes out the jobs (of documents other than `except`) that no request can join any
    /// more: computed with a history older than `generation` (which never moves back) and
    /// waited for by nobody, a precompute still under way or an answer.
    fn take_older_histories(
        &mut self,
        generation: u64,
        except: Option<&DocumentKey>,
    ) -> Vec<Entry> {
        let stale: Vec<DocumentKey> = self
            .jobs
            .iter()
            .filter(|(key, entry)| {
                Some(*key) != except && entry.history < generation && entry.waiters == 0
            })
            .map(|(key, _)| key.clone())
            .collect();
        stale
            .iter()
            .filter_map(|key| self.jobs.remove(key))
            .collect()
    }
}

/// The next-edit bookkeeping the server shares with its precompute task.
pub struct NextEdits {
    documents: Documents,
    runner: Arc<dyn EditRunner>,
    log: Log,
    settings: Arc<Mutex<Settings>>,
    in_flight: Arc<InFlight>,
    /// Documents under a workspace folder are named relative to it in the history.
    workspace: Workspace,
    state: Mutex<State>,
}

/// Poisoning only says another handler panicked; the state is replaced whole, never left
/// half-written.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl NextEdits {
    pub fn new(
        documents: Documents,
        runner: Arc<dyn EditRunner>,
        log: Log,
        settings: Arc<Mutex<Settings>>,
        workspace: Workspace,
    ) -> Arc<NextEdits> {
        Arc::new(NextEdits {
            documents,
            runner,
            log,
            settings,
            in_flight: Arc::default(),
            workspace,
            state: Mutex::default(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// How `uri` is named in the history: relative to the workspace folder holding it (as
    /// `git diff` and the training data name files), else its path, else the URI.
    pub fn path(&self, uri: &Uri) -> String {
        self.workspace.name(uri)
    }

    /// The stamp of the document `key`'s last edit (0: not open); take it before the snapshot
    /// and compare after the answer.
    pub fn stamp(&self, key: &DocumentKey) -> u64 {
        self.state().stamps.get(key).copied().unwrap_or(0)
    }

    /// The document `key` changed: its job is stale (cancelled at its next step) and so is
    /// every answer on the way.
    pub fn edited(&self, key: &DocumentKey) {
        let gone = {
            let mut state = self.state();
            let stamp = state.next_stamp();
            // A change of a document that is not open is ignored by the document owner.
            if let Some(at) = state.stamps.get_mut(key) {
                *at = stamp;
            }
            state.jobs.remove(key)
        };
        // Dropped outside the lock: the ticket's drop takes the in-flight lock.
        drop(gone);
    }

    /// The document `key` opened (after [`closed`](Self::closed): an open over an open
    /// document is a close and an open).
    pub fn opened(&self, key: &DocumentKey) {
        let mut state = self.state();
        let stamp = state.next_stamp();
        state.stamps.insert(key.clone(), stamp);
    }

    /// The document `key` closed: what is on its way for it is stale, and its bookkeeping goes.
    pub fn closed(&self, key: &DocumentKey) {
        let gone = {
            let mut state = self.state();
            state.stamps.remove(key);
            state.offers.remove(key);
            state.inline_shown.remove(key);
            state.jobs.remove(key)
        };
        drop(gone);
    }

    /// The document owner applied a change, after which the history is at `generation`: the
    /// jobs computed with an older one that nobody waits for are stopped or forgotten.
    pub fn history_is(&self, generation: u64) {
        let gone = self.state().take_older_histories(generation, None);
        self.older_histories_gone(gone);
    }

    fn older_histories_gone(&self, gone: Vec<Entry>) {
        for entry in &gone {
            self.log.debug(|| {
                format!(
                    "{}: its {} next edit was computed with an older history (another document changed since): {}",
                    entry.uri.as_str(),
                    if entry.done() { "finished" } else { "precomputed" },
                    if entry.done() { "forgotten" } else { "stopped" },
                )
            });
        }
        // Dropped outside the lock (see `edited`).
        drop(gone);
    }

    /// Forgets every job and result (the settings or the model changed).
    pub fn clear(&self) {
        let gone = std::mem::take(&mut self.state().jobs);
        drop(gone);
    }

    /// An inline completion was answered on `line` of the text at `edited_at`; `shown`: with
    /// something to show.
    pub fn inline_answered(&self, key: &DocumentKey, edited_at: u64, line: usize, shown: bool) {
        let mut state = self.state();
        if shown {
            state.inline_shown.insert(key.clone(), (edited_at, line));
        } else {
            state.inline_shown.remove(key);
        }
    }

    /// The line of the document `key` an inline completion is showing on, for the text at
    /// `edited_at`.
    pub fn inline_line(&self, key: &DocumentKey, edited_at: u64) -> Option<usize> {
        self.state()
            .inline_shown
            .get(key)
            .filter(|(at, _)| *at == edited_at)
            .map(|(_, line)| *line)
    }

    /// Remembers that `text` in place of `range` of the text at `edited_at` was offered, for
    /// the document `key` the request named `uri`; the document owner marks the change that
    /// applies it as accepted. Returns the offer's id.
    pub fn offer(
        &self,
        key: &DocumentKey,
        uri: &Uri,
        edited_at: u64,
        range: std::ops::Range<usize>,
        text: String,
    ) -> u64 {
        let id = {
            let mut state = self.state();
            state.next_key += 1;
            let id = state.next_key;
            state.offers.insert(key.clone(), (id, uri.clone()));
            id
        };
        self.documents.offer(
            key.clone(),
            Offer {
                id,
                edited_at,
                range,
                text,
            },
        );
        id
    }

    /// The document whose offer `id` was, if it is still the latest offered there, and its
    /// URI as the request answered with it spelled it.
    pub fn offered(&self, id: u64) -> Option<(DocumentKey, Uri)> {
        self.state()
            .offers
            .iter()
            .find(|(_, (offered, _))| *offered == id)
            .map(|(key, (_, uri))| (key.clone(), uri.clone()))
    }

    /// The job for `snapshots` at byte `cursor`: the one already under way or done (not in an
    /// error) for the same text, history and cursor, else a new one (replacing any other job of
    /// the document, and stopping those of other documents no request can join any more).
    /// `edits_before` is [`stamp`](Self::stamp) taken before the snapshot was asked for: if the
    /// document changed since, nothing starts. A request gets a [`Waiter`] to hold while it
    /// waits; `stream` only serves a new job. A precompute starts nothing where it gives way to
    /// a request's job (see the module comment).
    pub fn job(
        self: &Arc<Self>,
        snapshots: Snapshots,
        edits_before: u64,
        cursor: usize,
        origin: Origin,
        stream: Option<JobStream>,
    ) -> Result<(Answer, Option<Waiter>), NotStarted> {
        let document = DocumentKey::of(&snapshots.document.uri);
        let uri = snapshots.document.uri.clone();
        let version = snapshots.document.version;
        let edited_at = snapshots.document.edited_at;
        let history_generation = snapshots.history_generation;
        let mut state = self.state();
        // Under the lock `edited` takes: a change after this check removes the entry made
        // below, which cancels its job.
        if state.stamps.get(&document).copied().unwrap_or(0) != edits_before {
            self.log.debug(|| {
                format!(
                    "{} v{version}: changed while its snapshot was taken: no next-edit job started",
                    uri.as_str()
                )
            });
            return Err(NotStarted::Stale);
        }
        let key = match state.jobs.get_mut(&document) {
            Some(entry)
                if entry.edited_at == edited_at
                    && entry.history == history_generation
                    && entry.cursor == cursor
                    && !entry.failed() =>
            {
                if origin == Origin::Request {
                    entry.waiters += 1;
                    entry.wanted.store(true, Ordering::Relaxed);
                }
                self.log.debug(|| {
                    format!(
                        "{} v{version}: {} joins the {} next-edit job",
                        uri.as_str(),
                        match origin {
                            Origin::Request => "the request",
                            Origin::Precompute => "precomputing",
                        },
                        if entry.done() { "finished" } else { "running" }
                    )
                });
                let waiter = (origin == Origin::Request).then(|| self.waiter(&document, entry.key));
                return Ok((entry.answer.clone(), waiter));
            }
            // Replacing the job a request waits for would cancel it.
            Some(entry) if origin == Origin::Precompute && entry.waiters > 0 && !entry.done() => {
                self.log.debug(|| {
                    format!(
                        "{} v{version}: a request waits for the next-edit job: not precomputed until it ends",
                        uri.as_str()
                    )
                });
                return Err(NotStarted::GivesWay(Some(entry.answer.clone())));
            }
            // A request asked for this text and history elsewhere than where the last change
            // ended, and was answered: the user is there, and a request there again joins it.
            Some(entry)
                if origin == Origin::Precompute
                    && entry.origin == Origin::Request
                    && entry.edited_at == edited_at
                    && entry.history == history_generation
                    && entry.done()
                    && !entry.failed() =>
            {
                self.log.debug(|| {
                    format!(
                        "{} v{version}: a request's next edit for this text is kept: not precomputed",
                        uri.as_str()
                    )
                });
                return Err(NotStarted::GivesWay(None));
            }
            _ => {
                state.next_key += 1;
                state.next_key
            }
        };
        // Jobs of other documents for an older history: no request can join them (usually gone
        // already, when the owner reported the change that moved the history).
        let older = state.take_older_histories(history_generation, Some(&document));
        // The newest pause wins a place: the oldest precompute of another document nobody
        // waits for is stopped (that document's next edit is computed on request).
        let mut evicted = None;
        if origin == Origin::Precompute {
            let ahead: Vec<(&DocumentKey, u64)> = state
                .jobs
                .iter()
                .filter(|(other, entry)| **other != document && entry.ahead())
                .map(|(other, entry)| (other, entry.key))
                .collect();
            if ahead.len() >= MAX_PRECOMPUTES {
                let oldest = ahead
                    .iter()
                    .min_by_key(|(_, key)| *key)
                    .map(|(other, _)| (*other).clone());
                evicted = oldest.and_then(|oldest| state.jobs.remove(&oldest));
                if let Some(evicted) = &evicted {
                    self.log.debug(|| {
                        format!(
                            "{}: its precomputed next edit stopped for {} v{version}'s ({} at most)",
                            evicted.uri.as_str(),
                            uri.as_str(),
                            MAX_PRECOMPUTES
                        )
                    });
                }
            }
        }
        let ticket = self.in_flight.begin(&document);
        let history: Vec<HistoryEdit> = snapshots
            .history
            .iter()
            .map(|(uri, group)| group.to_history(&self.path(uri)))
            .collect();
        let settings = lock(&self.settings).clone();
        let wanted = Arc::new(AtomicBool::new(origin == Origin::Request));
        let reply = self.runner.submit_edit(EditJob {
            path: self.path(&uri),
            notebook: snapshots.notebook,
            document: snapshots.document,
            cursor,
            history,
            settings,
            cancel: ticket.token().flag(),
            stream,
            wanted: (origin == Origin::Precompute).then(|| Arc::clone(&wanted)),
        });
        let answer: Answer = reply.map(|answer| answer.map(Arc::new)).boxed().shared();
        let replaced = state.jobs.insert(
            document.clone(),
            Entry {
                uri,
                key,
                edited_at,
                history: history_generation,
                cursor,
                origin,
                waiters: usize::from(origin == Origin::Request),
                wanted,
                answer: answer.clone(),
                _ticket: ticket,
            },
        );
        drop(state);
        drop(replaced);
        drop(evicted);
        self.older_histories_gone(older);
        let waiter = (origin == Origin::Request).then(|| self.waiter(&document, key));
        Ok((answer, waiter))
    }

    fn waiter(self: &Arc<Self>, document: &DocumentKey, key: u64) -> Waiter {
        Waiter {
            edits: self.clone(),
            document: document.clone(),
            key,
        }
    }

    /// Computes the next edit of the document `key` ahead of a request, at the end of its last
    /// change.
    pub async fn precompute(self: &Arc<Self>, key: DocumentKey, why: &str) {
        let settings = lock(&self.settings).clone();
        if !settings.next_edit.enabled {
            return;
        }
        let edits_before = self.stamp(&key);
        let Ok(Some(snapshots)) = self.documents.snapshot(key.clone(), true).await else {
            return;
        };
        let document = &snapshots.document;
        let uri = document.uri.clone();
        let Some(cursor) = document.last_edit_end else {
            return;
        };
        if !settings.enabled_for(&document.language_id) {
            return;
        }
        let version = document.version;
        if !document.in_sync() {
            self.log.debug(|| {
                format!(
                    "{} v{version}: out of sync with the client: not precomputed",
                    uri.as_str()
                )
            });
            return;
        }
        let answer = match self.job(snapshots, edits_before, cursor, Origin::Precompute, None) {
            Ok((answer, _)) => answer,
            Err(NotStarted::Stale | NotStarted::GivesWay(None)) => return,
            Err(NotStarted::GivesWay(Some(running))) => {
                self.retry_after(key, uri, edits_before, running);
                return;
            }
        };
        self.log
            .debug(|| format!("{} v{version}: next edit precomputed ({why})", uri.as_str()));
        // Driven to the end here, so a request finds it done.
        let log = self.log.clone();
        tokio::spawn(async move {
            match answer.await {
                Ok(next) => log.debug(|| {
                    format!(
                        "{} v{version}: precomputed next edit ready, {} edit(s)",
                        uri.as_str(),
                        next.edits.len()
                    )
                }),
                Err(err) => log.debug(|| {
                    format!(
                        "{} v{version}: precomputed next edit failed: {err}",
                        uri.as_str()
                    )
                }),
            }
        });
    }

    /// Precomputes the document `key` (named `uri` in the log) again once `running`, the
    /// request's job it gave way to, has ended, if the document has not changed since `edits`
    /// (the change's own pause precomputes for the new text, and a retry must never compute on
    /// text the user has left). Whether the job's answer makes it unneeded is `job`'s to say, as
    /// for any precompute. Like any precompute it makes way for requests' jobs in the runtime,
    /// so it never holds a request up.
    fn retry_after(self: &Arc<Self>, key: DocumentKey, uri: Uri, edits: u64, running: Answer) {
        let next_edits = self.clone();
        tokio::spawn(async move {
            let _ = running.await;
            if next_edits.stamp(&key) != edits {
                next_edits.log.debug(|| {
                    format!(
                        "{}: edited while the request's next-edit job ran: not precomputed again",
                        uri.as_str()
                    )
                });
                return;
            }
            // Boxed: this task is part of `precompute`'s own future.
            next_edits
                .precompute(key, "after the request it gave way to")
                .boxed()
                .await;
        });
    }

    /// Precomputes next edits as the document owner reports changes: after `debounceMs`
    /// without another change of the same document, or at once after an accepted suggestion.
    /// Each report also stops the jobs its history made stale ([`history_is`](Self::history_is)).
    /// Runs until the owner is gone.
    pub async fn precompute_on_changes(self: Arc<Self>, mut changed: UnboundedReceiver<Changed>) {
        let mut due: HashMap<DocumentKey, (Instant, &'static str)> = HashMap::new();
        loop {
            let next = due.values().map(|(at, _)| *at).min();
            tokio::select! {
                change = changed.recv() => {
                    let Some(Changed { key, accepted, history_generation }) = change else {
                        return;
                    };
                    self.history_is(history_generation);
                    let settings = lock(&self.settings).next_edit.clone();
                    let now = Instant::now();
                    match (settings.enabled, accepted, settings.debounce_ms) {
                        (false, _, _) | (true, None, 0) => {
                            due.remove(&key);
                        }
                        (true, Some(_), _) => {
                            due.insert(key, (now, "after an accepted suggestion"));
                        }
                        (true, None, ms) => {
                            due.insert(key, (now + Duration::from_millis(ms), "after an edit pause"));
                        }
                    }
                }
                () = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                    let now = Instant::now();
                    let ready: Vec<(DocumentKey, &'static str)> = due
                        .iter()
                        .filter(|(_, (at, _))| *at <= now)
                        .map(|(key, (_, why))| (key.clone(), *why))
                        .collect();
                    for (key, why) in ready {
                        due.remove(&key);
                        let edits = self.clone();
                        tokio::spawn(async move { edits.precompute(key, why).await });
                    }
                }
            }
        }
    }
}

/// A request's hold on the job it waits for: when the last request lets go of a job a request
/// started before it is done (`$/cancelRequest` dropped the handler), the job stops, as an
/// inline completion's would; a precomputed one goes on, nobody waiting for it again (its
/// `wanted` flag down, so it makes way for requests as before one joined it).
pub struct Waiter {
    edits: Arc<NextEdits>,
    document: DocumentKey,
    key: u64,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let gone = {
            let mut state = self.edits.state();
            let Some(entry) = state
                .jobs
                .get_mut(&self.document)
                .filter(|e| e.key == self.key)
            else {
                return;
            };
            entry.waiters = entry.waiters.saturating_sub(1);
            if entry.waiters > 0 || entry.done() {
                None
            } else if entry.origin == Origin::Request {
                state.jobs.remove(&self.document)
            } else {
                entry.wanted.store(false, Ordering::Relaxed);
                None
            }
        };
        drop(gone);
    }
}

#[cfg(test)]
mod tests;
