//! What the typing replays against `redraft lsp` share (`lsp_typing`, `next_edit_typing`): their
//! flags, the real file they type into by default, LSP positions in UTF-16 (the encoding they
//! negotiate), a seeded generator for human-looking gaps between keys, and the latency report.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::lsp_client::Pending;

/// The command line: `--bench` (cargo passes it to `cargo bench`, not to `cargo test`) and
/// `--flag value` pairs.
pub struct Args {
    args: Vec<String>,
    /// Run as a benchmark; otherwise a smoke test small enough for `cargo test`.
    pub bench: bool,
}

impl Args {
    pub fn from_env() -> Args {
        let args: Vec<String> = std::env::args().collect();
        let bench = args.iter().any(|a| a == "--bench");
        Args { args, bench }
    }

    /// The value after `flag`, if given.
    pub fn value(&self, flag: &str) -> Option<String> {
        self.args
            .iter()
            .position(|a| a == flag)
            .and_then(|i| self.args.get(i + 1))
            .cloned()
    }

    /// `flag`'s value parsed, else `bench` or `smoke` as this run is one or the other. A value
    /// that does not parse is an error, not the default.
    pub fn number<T: FromStr>(&self, flag: &str, bench: T, smoke: T) -> T {
        match self.value(flag) {
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| panic!("{flag} {v}: expected a number")),
            None if self.bench => bench,
            None => smoke,
        }
    }

    /// Whether `flag` is given (a switch without a value).
    pub fn flag(&self, flag: &str) -> bool {
        self.args.iter().any(|a| a == flag)
    }
}

/// A real crate's source for the typing replay: ropey's `iter.rs` (ropey is a dependency, so
/// its source is in the registry whenever this builds), else a file of this repository.
pub fn default_file() -> PathBuf {
    locked_source("ropey", "src/iter.rs").unwrap_or_else(|| repo_file("engine/src/sampler.rs"))
}

/// A file of this repository.
pub fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

/// `path` in the source of `krate` at the version the workspace's `Cargo.lock` pins (the first
/// if it pins several), from the local cargo registry, if it is there.
pub fn locked_source(krate: &str, path: &str) -> Option<PathBuf> {
    let lock = std::fs::read_to_string(repo_file("Cargo.lock")).ok()?;
    let name = format!("name = \"{krate}\"");
    let mut lines = lock.lines();
    lines.find(|l| *l == name)?;
    let version = lines
        .next()?
        .strip_prefix("version = \"")?
        .strip_suffix('"')?;
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let registries = std::fs::read_dir(cargo_home.join("registry/src")).ok()?;
    registries
        .flatten()
        .map(|registry| {
            registry
                .path()
                .join(format!("{krate}-{version}"))
                .join(path)
        })
        .find(|candidate| candidate.is_file())
}

/// `path`'s text with `\r\n` made `\n` (positions are counted on `\n` lines).
pub fn read_source(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .replace("\r\n", "\n")
}

/// The LSP position (line, UTF-16 column) of byte `at` of `text`.
pub fn position(text: &str, at: usize) -> [u32; 2] {
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    [
        before.matches('\n').count() as u32,
        before[line_start..].encode_utf16().count() as u32,
    ]
}

/// The byte offset of an LSP position (line, UTF-16 column) in `text`; a column past the end
/// of its line is the line's end, a line past the end of the text the text's end.
pub fn offset(text: &str, line: u32, character: u32) -> usize {
    let mut line_start = 0;
    for _ in 0..line {
        match text[line_start..].find('\n') {
            Some(i) => line_start += i + 1,
            None => return text.len(),
        }
    }
    let rest = &text[line_start..];
    let content = &rest[..rest.find('\n').unwrap_or(rest.len())];
    let mut used = 0;
    for (i, c) in content.char_indices() {
        if used >= character {
            return line_start + i;
        }
        used += c.len_utf16() as u32;
    }
    line_start + content.len()
}

/// A small seeded generator (SplitMix64): the same seed gives the same gaps between keys.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The `p`th percentile of ascending `sorted` (nearest rank); NaN when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The request's answer (result or error code) and milliseconds from sending to answer.
pub async fn timed(request: Pending) -> (f64, Result<serde_json::Value, i32>) {
    let sent = request.sent;
    let answer = request.answer().await.map_err(|e| e.code.0);
    (sent.elapsed().as_secs_f64() * 1e3, answer)
}
