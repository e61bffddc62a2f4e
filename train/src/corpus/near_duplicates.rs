//! Near-duplicate files: vendored copies, forks and the same code published under several crate
//! names differ from the file already kept by a few lines, so exact hashing misses them.
//!
//! A file is the set of its shingles, [`SHINGLE_TOKENS`] consecutive word or punctuation tokens
//! (whitespace ignored, so re-indenting changes nothing). Its MinHash [`Signature`] keeps, for
//! each of [`PERMUTATIONS`] hash functions, the least hash of any shingle; the share of equal
//! slots between two signatures estimates the Jaccard similarity of the sets (Broder 1997).
//! Locality-sensitive hashing finds candidates without comparing every pair: the signature is cut
//! into [`BANDS`] bands of [`ROWS`] slots, and files sharing any whole band are candidates (at
//! Jaccard 0.8 a pair shares a band with probability 1 - (1 - 0.8^8)^16 = 0.95; at 0.5, 0.06).
//! Each candidate is then confirmed on the full signature against the threshold.
//!
//! The permutations are derived from one 64-bit hash per shingle by multiply-add-shift with
//! fixed odd multipliers, so a signature costs [`PERMUTATIONS`] multiplications per token and
//! nothing depends on the run: the same files always give the same signatures.

use std::collections::HashMap;

/// Tokens per shingle: long enough that shared idioms (`) -> Result<`) are not shared code.
pub const SHINGLE_TOKENS: usize = 5;
/// Hash functions of a signature.
pub const PERMUTATIONS: usize = 128;
/// LSH bands; [`PERMUTATIONS`] / [`BANDS`] slots each. A pair with Jaccard s shares a band with
/// probability 1 - (1 - s^ROWS)^BANDS; the threshold where that is steepest, (1/16)^(1/8) = 0.71,
/// sits below [`DEFAULT_JACCARD`], so pairs above it are rarely missed.
pub const BANDS: usize = 16;
/// Signature slots per band.
pub const ROWS: usize = PERMUTATIONS / BANDS;
/// Estimated Jaccard similarity from which a file counts as a near copy of a kept one.
pub const DEFAULT_JACCARD: f64 = 0.8;
/// Files with fewer shingles are left to the exact check: on a few lines, one changed token moves
/// the estimate by a large step, and two different tiny files (`mod a; pub use a::*;`) can share
/// most of their shingles.
pub const MIN_SHINGLES: usize = 32;

/// Odd multipliers and offsets of the permutations, from splitmix64 of a fixed seed.
const MULTIPLIERS: [u64; PERMUTATIONS] = permutation_constants(0x05ee_d0fc_0de1);
const OFFSETS: [u64; PERMUTATIONS] = permutation_constants(0x05ee_d0fc_0de2);

const fn permutation_constants(seed: u64) -> [u64; PERMUTATIONS] {
    let mut out = [0; PERMUTATIONS];
    let mut state = seed;
    let mut i = 0;
    while i < PERMUTATIONS {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        out[i] = super::splitmix64(state) | 1;
        i += 1;
    }
    out
}

/// The MinHash signature of a file's shingles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signature([u32; PERMUTATIONS]);

impl Signature {
    /// The signature of `text`, or `None` when it has fewer than [`MIN_SHINGLES`] shingles.
    pub(crate) fn of(text: &str) -> Option<Signature> {
        let mut window = [0u64; SHINGLE_TOKENS];
        let mut tokens = 0usize;
        let mut shingles = Vec::new();
        for token in token_hashes(text.as_bytes()) {
            window[tokens % SHINGLE_TOKENS] = token;
            tokens += 1;
            if tokens < SHINGLE_TOKENS {
                continue;
            }
            // The window in token order, oldest first, so the shingle hash is order-sensitive.
            let mut shingle = 0u64;
            for k in 0..SHINGLE_TOKENS {
                let token = window[(tokens + k) % SHINGLE_TOKENS];
                shingle = (shingle.rotate_left(23) ^ token).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            }
            shingles.push(super::splitmix64(shingle));
        }
        if shingles.len() < MIN_SHINGLES {
            return None;
        }
        // Code repeats itself (`self.`, `) -> Result<`): hashing each distinct shingle once
        // saves more than the sort costs.
        shingles.sort_unstable();
        shingles.dedup();
        let mut mins = [u32::MAX; PERMUTATIONS];
        for shingle in shingles {
            for ((min, &a), &b) in mins.iter_mut().zip(&MULTIPLIERS).zip(&OFFSETS) {
                let value = (a.wrapping_mul(shingle).wrapping_add(b) >> 32) as u32;
                *min = (*min).min(value);
            }
        }
        Some(Signature(mins))
    }

    /// The estimated Jaccard similarity: the share of equal slots.
    pub(crate) fn similarity(&self, other: &Signature) -> f64 {
        let equal = self.0.iter().zip(&other.0).filter(|(a, b)| a == b).count();
        equal as f64 / PERMUTATIONS as f64
    }

    fn band_key(&self, band: usize) -> u64 {
        let slots = &self.0[band * ROWS..(band + 1) * ROWS];
        slots.iter().fold(band as u64, |hash, &slot| {
            super::splitmix64(hash ^ u64::from(slot))
        })
    }
}

/// Hashes of the tokens of `text`: runs of identifier characters (ASCII letters, digits, `_`,
/// and any non-ASCII byte) and single punctuation bytes; whitespace separates and is dropped.
pub(super) fn token_hashes(text: &[u8]) -> impl Iterator<Item = u64> + '_ {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < text.len() && text[at].is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        match text.get(at) {
            None => return None,
            Some(&b) if is_word(b) => {
                while at < text.len() && is_word(text[at]) {
                    at += 1;
                }
            }
            Some(_) => at += 1,
        }
        Some(super::fnv1a(&text[start..at]))
    })
}

/// Signatures of the files kept so far, found by band.
pub(crate) struct NearDuplicateIndex {
    threshold: f64,
    /// The caller's id of each signature, by insertion order.
    entries: Vec<(usize, Signature)>,
    /// Per band: band key to positions in `entries`.
    bands: Vec<HashMap<u64, Vec<u32>>>,
}

impl NearDuplicateIndex {
    pub(crate) fn new(threshold: f64) -> NearDuplicateIndex {
        NearDuplicateIndex {
            threshold,
            entries: Vec::new(),
            bands: vec![HashMap::new(); BANDS],
        }
    }

    /// The kept file `signature` is a near copy of, as the id it was inserted with and the
    /// estimated similarity: the most similar candidate at or above the threshold, the earliest
    /// inserted on a tie.
    pub(crate) fn find(&self, signature: &Signature) -> Option<(usize, f64)> {
        let mut candidates: Vec<u32> = (0..BANDS)
            .filter_map(|band| self.bands[band].get(&signature.band_key(band)))
            .flatten()
            .copied()
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let mut best: Option<(u32, f64)> = None;
        for position in candidates {
            let similarity = signature.similarity(&self.entries[position as usize].1);
            if similarity >= self.threshold && best.is_none_or(|(_, s)| similarity > s) {
                best = Some((position, similarity));
            }
        }
        best.map(|(position, similarity)| (self.entries[position as usize].0, similarity))
    }

    pub(crate) fn insert(&mut self, id: usize, signature: Signature) {
        let position = u32::try_from(self.entries.len()).expect("fewer than 2^32 files");
        for (band, buckets) in self.bands.iter_mut().enumerate() {
            buckets
                .entry(signature.band_key(band))
                .or_default()
                .push(position);
        }
        self.entries.push((id, signature));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::corpus::tests::functions as file;

    #[test]
    fn similarity_estimates_the_shared_share_of_shingles() {
        let a = Signature::of(&file(1, 40)).unwrap();
        let b = Signature::of(&file(2, 40)).unwrap();
        assert_eq!(a.similarity(&a), 1.0);
        assert!(a.similarity(&b) < 0.3, "{}", a.similarity(&b));
        // Half the functions shared: Jaccard about 1/3.
        let half = format!("{}{}", &file(1, 40)[..file(1, 20).len()], file(3, 20));
        let h = Signature::of(&half).unwrap();
        assert!(
            (0.2..0.5).contains(&a.similarity(&h)),
            "{}",
            a.similarity(&h)
        );
        // Whitespace is not a token.
        let reindented = file(1, 40).replace("    ", "\t").replace('\n', "\r\n");
        assert_eq!(Signature::of(&reindented).unwrap(), a);
    }

    #[test]
    fn short_files_get_no_signature() {
        assert_eq!(Signature::of("mod a;\npub use a::*;\n"), None);
        assert!(Signature::of(&file(1, 3)).is_some());
    }

    #[test]
    fn the_index_finds_near_copies_only() {
        let mut index = NearDuplicateIndex::new(DEFAULT_JACCARD);
        let original = file(1, 60);
        index.insert(7, Signature::of(&original).unwrap());
        index.insert(8, Signature::of(&file(2, 60)).unwrap());
        let edited = original.replacen("input.len() * ", "input.len() / ", 2);
        let (id, similarity) = index.find(&Signature::of(&edited).unwrap()).unwrap();
        assert_eq!(id, 7);
        assert!(similarity >= DEFAULT_JACCARD, "{similarity}");
        assert_eq!(index.find(&Signature::of(&file(3, 60)).unwrap()), None);
    }
}
