//! A fixed pool of scoped threads over a slice: scoring is process-bound (rustc, python), so
//! plain threads pulling the next index are all it needs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f` over `items` on `jobs` threads; results in input order.
pub fn map<T: Sync, R: Send>(items: &[T], jobs: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let result = f(item);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every index was taken by one worker"))
        .collect()
}

/// The number of jobs to use when the user gives none: the machine's cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order_across_threads() {
        let items: Vec<u64> = (0..100).collect();
        let out = super::map(&items, 4, |x| x * x);
        assert_eq!(out, items.iter().map(|x| x * x).collect::<Vec<_>>());
        assert!(super::map(&[] as &[u8], 3, |x| *x).is_empty());
    }
}
