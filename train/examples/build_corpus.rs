//! Builds redraft's training corpus from unpacked crate sources and prints a summary.
//!
//! ```text
//! scripts/fetch-corpus-sources target/corpus-sources   # Debian's crates + cargo fetch
//! cargo run --release -p redraft-train --example build_corpus -- \
//!     --source target/corpus-sources/cargo-home/registry/src/index.crates.io-*/ \
//!     --lockfile train/corpus/Cargo.lock fixtures/corpus/Cargo.lock Cargo.lock \
//!     --whole-source target/corpus-sources/debian-root/usr/share/cargo/registry \
//!     --out /work/corpus-out
//! ```
//!
//! `cargo fetch` unpacks every crate of a lockfile (all targets) under the registry's `src/`;
//! `--lockfile` then picks exactly those crates from the `--source`s, whatever else the machine
//! has unpacked. A `--whole-source` (Debian's `librust-*-dev` crates, a fixed snapshot) is taken
//! whole. Either way only the newest version of a crate is kept, the crates reserved for
//! held-out measurement never are (nor files sharing a passage of 100 code tokens with theirs),
//! and near copies of kept files are dropped.
//!
//! Options: `--source DIR...` and/or `--whole-source DIR...` (at least one), `--out DIR`
//! (required), `--lockfile FILE...` (only the crates they pin, from the `--source`s),
//! `--holdout FRACTION` (0.05), `--seed N` (0), `--max-file-bytes N` (204800),
//! `--near-duplicates JACCARD|off` (0.8), `--exclude PATTERN...` (added to the
//! benchmark-source crates), `--top N` (crates listed, 20). Writes `train.jsonl`,
//! `valid.jsonl`, `manifest.json` and `manifest.tsv` (see `redraft_train::corpus`).

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use redraft_train::corpus::{self, CorpusOptions, Split};

fn main() -> anyhow::Result<()> {
    let mut options = CorpusOptions::default();
    let mut out = None;
    let mut top = 20;
    let mut args = std::env::args().skip(1).peekable();
    while let Some(flag) = args.next() {
        // Flags that take several values read up to the next `--flag`, so a shell glob works.
        let mut values = || {
            let mut values = Vec::new();
            while let Some(value) = args.next_if(|a| !a.starts_with("--")) {
                values.push(value);
            }
            values
        };
        let mut one = |what: &str| -> anyhow::Result<String> {
            match values().as_slice() {
                [value] => Ok(value.clone()),
                _ => bail!("{flag} takes exactly one {what}"),
            }
        };
        match flag.as_str() {
            "--source" => options
                .sources
                .extend(values().into_iter().map(PathBuf::from)),
            "--whole-source" => options
                .whole_sources
                .extend(values().into_iter().map(PathBuf::from)),
            "--near-duplicates" => options.near_duplicate_jaccard = match one("threshold")?.as_str()
            {
                "off" => None,
                value => Some(value.parse().context(
                    "--near-duplicates takes an estimated Jaccard similarity such as 0.8, or off",
                )?),
            },
            "--lockfile" => options
                .lockfiles
                .extend(values().into_iter().map(PathBuf::from)),
            "--exclude" => options.excluded_crates.extend(values()),
            "--out" => out = Some(PathBuf::from(one("directory")?)),
            "--holdout" => {
                options.holdout_fraction = one("fraction")?
                    .parse()
                    .context("--holdout takes a fraction such as 0.05")?
            }
            "--seed" => options.seed = one("number")?.parse().context("--seed takes an integer")?,
            "--max-file-bytes" => {
                options.max_file_bytes = one("number")?
                    .parse()
                    .context("--max-file-bytes takes an integer")?
            }
            "--top" => top = one("number")?.parse().context("--top takes an integer")?,
            other => {
                bail!("unknown argument `{other}`: see the header of examples/build_corpus.rs")
            }
        }
    }
    let out = out.context(
        "pass --out DIR: where train.jsonl, valid.jsonl, manifest.json and manifest.tsv go",
    )?;
    let started = Instant::now();
    let manifest = corpus::build(&options, &out)
        .with_context(|| format!("building the corpus into {}", out.display()))?;

    // One write at the end: piping into `head` must not turn a finished build into a panic.
    let mut report = String::new();
    let stats = &manifest.stats;
    let mb = |bytes: u64| bytes as f64 / 1e6;
    writeln!(
        report,
        "kept {} crates: train {} crates, {} files, {:.2} MB; valid {} crates, {} files, {:.2} MB",
        manifest.crates.len(),
        stats.crates_train,
        stats.files_train,
        mb(stats.bytes_train),
        stats.crates_valid,
        stats.files_valid,
        mb(stats.bytes_valid),
    )?;
    let mut by_size: Vec<_> = manifest.crates.iter().collect();
    by_size.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.name.cmp(&b.name)));
    writeln!(report, "largest crates:")?;
    for krate in by_size.iter().take(top) {
        let split = if krate.split == Split::Valid {
            " (valid)"
        } else {
            ""
        };
        writeln!(
            report,
            "  {:>7.2} MB {:>5} files  {} {}{split}",
            mb(krate.bytes),
            krate.files,
            krate.name,
            krate.version
        )?;
    }
    let valid: Vec<_> = manifest
        .crates
        .iter()
        .filter(|c| c.split == Split::Valid)
        .map(|c| c.name.as_str())
        .collect();
    writeln!(report, "validation crates: {}", valid.join(", "))?;
    writeln!(report, "crates dropped:")?;
    for (reason, count) in &stats.crates_dropped {
        let names: Vec<_> = manifest
            .dropped_crates
            .iter()
            .filter(|c| c.reason == *reason)
            .map(|c| format!("{} {}", c.name, c.version))
            .collect();
        let more = match names.len().saturating_sub(top) {
            0 => String::new(),
            more => format!(" and {more} more (see manifest.json)"),
        };
        writeln!(
            report,
            "  {reason:?}: {count}: {}{more}",
            names[..names.len().min(top)].join(", ")
        )?;
    }
    writeln!(report, "files dropped:")?;
    for (reason, tally) in &stats.files_dropped {
        writeln!(
            report,
            "  {reason:?}: {} files, {:.2} MB",
            tally.files,
            mb(tally.bytes)
        )?;
    }
    writeln!(
        report,
        "wrote {} in {:.1} s",
        out.display(),
        started.elapsed().as_secs_f64()
    )?;
    match io::stdout().write_all(report.as_bytes()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e).context("printing the summary"),
        _ => Ok(()),
    }
}
