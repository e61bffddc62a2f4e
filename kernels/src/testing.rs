//! What the kernels' tests and benchmarks (here and in the engine) share: deterministic inputs
//! and a median timer. Not used by any kernel.

use std::time::{Duration, Instant};

/// `n` values in [-0.5, 0.5), the same for the same `seed` on every machine (a linear
/// congruential generator: tests compare paths, not statistics).
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        })
        .collect()
}

/// The largest absolute difference between `a` and `b`, element by element (asserted the same
/// length): how far one path's output is from another's.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "outputs of different lengths");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

/// Median milliseconds of `f`, called for at least `budget` (and 10 times) after 3 warm-up
/// calls.
pub fn median_ms(mut f: impl FnMut(), budget: Duration) -> f64 {
    for _ in 0..3 {
        f();
    }
    let mut times = Vec::new();
    let started = Instant::now();
    while started.elapsed() < budget || times.len() < 10 {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
