//! Next-edit data built end to end from fixture crates (`tests/fixtures/edits/registry`: two
//! versions each of `alpha`, `beta` and `gamma`) with their resolutions written in advance, so
//! no cargo runs and nothing is downloaded: hunks of consecutive versions pair up, churn is
//! dropped, a licence change stops a chain, splits never leak and the output is deterministic.

use std::fs;
use std::path::{Path, PathBuf};

use redraft_train::corpus::{self, split_for, CorpusOptions, Split};
use redraft_train::edits::{self, EditKind, EditRecord, EditsManifest, EditsOptions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/edits")
}

/// A holdout seed that sends `beta` (only) to validation.
fn holdout_seed() -> u64 {
    (0..10_000)
        .find(|&seed| {
            split_for("beta", seed, 0.5) == Split::Valid
                && split_for("alpha", seed, 0.5) == Split::Train
                && split_for("gamma", seed, 0.5) == Split::Train
        })
        .expect("some seed splits them so")
}

/// Builds the corpus and the edits under `dir`; returns the edits directory.
fn build(dir: &Path) -> PathBuf {
    let corpus_dir = dir.join("corpus");
    let options = CorpusOptions {
        sources: vec![fixtures().join("registry/src/index.crates.io-fixture")],
        holdout_fraction: 0.5,
        seed: holdout_seed(),
        ..CorpusOptions::default()
    };
    corpus::build(&options, &corpus_dir).unwrap();

    // What `cargo generate-lockfile` would have written for `name = "<version"`.
    let work = dir.join("work");
    let resolved = |name: &str, below: &str, found: Option<&str>| {
        let scratch = work.join(format!("{name}-below-{below}"));
        fs::create_dir_all(&scratch).unwrap();
        match found {
            Some(version) => fs::write(
                scratch.join("Cargo.lock"),
                format!(
                    "version = 4\n\n[[package]]\nname = \"{name}\"\nversion = \"{version}\"\n\
                     source = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n\
                     [[package]]\nname = \"redraft-edit-versions-scratch\"\nversion = \"0.0.0\"\n\
                     dependencies = [\n \"{name}\",\n]\n"
                ),
            ),
            None => fs::write(
                scratch.join("no-earlier-version"),
                "error: failed to select",
            ),
        }
        .unwrap();
    };
    resolved("alpha", "0.2.0", Some("0.1.0"));
    resolved("alpha", "0.1.0", None);
    resolved("beta", "1.1.0", Some("1.0.0"));
    resolved("beta", "1.0.0", None);
    resolved("gamma", "0.2.0", Some("0.1.0"));

    let out = dir.join("edits");
    let mut options = EditsOptions::new(&corpus_dir);
    options.versions = 3;
    options.work_dir = Some(work);
    options.cargo_home = Some(fixtures());
    options.synthetic.no_edit_fraction = 1.0;
    edits::build(&options, &out).unwrap();
    out
}

fn records(out: &Path, file: &str) -> Vec<EditRecord> {
    edits::read_edit_records(&out.join(file)).unwrap()
}

fn manifest(out: &Path) -> EditsManifest {
    serde_json::from_str(&fs::read_to_string(out.join(edits::MANIFEST_FILE)).unwrap()).unwrap()
}

fn applied(record: &EditRecord) -> String {
    let target = record.target.as_ref().expect("a target");
    let mut text = record.text.clone();
    text.replace_range(target.start..target.end, &target.new_text);
    text
}

#[test]
fn hunks_of_consecutive_versions_pair_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path());
    let alpha: Vec<EditRecord> = records(&out, edits::TRAIN_FILE)
        .into_iter()
        .filter(|r| r.kind == EditKind::Versions && r.krate == "alpha")
        .collect();
    // One group (area, then perimeter four lines on): a target case and a no-edit case.
    assert_eq!(alpha.len(), 2, "{alpha:#?}");
    let (target, done) = (&alpha[0], &alpha[1]);
    assert_eq!(
        (target.from_version.as_deref(), target.version.as_str()),
        (Some("0.1.0"), "0.2.0")
    );
    assert_eq!(target.path, "src/lib.rs");
    // The history is the area change; the comment and version churn above it is applied
    // silently, the perimeter is what comes next.
    assert_eq!(target.history.len(), 1);
    assert_eq!(
        target.history[0].new,
        "/// Area of a rectangle.\npub fn area(width: u32, height: u32) -> u32 {\n    let product = width * height;\n    product\n"
    );
    assert!(target
        .text
        .starts_with("//! Alpha: sizes of rectangles.\n\npub const VERSION: &str = \"0.2.0\";"));
    assert!(target.text.contains("pub fn perimeter(w: u32, h: u32)"));
    assert_eq!(
        &target.text[..target.cursor],
        "//! Alpha: sizes of rectangles.\n\npub const VERSION: &str = \"0.2.0\";\n\n/// Area of a rectangle.\npub fn area(width: u32, height: u32) -> u32 {\n    let product = width * height"
    );
    let new = fs::read_to_string(
        fixtures().join("registry/src/index.crates.io-fixture/alpha-0.2.0/src/lib.rs"),
    )
    .unwrap();
    assert_eq!(applied(target), new);
    assert_eq!(
        (done.target.as_ref(), done.history.len(), done.text.as_str()),
        (None, 2, new.as_str())
    );
}

#[test]
fn churn_is_dropped_and_tallied() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path());
    let dropped = manifest(&out).dropped;
    assert_eq!(dropped.get("versions/comment"), Some(&1), "{dropped:#?}");
    assert_eq!(dropped.get("versions/version"), Some(&1), "{dropped:#?}");
    assert_eq!(dropped.get("versions/whitespace"), Some(&1), "{dropped:#?}");
    // `util.rs` changed only in whitespace, `extra.rs` has no older self: no cases from them.
    let all = records(&out, edits::TRAIN_FILE);
    assert!(all
        .iter()
        .filter(|r| r.kind == EditKind::Versions)
        .all(|r| r.path == "src/lib.rs"));
}

#[test]
fn the_versions_manifest_says_what_was_used_and_why_chains_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path());
    let versions = manifest(&out).versions;
    let chain = |name: &str| versions.iter().find(|c| c.name == name).unwrap();
    let alpha = chain("alpha");
    assert_eq!(alpha.used.len(), 1);
    assert_eq!(
        (
            alpha.used[0].version.as_str(),
            alpha.used[0].files_paired,
            alpha.used[0].files_changed
        ),
        ("0.1.0", 2, 2)
    );
    assert_eq!(
        alpha.stopped.as_deref(),
        Some("no published version below 0.1.0")
    );
    let gamma = chain("gamma");
    assert!(gamma.used.is_empty());
    assert_eq!(
        gamma.stopped.as_deref(),
        Some("0.1.0: its licence has no MIT or Apache-2.0 alternative")
    );
}

#[test]
fn no_validation_crate_reaches_training() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path());
    let train = records(&out, edits::TRAIN_FILE);
    let valid = records(&out, edits::VALID_FILE);
    assert!(!valid.is_empty());
    assert!(valid.iter().all(|r| r.krate == "beta"), "{valid:#?}");
    assert!(train.iter().all(|r| r.krate != "beta"));
    // beta's real edits and its synthetic ones (the `?`s) are both in validation.
    assert!(valid.iter().any(|r| r.kind == EditKind::Versions));
    assert!(valid.iter().any(|r| r.kind == EditKind::UnwrapToTry));
    let counts = manifest(&out).counts;
    let valid_total: usize = counts[&Split::Valid]
        .values()
        .map(|c| c.edit + c.no_edit)
        .sum();
    assert_eq!(valid_total, valid.len());
}

#[test]
fn the_same_inputs_give_the_same_files() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (build(a.path()), build(b.path()));
    for file in [edits::TRAIN_FILE, edits::VALID_FILE, edits::MANIFEST_FILE] {
        assert_eq!(
            fs::read(a.join(file)).unwrap(),
            fs::read(b.join(file)).unwrap(),
            "{file}"
        );
    }
    let cases = edits::read_edit_cases(&a.join(edits::TRAIN_FILE)).unwrap();
    assert_eq!(cases.len(), records(&a, edits::TRAIN_FILE).len());
    assert!(cases.iter().any(|c| c.target.is_none()));
}

#[test]
fn an_excerpt_keeps_the_lines_around_cursor_and_target() {
    use redraft_context::edit::cut::EditCase;
    use redraft_context::edit::TextEdit;
    let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
    let cursor = text.find("line 50").unwrap() + 4;
    let target = text.find("line 53").unwrap();
    let mut record = EditRecord::new(
        EditKind::Rename,
        "c",
        "1.0.0",
        EditCase {
            path: "f.rs".into(),
            text: text.clone(),
            cursor,
            history: Vec::new(),
            target: Some(TextEdit {
                range: target..target + 4,
                new_text: "LINE".into(),
            }),
        },
    );
    let before = applied(&record);
    record.trim_to_excerpt(5);
    assert_eq!(record.excerpt_line, 45);
    assert!(record.text.starts_with("line 45\n"));
    assert!(record.text.ends_with("line 58\n"));
    assert_eq!(&record.text[record.cursor..record.cursor + 3], " 50");
    assert!(before.contains(&applied(&record)));
}
