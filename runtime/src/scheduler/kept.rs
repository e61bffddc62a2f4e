//! Caches a loop keeps between jobs, one per recent client, roughly: each job starts from the
//! kept cache most like its own (a client typing sends documents that differ by a few
//! characters, and the job's first pass realigns that cache across the edit), and leaves its
//! cache behind for the next. Both loops keep them the same way, so batching on or off is the
//! only difference between them.
//!
//! Which cache is most like a job's: when the door names the job's client ([`Key::client`]: the
//! language server names the document), the one that client's last job of the same kind left
//! (or a new one), so an edit anywhere in the document keeps it; otherwise (HTTP clients are
//! anonymous) the one whose last job's document shares the most text before the cursor with
//! the job's.
//!
//! The bound is memory (`--cache-memory`), not a count: a count small enough to matter drops
//! every cache when more clients type at once than it holds (each client's cache is the oldest
//! when its next request comes, so with least-recently-kept eviction none is ever found).

use redraft_engine::ContextCache;

use super::{Job, Work};
use crate::metrics::Metrics;

/// Kept caches at most, whatever their size: bounds the search a job makes through them.
pub const KEPT_CACHES: usize = 1024;

/// How many of the newest kept caches the idle refresh looks through for one to refresh.
pub const REFRESHED_AMONG: usize = 4;

/// The default of `--cache-memory`, in MiB.
pub const DEFAULT_MIB: usize = 1024;

/// What a job is matched on: its client and kind, when the door names the client, and its
/// document up to the cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key<'a> {
    pub client: Option<(&'a str, &'static str)>,
    pub text: &'a str,
}

impl Key<'_> {
    /// The key, owned (a batched lane keeps it until its cache is kept).
    pub fn to_buf(&self) -> KeyBuf {
        KeyBuf {
            client: self.client.map(|(client, kind)| (client.to_string(), kind)),
            text: self.text.to_string(),
        }
    }
}

/// A [`Key`], owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBuf {
    client: Option<(String, &'static str)>,
    text: String,
}

impl KeyBuf {
    pub fn key(&self) -> Key<'_> {
        Key {
            client: self
                .client
                .as_ref()
                .map(|(client, kind)| (client.as_str(), *kind)),
            text: &self.text,
        }
    }
}

/// `job`'s key.
pub fn key(job: &Job) -> Key<'_> {
    let (text, cursor) = match &job.work {
        Work::Fim(work) => (&work.text, work.cursor),
        Work::Edit(work) => (&work.document, work.cursor),
    };
    Key {
        client: job.client.as_deref().map(|c| (c, job.work.kind())),
        text: text.get(..cursor).unwrap_or(text),
    }
}

/// One kept cache and the key of the job that left it.
struct Kept {
    key: KeyBuf,
    cache: ContextCache,
}

/// The kept caches, oldest first, each with the key of the job that left it.
pub struct KeptCaches {
    kept: Vec<Kept>,
    /// Bytes of keys, values and the text they are matched on that may be kept...
    budget: usize,
    /// ...and that are: the kept caches' footprints summed.
    bytes: usize,
}

/// What one kept cache holds in memory: its keys and values, and what it is matched on.
fn footprint(kept: &Kept) -> usize {
    let key = kept.key.key();
    key.client.map_or(0, |(client, _)| client.len()) + key.text.len() + kept.cache.bytes()
}

impl KeptCaches {
    /// No caches yet; at most `budget` bytes of them kept (0: none is kept).
    pub fn new(budget: usize) -> KeptCaches {
        KeptCaches {
            kept: Vec::new(),
            budget,
            bytes: 0,
        }
    }

    /// The cache for a job matched on `key` (taken out), or a new one. With a client: the
    /// newest its client's jobs of the same kind left. Without: the one whose job shares the
    /// longest start with `key`'s text, unless none shares at least half of it: then the job is
    /// most likely another client's (or another place in the file), which would gain little
    /// from that cache and take it from the client whose next keystroke it serves.
    /// Counted in `metrics` as a kept or a cold start.
    pub fn take(&mut self, key: &Key<'_>, metrics: &Metrics) -> ContextCache {
        let best = match key.client {
            Some(client) => self
                .kept
                .iter()
                .rposition(|kept| kept.key.key().client == Some(client)),
            None => {
                let text = key.text;
                let shared = |kept: &str| {
                    kept.bytes()
                        .zip(text.bytes())
                        .take_while(|(a, b)| a == b)
                        .count()
                };
                (0..self.kept.len())
                    .filter(|&at| self.kept[at].key.client.is_none())
                    .map(|at| (shared(&self.kept[at].key.text), at))
                    .max()
                    .filter(|&(shared, _)| shared > 0 && 2 * shared >= text.len())
                    .map(|(_, at)| at)
            }
        };
        let taken = best.map(|at| {
            self.bytes -= footprint(&self.kept[at]);
            self.kept.remove(at).cache
        });
        metrics.cache_start(taken.is_some());
        self.report(metrics);
        taken.unwrap_or_default()
    }

    /// Drops the caches `client`'s jobs left.
    pub fn forget(&mut self, client: &str, metrics: &Metrics) {
        let before = self.kept.len();
        self.kept
            .retain(|kept| kept.key.key().client.is_none_or(|(c, _)| c != client));
        if self.kept.len() != before {
            self.bytes = self.kept.iter().map(footprint).sum();
            self.report(metrics);
        }
    }

    /// Keeps `cache` (left by the job matched on `key`) as the newest, then drops the oldest
    /// past [`KEPT_CACHES`] or the budget (the newest too, when it alone is over).
    pub fn keep(&mut self, key: &Key<'_>, cache: ContextCache, metrics: &Metrics) {
        if !cache.is_empty() {
            let kept = Kept {
                key: key.to_buf(),
                cache,
            };
            self.bytes += footprint(&kept);
            self.kept.push(kept);
            let mut over = 0;
            while self.kept.len() - over > KEPT_CACHES || self.bytes > self.budget {
                self.bytes -= footprint(&self.kept[over]);
                over += 1;
            }
            self.kept.drain(..over);
        }
        self.report(metrics);
    }

    /// The newest of the last [`REFRESHED_AMONG`] kept caches that a realigning pass left
    /// approximate: what the idle refresh makes exact again. (Not only the newest: a
    /// document's completions and its next edits keep a cache each, and a next edit computed
    /// in a pause leaves the newest, exact, in front of the completions' realigned one.)
    fn approximate(&self) -> Option<usize> {
        let recent = self.kept.len().saturating_sub(REFRESHED_AMONG);
        (recent..self.kept.len())
            .rev()
            .find(|&at| self.kept[at].cache.approximate_passes() > 0)
    }

    /// Whether a recent kept cache needs the idle refresh ([`KeptCaches::refresh_recent`]).
    pub fn needs_refresh(&self) -> bool {
        self.approximate().is_some()
    }

    /// Runs `refresh` on the newest recent kept cache a realigning pass left approximate, if
    /// any; `Err` from it drops that cache (a refresh that failed once would fail again every
    /// time the loop is idle). The cache keeps its place, and the byte count follows what it
    /// holds afterwards.
    pub fn refresh_recent<E>(
        &mut self,
        refresh: impl FnOnce(&mut ContextCache) -> Result<bool, E>,
        metrics: &Metrics,
    ) -> Option<Result<bool, E>> {
        let at = self.approximate()?;
        let mut kept = self.kept.remove(at);
        self.bytes -= footprint(&kept);
        let outcome = refresh(&mut kept.cache);
        if outcome.is_ok() {
            self.bytes += footprint(&kept);
            self.kept.insert(at, kept);
        }
        self.report(metrics);
        Some(outcome)
    }

    fn report(&self, metrics: &Metrics) {
        metrics.kept_caches.set(self.kept.len() as i64);
        metrics.kept_bytes.set(self.bytes as i64);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` caches with something in them: stored passes of the default model.
    fn caches(n: usize) -> Vec<ContextCache> {
        let engine = redraft_engine::Engine::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model"),
        )
        .unwrap();
        let request = redraft_engine::InfillRequest::new("fn main() {\n    ", "\n}\n");
        (0..n)
            .map(|_| {
                let mut cache = ContextCache::default();
                engine
                    .complete(&request, &mut cache, Default::default())
                    .unwrap();
                cache
            })
            .collect()
    }

    fn cache() -> ContextCache {
        caches(1).pop().unwrap()
    }

    /// The key of an anonymous client's job.
    fn text(text: &str) -> Key<'_> {
        Key { client: None, text }
    }

    #[test]
    fn a_job_takes_the_cache_of_the_job_sharing_the_most_text() {
        let metrics = Metrics::new();
        let mut kept = KeptCaches::new(DEFAULT_MIB << 20);
        let one = cache();
        let bytes = one.bytes();
        kept.keep(&text("fn a() { let x"), one, &metrics);
        kept.keep(&text("struct B"), cache(), &metrics);
        assert_eq!(kept.len(), 2);
        let taken = kept.take(&text("fn a() { let xy"), &metrics);
        assert_eq!(taken.bytes(), bytes);
        assert_eq!(kept.len(), 1);
        // Nothing in common, or less than half: a fresh cache, the kept one stays.
        assert!(kept.take(&text("use std::fmt;"), &metrics).is_empty());
        assert!(kept
            .take(&text("struct Bridge { x: u32 }"), &metrics)
            .is_empty());
        assert_eq!(kept.len(), 1);
        // An empty cache is not kept.
        kept.keep(&text("x"), ContextCache::default(), &metrics);
        assert_eq!(kept.len(), 1);
        let text = metrics.render();
        for line in [
            "redraft_cache_starts_total{start=\"kept\"} 1",
            "redraft_cache_starts_total{start=\"cold\"} 2",
            "redraft_kept_caches 1",
            &format!("redraft_kept_cache_bytes {}", bytes + "struct B".len()),
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    /// More clients than a count would hold each find their cache: only memory bounds them.
    #[test]
    fn every_client_within_the_budget_keeps_its_cache() {
        let metrics = Metrics::new();
        let mut kept = KeptCaches::new(DEFAULT_MIB << 20);
        let keys: Vec<String> = (0..48).map(|i| format!("client {i:02}")).collect();
        for (key, cache) in keys.iter().zip(caches(keys.len())) {
            kept.keep(&text(key), cache, &metrics);
        }
        for key in &keys {
            assert!(!kept.take(&text(key), &metrics).is_empty(), "{key}");
        }
    }

    #[test]
    fn the_oldest_go_past_the_budget() {
        let metrics = Metrics::new();
        let mut made = caches(6);
        let each = made[0].bytes() + "00 client".len();
        let mut kept = KeptCaches::new(3 * each);
        let keys: Vec<String> = (0..5).map(|i| format!("{i:02} client")).collect();
        for (key, cache) in keys.iter().zip(made.drain(..5)) {
            kept.keep(&text(key), cache, &metrics);
        }
        assert_eq!(kept.len(), 3);
        // The first two went; the third is there.
        for gone in &keys[..2] {
            assert!(kept.take(&text(gone), &metrics).is_empty(), "{gone}");
        }
        assert!(!kept.take(&text(&keys[2]), &metrics).is_empty());
        // No budget: nothing is kept.
        let mut none = KeptCaches::new(0);
        none.keep(&text("00 client"), made.pop().unwrap(), &metrics);
        assert_eq!(none.len(), 0);
    }

    /// A door that names its clients finds each one's cache whatever the edit (here one at the
    /// start of the text, which leaves less than half of it shared), per kind of job.
    #[test]
    fn a_named_client_takes_its_own_last_cache_of_the_kind() {
        let metrics = Metrics::new();
        let mut kept = KeptCaches::new(DEFAULT_MIB << 20);
        let key = |client: &'static str, kind: &'static str, text: &'static str| Key {
            client: Some((client, kind)),
            text,
        };
        let left = |kept: &KeptCaches| -> Vec<String> {
            kept.kept
                .iter()
                .map(|k| format!("{:?} {}", k.key.client, k.key.text))
                .collect()
        };
        let mut made = caches(3);
        kept.keep(
            &key("a.rs", "fim", "fn sum(v: u32) {"),
            made.remove(0),
            &metrics,
        );
        kept.keep(
            &key("a.rs", "edit", "fn sum(v: u32) {"),
            made.remove(0),
            &metrics,
        );
        kept.keep(&text("fn sum_(v: u32) {"), made.remove(0), &metrics);
        // Another client never takes a named client's cache, nor does an anonymous job.
        assert!(kept
            .take(&key("b.rs", "fim", "fn sum_(v: u32) {"), &metrics)
            .is_empty());
        assert!(!kept
            .take(&key("a.rs", "fim", "fn sum_(v: u32) {"), &metrics)
            .is_empty());
        assert_eq!(
            left(&kept),
            [
                "Some((\"a.rs\", \"edit\")) fn sum(v: u32) {",
                "None fn sum_(v: u32) {"
            ]
        );
        assert!(!kept.take(&key("a.rs", "edit", "x"), &metrics).is_empty());
        assert!(kept.take(&key("a.rs", "edit", "x"), &metrics).is_empty());
        assert_eq!(left(&kept), ["None fn sum_(v: u32) {"]);
        assert!(!kept.take(&text("fn sum_(v"), &metrics).is_empty());
        assert_eq!(kept.len(), 0);
    }
}
