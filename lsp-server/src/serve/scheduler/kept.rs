//! Caches a loop keeps between jobs, one per recent client, roughly: each job starts from the
//! kept cache whose last job's document shares the most text before the cursor with its own
//! (a client typing sends documents that differ by a few characters, and the job's first pass
//! realigns that cache across the edit), and leaves its cache behind for the next. Both loops
//! keep them the same way, so batching on or off is the only difference between them.

use redraft_engine::qwen2::KvCache;

use super::Work;

/// Kept caches, at most this many (the oldest dropped first)...
pub const KEPT_CACHES: usize = 32;

/// ...holding at most this many bytes of keys and values together.
pub const KEPT_BYTES: usize = 1 << 30;

/// What a job is matched on: its document up to the cursor.
pub fn key(work: &Work) -> &str {
    let (text, cursor) = match work {
        Work::Fim(work) => (&work.text, work.cursor),
        Work::Edit(work) => (&work.document, work.cursor),
    };
    text.get(..cursor).unwrap_or(text)
}

/// The kept caches, oldest first, each with the key of the job that left it.
#[derive(Default)]
pub struct KeptCaches {
    kept: Vec<(String, KvCache)>,
}

impl KeptCaches {
    /// The kept cache whose job shares the longest start with `key` (taken out), or a new one
    /// when none shares at least half of `key`: then the job is most likely another client's
    /// (or another place in the file), which would gain little from that cache and take it from
    /// the client whose next keystroke it serves.
    pub fn take(&mut self, key: &str) -> KvCache {
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
        best.map_or_else(KvCache::default, |(_, at)| self.kept.remove(at).1)
    }

    /// Keeps `cache` (left by the job matched on `key`) as the newest, then drops the oldest
    /// past [`KEPT_CACHES`] or [`KEPT_BYTES`].
    pub fn keep(&mut self, key: &str, cache: KvCache) {
        if cache.is_empty() {
            return;
        }
        self.kept.push((key.to_string(), cache));
        let mut over = self.kept.len().saturating_sub(KEPT_CACHES);
        let mut bytes: usize = self.kept[over..].iter().map(|(_, c)| c.bytes()).sum();
        while bytes > KEPT_BYTES && over + 1 < self.kept.len() {
            bytes -= self.kept[over].1.bytes();
            over += 1;
        }
        self.kept.drain(..over);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> KvCache {
        // A cache with something in it: a stored pass of the default model.
        let engine = redraft_engine::Engine::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/default-model"),
        )
        .unwrap();
        let mut cache = KvCache::default();
        engine
            .complete(
                &redraft_engine::InfillRequest::new("fn main() {\n    ", "\n}\n"),
                &mut cache,
                Default::default(),
            )
            .unwrap();
        cache
    }

    #[test]
    fn a_job_takes_the_cache_of_the_job_sharing_the_most_text() {
        let mut kept = KeptCaches::default();
        let one = cache();
        let bytes = one.bytes();
        kept.keep("fn a() { let x", one);
        kept.keep("struct B", cache());
        assert_eq!(kept.len(), 2);
        let taken = kept.take("fn a() { let xy");
        assert_eq!(taken.bytes(), bytes);
        assert_eq!(kept.len(), 1);
        // Nothing in common, or less than half: a fresh cache, the kept one stays.
        assert!(kept.take("use std::fmt;").is_empty());
        assert!(kept.take("struct Bridge { x: u32 }").is_empty());
        assert_eq!(kept.len(), 1);
        // An empty cache is not kept.
        kept.keep("x", KvCache::default());
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn the_oldest_go_past_the_count() {
        let mut kept = KeptCaches::default();
        let keys: Vec<String> = (0..KEPT_CACHES + 3)
            .map(|i| char::from(b'a' + i as u8).to_string())
            .collect();
        for key in &keys {
            kept.keep(key, cache());
        }
        assert_eq!(kept.len(), KEPT_CACHES);
        // The first three went; the fourth is there.
        for gone in &keys[..3] {
            assert!(kept.take(gone).is_empty(), "{gone}");
        }
        assert!(!kept.take(&keys[3]).is_empty());
    }
}
