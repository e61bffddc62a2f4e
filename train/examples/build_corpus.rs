//! Builds redraft's training corpus from unpacked crate sources and prints a summary.
//!
//! ```text
//! cargo fetch --locked                                            # the workspace's own crates
//! cargo fetch --locked --manifest-path fixtures/corpus/Cargo.toml # the extra corpus crates
//! cargo run --release -p redraft-train --example build_corpus -- \
//!     --source ~/.cargo/registry/src/index.crates.io-*/ \
//!     --lockfile Cargo.lock fixtures/corpus/Cargo.lock \
//!     --out /work/corpus-out
//! ```
//!
//! `cargo fetch` unpacks every crate of a lockfile (all targets) under the registry's `src/`;
//! `--lockfile` then picks exactly those crates, whatever else the machine has unpacked.
//!
//! Options: `--source DIR...` (required), `--out DIR` (required), `--lockfile FILE...` (only the
//! crates they pin), `--holdout FRACTION` (0.05), `--seed N` (0), `--max-file-bytes N` (204800),
//! `--exclude PATTERN...` (added to the benchmark-source crates), `--top N` (crates listed, 20).

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::PathBuf;

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
    let out = out.context("pass --out DIR: where train.jsonl, valid.jsonl and manifest.json go")?;
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
        writeln!(report, "  {reason:?}: {count}: {}", names.join(", "))?;
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
    writeln!(report, "wrote {}", out.display())?;
    match io::stdout().write_all(report.as_bytes()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e).context("printing the summary"),
        _ => Ok(()),
    }
}
