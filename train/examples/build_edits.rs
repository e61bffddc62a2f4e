//! Builds next-edit training data from a built corpus and prints a summary.
//!
//! ```text
//! cargo run --release -p redraft-train --example build_edits -- \
//!     --corpus target/gpu-work/corpus --out target/edits [--versions 4] \
//!     --source DIR... [--whole-source DIR...] [--lockfile FILE...]
//! ```
//!
//! `--source`, `--whole-source` and `--lockfile` are the corpus's own (what build_corpus was
//! given): the held-out crates' code is read from them, and no case is made from a file that
//! shares a passage with it (the corpus's rule). `--no-held-out-check` goes without, for a
//! corpus of one's own code with no held-out measurement to keep clean. `--validation-cases
//! FILE...`: another build's `edits-valid.jsonl` (scripts/build-pack builds the validation
//! crates first); no training case makes the same change as one of them.
//!
//! `--versions N` (4) earlier published versions of each corpus crate are resolved and fetched
//! with cargo (crates.io, once; the scratch lockfiles under `--work-dir`, default
//! `OUT/versions-work`, make reruns offline) and paired file by file; `--versions 0` makes
//! synthetic cases only. Other options: `--seed N` (synthetic picks, 0), `--per-file N`
//! (synthetic cases per kind per file, 2), `--no-edit-fraction F` (0.2), `--cargo-home DIR`
//! (where cargo downloads to; default cargo's own), `--crate NAME...` (only these crates),
//! `--excerpt-lines N` (lines kept above the cursor and below the target, 40; 0: whole files).
//!
//! Writes `edits-train.jsonl`, `edits-valid.jsonl` and `edits-manifest.json` to `OUT`.

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::PathBuf;

use anyhow::{bail, Context};
use redraft_train::corpus::{CorpusOptions, Split};
use redraft_train::edits::{self, EditsOptions};

fn main() -> anyhow::Result<()> {
    let mut corpus = None;
    let mut out = None;
    let mut options = EditsOptions::new(PathBuf::new());
    let mut held_out = CorpusOptions::default();
    let mut no_held_out_check = false;
    let mut args = std::env::args().skip(1).peekable();
    while let Some(flag) = args.next() {
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
            "--corpus" => corpus = Some(PathBuf::from(one("directory")?)),
            "--out" => out = Some(PathBuf::from(one("directory")?)),
            "--work-dir" => options.work_dir = Some(PathBuf::from(one("directory")?)),
            "--cargo-home" => options.cargo_home = Some(PathBuf::from(one("directory")?)),
            "--versions" => {
                options.versions = one("number")?
                    .parse()
                    .context("--versions takes an integer")?
            }
            "--seed" => {
                options.synthetic.seed =
                    one("number")?.parse().context("--seed takes an integer")?
            }
            "--per-file" => {
                options.synthetic.per_file = one("number")?
                    .parse()
                    .context("--per-file takes an integer")?
            }
            "--no-edit-fraction" => {
                options.synthetic.no_edit_fraction = one("fraction")?
                    .parse()
                    .context("--no-edit-fraction takes a fraction such as 0.2")?
            }
            "--crate" => options.only_crates.extend(values()),
            "--source" => held_out
                .sources
                .extend(values().into_iter().map(PathBuf::from)),
            "--whole-source" => held_out
                .whole_sources
                .extend(values().into_iter().map(PathBuf::from)),
            "--lockfile" => held_out
                .lockfiles
                .extend(values().into_iter().map(PathBuf::from)),
            "--no-held-out-check" => no_held_out_check = true,
            "--validation-cases" => options
                .validation_cases
                .extend(values().into_iter().map(PathBuf::from)),
            "--excerpt-lines" => {
                let lines: usize = one("number")?
                    .parse()
                    .context("--excerpt-lines takes an integer (0: whole files)")?;
                options.excerpt_lines = (lines > 0).then_some(lines);
            }
            other => bail!("unknown argument `{other}`: see the header of examples/build_edits.rs"),
        }
    }
    options.corpus =
        corpus.context("pass --corpus DIR: a directory build_corpus wrote (manifest.json)")?;
    let out = out.context("pass --out DIR: where the edits files go")?;
    let has_sources = !held_out.sources.is_empty() || !held_out.whole_sources.is_empty();
    if has_sources == no_held_out_check {
        bail!(
            "pass the corpus's --source/--whole-source (and --lockfile), where the held-out crates are read from, or --no-held-out-check (not both)"
        );
    }
    options.held_out = has_sources.then_some(held_out);
    let report = edits::build(&options, &out)
        .with_context(|| format!("building next-edit data into {}", out.display()))?;

    let manifest = &report.manifest;
    let mut summary = String::new();
    for (split, kinds) in &manifest.counts {
        let name = match split {
            Split::Train => "train",
            Split::Valid => "valid",
        };
        let (edit, no_edit) = kinds
            .values()
            .fold((0, 0), |(e, n), c| (e + c.edit, n + c.no_edit));
        writeln!(
            summary,
            "{name}: {edit} edit cases, {no_edit} no-edit cases"
        )?;
        for (kind, counts) in kinds {
            writeln!(
                summary,
                "  {kind:?}: {} edit, {} no-edit",
                counts.edit, counts.no_edit
            )?;
        }
    }
    let used: usize = manifest.versions.iter().map(|c| c.used.len()).sum();
    let with: usize = manifest
        .versions
        .iter()
        .filter(|c| !c.used.is_empty())
        .count();
    writeln!(
        summary,
        "earlier versions paired: {used} of {} crates' ({with} crates have at least one); .crate files {:.1} MB; cargo {:.0} s",
        manifest.versions.len(),
        report.crate_bytes as f64 / 1e6,
        report.fetch_seconds
    )?;
    let mut stops: std::collections::BTreeMap<String, usize> = Default::default();
    for chain in &manifest.versions {
        if let Some(why) = &chain.stopped {
            // `0.3.1: its licence ...` and `no published version below 1.2.0` tally by kind.
            let kind = why.split(": ").last().unwrap_or(why);
            let kind = if kind.starts_with("no published version") {
                "no published version below"
            } else {
                kind
            };
            *stops.entry(kind.to_string()).or_default() += 1;
        }
    }
    writeln!(summary, "chains stopped early:")?;
    for (why, count) in &stops {
        writeln!(summary, "  {count}: {why}")?;
    }
    writeln!(
        summary,
        "held-out files checked against: {}; validation changes training was checked against: {}",
        manifest.held_out_files, manifest.validation_changes
    )?;
    writeln!(summary, "dropped:")?;
    for (reason, count) in &manifest.dropped {
        writeln!(summary, "  {reason}: {count}")?;
    }
    writeln!(summary, "wrote {}", out.display())?;
    match io::stdout().write_all(summary.as_bytes()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e).context("printing the summary"),
        _ => Ok(()),
    }
}
