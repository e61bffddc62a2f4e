//! A tiny seeded generator (SplitMix64) and a stable string hash (FNV-1a), so benchmark cuts
//! and samples are the same on every machine and with every version of the `rand` crate.

#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// Seeded from `seed` and a name: independent streams per problem or file, unaffected by
    /// what other problems or files there are.
    pub fn for_name(seed: u64, name: &str) -> SplitMix64 {
        SplitMix64::new(seed ^ fnv1a(name.as_bytes()))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// A seeded random `n` of `items`, kept in their order (all of them when there are no more).
pub fn sample<T>(items: Vec<T>, n: usize, seed: u64) -> Vec<T> {
    if n >= items.len() {
        return items;
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    SplitMix64::new(seed).shuffle(&mut order);
    let mut keep = vec![false; items.len()];
    for &i in &order[..n] {
        keep[i] = true;
    }
    items
        .into_iter()
        .zip(keep)
        .filter_map(|(item, kept)| kept.then_some(item))
        .collect()
}

/// FNV-1a, 64 bits, of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_continue(FNV1A_START, bytes)
}

/// FNV-1a's starting state (the offset basis).
pub const FNV1A_START: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of what `hash` was the hash of, then `bytes`.
pub fn fnv1a_continue(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_fixed_and_uniform_enough() {
        // Pinned values: a change here silently changes every benchmark cut.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        let mut counts = [0usize; 4];
        let mut rng = SplitMix64::for_name(7, "Rust/12");
        for _ in 0..4000 {
            counts[rng.below(4)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (900..1100).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn samples_are_seeded_distinct_and_in_order() {
        let items: Vec<u32> = (0..100).collect();
        let a = sample(items.clone(), 10, 3);
        assert_eq!(a, sample(items.clone(), 10, 3));
        assert_ne!(a, sample(items.clone(), 10, 4));
        assert_eq!(a.len(), 10);
        assert!(a.windows(2).all(|w| w[0] < w[1]), "{a:?}");
        assert_eq!(sample(items.clone(), 200, 3), items);
    }
}
