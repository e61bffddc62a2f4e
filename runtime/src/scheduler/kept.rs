//! Caches a loop keeps between jobs, one per recent client, roughly: each job starts from the
//! kept cache whose last job's document shares the most text before the cursor with its own
//! (a client typing sends documents that differ by a few characters, and the job's first pass
//! realigns that cache across the edit), and leaves its cache behind for the next. Both loops
//! keep them the same way, so batching on or off is the only difference between them.
//!
//! The bound is memory (`--cache-memory`), not a count: a count small enough to matter drops
//! every cache when more clients type at once than it holds (each client's cache is the oldest
//! when its next request comes, so with least-recently-kept eviction none is ever found).

use redraft_engine::qwen2::KvCache;

use super::Work;
use crate::metrics::Metrics;

/// Kept caches at most, whatever their size: bounds the search a job makes through them.
pub const KEPT_CACHES: usize = 1024;

/// The default of `--cache-memory`, in MiB.
pub const DEFAULT_MIB: usize = 1024;

/// What a job is matched on: its document up to the cursor.
pub fn key(work: &Work) -> &str {
    let (text, cursor) = match work {
        Work::Fim(work) => (&work.text, work.cursor),
        Work::Edit(work) => (&work.document, work.cursor),
    };
    text.get(..cursor).unwrap_or(text)
}

/// The kept caches, oldest first, each with the key of the job that left it.
pub struct KeptCaches {
    kept: Vec<(String, KvCache)>,
    /// Bytes of keys, values and the text they are matched on that may be kept...
    budget: usize,
    /// ...and that are: the kept caches' footprints summed.
    bytes: usize,
}

/// What one kept cache holds in memory: its keys and values, and the text it is matched on.
fn footprint((key, cache): &(String, KvCache)) -> usize {
    key.len() + cache.bytes()
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

    /// The kept cache whose job shares the longest start with `key` (taken out), or a new one
    /// when none shares at least half of `key`: then the job is most likely another client's
    /// (or another place in the file), which would gain little from that cache and take it from
    /// the client whose next keystroke it serves.
    /// Counted in `metrics` as a kept or a cold start.
    pub fn take(&mut self, key: &str, metrics: &Metrics) -> KvCache {
        let shared = |kept: &str| {
            kept.bytes()
                .zip(key.bytes())
                .take_while(|(a, b)| a == b)
                .count()
        };
        let best = (0..self.kept.len())
            .map(|at| (shared(&self.kept[at].0), at))
            .max()
            .filter(|&(shared, _)| shared > 0 && 2 * shared >= key.len());
        let taken = best.map(|(_, at)| {
            self.bytes -= footprint(&self.kept[at]);
            self.kept.remove(at).1
        });
        metrics.cache_start(taken.is_some());
        self.report(metrics);
        taken.unwrap_or_default()
    }

    /// Keeps `cache` (left by the job matched on `key`) as the newest, then drops the oldest
    /// past [`KEPT_CACHES`] or the budget (the newest too, when it alone is over).
    pub fn keep(&mut self, key: &str, cache: KvCache, metrics: &Metrics) {
        if !cache.is_empty() {
            let kept = (key.to_string(), cache);
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
    fn caches(n: usize) -> Vec<KvCache> {
        let engine = redraft_engine::Engine::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/default-model"),
        )
        .unwrap();
        let request = redraft_engine::InfillRequest::new("fn main() {\n    ", "\n}\n");
        (0..n)
            .map(|_| {
                let mut cache = KvCache::default();
                engine
                    .complete(&request, &mut cache, Default::default())
                    .unwrap();
                cache
            })
            .collect()
    }

    fn cache() -> KvCache {
        caches(1).pop().unwrap()
    }

    #[test]
    fn a_job_takes_the_cache_of_the_job_sharing_the_most_text() {
        let metrics = Metrics::new();
        let mut kept = KeptCaches::new(DEFAULT_MIB << 20);
        let one = cache();
        let bytes = one.bytes();
        kept.keep("fn a() { let x", one, &metrics);
        kept.keep("struct B", cache(), &metrics);
        assert_eq!(kept.len(), 2);
        let taken = kept.take("fn a() { let xy", &metrics);
        assert_eq!(taken.bytes(), bytes);
        assert_eq!(kept.len(), 1);
        // Nothing in common, or less than half: a fresh cache, the kept one stays.
        assert!(kept.take("use std::fmt;", &metrics).is_empty());
        assert!(kept.take("struct Bridge { x: u32 }", &metrics).is_empty());
        assert_eq!(kept.len(), 1);
        // An empty cache is not kept.
        kept.keep("x", KvCache::default(), &metrics);
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
            kept.keep(key, cache, &metrics);
        }
        for key in &keys {
            assert!(!kept.take(key, &metrics).is_empty(), "{key}");
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
            kept.keep(key, cache, &metrics);
        }
        assert_eq!(kept.len(), 3);
        // The first two went; the third is there.
        for gone in &keys[..2] {
            assert!(kept.take(gone, &metrics).is_empty(), "{gone}");
        }
        assert!(!kept.take(&keys[2], &metrics).is_empty());
        // No budget: nothing is kept.
        let mut none = KeptCaches::new(0);
        none.keep("00 client", made.pop().unwrap(), &metrics);
        assert_eq!(none.len(), 0);
    }
}
