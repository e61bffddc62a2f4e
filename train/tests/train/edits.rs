//! Next-edit data built end to end from fixture crates (`tests/fixtures/edits/registry`: two
//! versions each of `alpha`, `beta` and `gamma`) with their resolutions written in advance, so
//! no cargo runs and nothing is downloaded: hunks of consecutive versions pair up, churn is
//! dropped, a licence change stops a chain, splits never leak and the output is deterministic.
//! Registries written by the tests themselves keep cases away from the held-out crates' code
//! and training away from validation's changes.

use std::collections::BTreeSet;
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

    let work = dir.join("work");
    let resolved = |name: &str, below: &str, found: Option<&str>| {
        resolve(&work, name, below, found);
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

/// Writes what `cargo generate-lockfile` would have for `name = "<below"` under `work`: `found`,
/// or that there is none.
fn resolve(work: &Path, name: &str, below: &str, found: Option<&str>) {
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

/// A registry the test writes: `cargo_home/registry/src/index.crates.io-test/<name>-<version>/`,
/// each crate MIT.
struct Registry {
    cargo_home: PathBuf,
}

impl Registry {
    fn new(dir: &Path) -> Registry {
        Registry {
            cargo_home: dir.join("cargo-home"),
        }
    }

    fn source(&self) -> PathBuf {
        self.cargo_home.join("registry/src/index.crates.io-test")
    }

    fn add(&self, name: &str, version: &str, files: &[(&str, &str)]) {
        let root = self.source().join(format!("{name}-{version}"));
        fs::create_dir_all(&root).unwrap();
        fs::write(
            root.join("Cargo.toml"),
            format!("[package]\nname = \"{name}\"\nversion = \"{version}\"\nlicense = \"MIT\"\n"),
        )
        .unwrap();
        for (path, text) in files {
            let file = root.join(path);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(file, text).unwrap();
        }
    }

    /// Builds the corpus (holding out `valid_fraction` by `seed`) and the edits of `crates`
    /// (all when empty) into `out`, each crate paired with one earlier version (`work` holds the
    /// resolutions).
    fn build_edits(
        &self,
        dir: &Path,
        (valid_fraction, seed): (f64, u64),
        configure: impl FnOnce(&mut EditsOptions),
        out: &Path,
    ) -> EditsManifest {
        let corpus_dir = dir.join("corpus");
        let sources = CorpusOptions {
            sources: vec![self.source()],
            ..CorpusOptions::default()
        };
        if !corpus_dir.exists() {
            let options = CorpusOptions {
                holdout_fraction: valid_fraction,
                seed,
                ..sources.clone()
            };
            corpus::build(&options, &corpus_dir).unwrap();
        }
        let mut options = EditsOptions::new(&corpus_dir);
        options.versions = 1;
        options.work_dir = Some(dir.join("work"));
        options.cargo_home = Some(self.cargo_home.clone());
        options.held_out = Some(sources);
        configure(&mut options);
        edits::build(&options, out).unwrap();
        manifest(out)
    }
}

/// humantime's date formatting (humantime is held out): well over 100 code tokens.
const HELD_OUT_DATE: &str = r#"/// Formats a date the way RFC 3339 does.
pub fn format_rfc3339(secs_since_epoch: u64, buf: &mut [u8; 20]) {
    let days = secs_since_epoch / 86400;
    let secs_of_day = secs_since_epoch % 86400;
    let leapyears = (days + 719468) / 146097;
    let mut remdays = (days + 719468) % 146097;
    let mut qc_cycles = remdays / 36524;
    if qc_cycles == 4 {
        qc_cycles -= 1;
    }
    remdays -= qc_cycles * 36524;
    let mut c_cycles = remdays / 1461;
    if c_cycles == 25 {
        c_cycles -= 1;
    }
    remdays -= c_cycles * 1461;
    let mut remyears = remdays / 365;
    if remyears == 4 {
        remyears -= 1;
    }
    remdays -= remyears * 365;
    let year = 2000 + remyears + 4 * c_cycles + 100 * qc_cycles + 400 * leapyears;
    buf[0] = b'0' + (year / 1000) as u8;
    buf[1] = b'0' + (year / 100 % 10) as u8;
    buf[2] = b'0' + (year / 10 % 10) as u8;
    buf[3] = b'0' + (year % 10) as u8;
    buf[17] = b'0' + (secs_of_day % 60 / 10) as u8;
    buf[18] = b'0' + (secs_of_day % 10) as u8;
}
"#;

/// Two functions whose parameters version 0.2.0 renames: a history and a target.
fn sizes(width: &str, height: &str) -> String {
    format!(
        "/// Area of a rectangle.\npub fn area({width}: u32, {height}: u32) -> u32 {{\n    let product = {width} * {height};\n    product\n}}\n\n\
         pub fn perimeter({width}: u32, {height}: u32) -> u32 {{\n    2 * {width} + 2 * {height}\n}}\n"
    )
}

#[test]
fn an_earlier_version_sharing_held_out_code_makes_no_cases() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new(dir.path());
    registry.add("humantime", "2.1.0", &[("src/date.rs", HELD_OUT_DATE)]);
    // delta 0.1.0 copied humantime's date code (a comment added: still a copy) into the file
    // 0.2.0 renames parameters in; 0.2.0 renamed two of its locals too, which leaves no run of
    // 100 tokens in common with humantime's, so the corpus keeps it.
    let copied = HELD_OUT_DATE.replace("    let days", "    // Days since 1970.\n    let days");
    let own = copied.replace("remdays", "rem_days").replace("buf", "out");
    registry.add(
        "delta",
        "0.1.0",
        &[
            ("src/date.rs", &format!("{}\n{copied}", sizes("w", "h"))),
            ("src/lib.rs", &sizes("w", "h")),
        ],
    );
    let newer = sizes("width", "height");
    registry.add(
        "delta",
        "0.2.0",
        &[
            ("src/date.rs", &format!("{newer}\n{own}")),
            ("src/lib.rs", &newer),
        ],
    );
    resolve(&dir.path().join("work"), "delta", "0.2.0", Some("0.1.0"));
    let versions_of = |out: &Path, path: &str| {
        records(out, edits::TRAIN_FILE)
            .into_iter()
            .filter(|r| r.kind == EditKind::Versions && r.path == path)
            .count()
    };

    // Unchecked, the pair would teach the renames next to humantime's code.
    let unchecked = dir.path().join("unchecked");
    let manifest = registry.build_edits(
        dir.path(),
        (0.0, 0),
        |options| options.held_out = None,
        &unchecked,
    );
    assert_eq!(manifest.held_out_files, 0);
    let leaked = versions_of(&unchecked, "src/date.rs");
    assert!(leaked > 0);
    assert!(records(&unchecked, edits::TRAIN_FILE)
        .iter()
        .any(|r| r.path == "src/date.rs" && r.history.iter().any(|h| h.old.contains("remdays"))));

    let out = dir.path().join("edits");
    let manifest = registry.build_edits(dir.path(), (0.0, 0), |_| {}, &out);
    assert_eq!(manifest.held_out_files, 1);
    assert_eq!(versions_of(&out, "src/date.rs"), 0);
    assert!(
        versions_of(&out, "src/lib.rs") > 0,
        "the clean file's pair stays"
    );
    assert_eq!(
        manifest.dropped.get("versions/held_out_passage"),
        Some(&leaked),
        "{:#?}",
        manifest.dropped
    );
    let delta = manifest
        .versions
        .iter()
        .find(|c| c.name == "delta")
        .unwrap();
    let shared = &delta.used[0].held_out_passage;
    assert_eq!(shared.len(), 1, "{shared:#?}");
    assert_eq!(
        (
            shared[0].path.as_str(),
            shared[0].version.as_str(),
            shared[0].held_out.as_str()
        ),
        ("src/date.rs", "0.1.0", "humantime/src/date.rs (2.1.0)")
    );
    assert!(shared[0].tokens >= corpus::HELD_OUT_PASSAGE_TOKENS);
    // No case of any kind holds the copied code.
    for file in [edits::TRAIN_FILE, edits::VALID_FILE] {
        for record in records(&out, file) {
            let texts = std::iter::once(&record.text)
                .chain(record.history.iter().flat_map(|h| [&h.old, &h.new]));
            assert!(
                texts.into_iter().all(|t| !t.contains("remdays")),
                "{record:#?}"
            );
        }
    }
}

#[test]
fn a_corpus_file_sharing_held_out_code_makes_no_synthetic_cases() {
    // A corpus built from sources without humantime kept epsilon's copy of its code; the
    // edits are built with humantime's sources at hand.
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new(dir.path());
    registry.add("epsilon", "0.1.0", &[("src/date.rs", HELD_OUT_DATE)]);
    let build = |out: &str, held_out: bool| {
        let out = dir.path().join(out);
        let manifest = registry.build_edits(
            dir.path(),
            (0.0, 0),
            |options| {
                options.versions = 0;
                if !held_out {
                    options.held_out = None;
                }
            },
            &out,
        );
        (records(&out, edits::TRAIN_FILE).len(), manifest)
    };
    let (unchecked, _) = build("unchecked", false);
    assert!(unchecked > 0);
    registry.add("humantime", "2.1.0", &[("src/date.rs", HELD_OUT_DATE)]);
    let (cases, manifest) = build("edits", true);
    assert_eq!(cases, 0);
    assert_eq!(
        manifest.dropped.get("synthetic/held_out_passage"),
        Some(&unchecked)
    );
}

/// `text` with `[[old->new]]` marking a case's target: the change [`EditRecord::change`] reads.
fn change(fixture: &str) -> Option<edits::Change> {
    let (before, rest) = fixture.split_once("[[").unwrap();
    let (old, rest) = rest.split_once("->").unwrap();
    let (new, after) = rest.split_once("]]").unwrap();
    let text = format!("{before}{old}{after}");
    let record = EditRecord {
        kind: EditKind::Rename,
        krate: "c".into(),
        version: "1.0.0".into(),
        from_version: None,
        path: "src/lib.rs".into(),
        cursor: 0,
        excerpt_line: 0,
        history: Vec::new(),
        target: Some(edits::TargetRecord {
            start: before.len(),
            end: before.len() + old.len(),
            new_text: new.into(),
        }),
        text,
    };
    record.change()
}

fn check_change(fixture: &str, before: &str, after: &str) {
    let expected = edits::Change {
        before: before.into(),
        after: after.into(),
    };
    assert_eq!(change(fixture), Some(expected), "{fixture:?}");
}

#[test]
fn a_change_is_its_lines_and_one_on_either_side() {
    let code = "fn f(x: u32) -> u32 {\n    let y = [[x->x_in]] + 1;\n    y * 2\n}\nfn g() {}\n";
    check_change(
        code,
        "fn f(x: u32) -> u32 { let y = x + 1; y * 2",
        "fn f(x: u32) -> u32 { let y = x_in + 1; y * 2",
    );
    // Indentation and line breaks aside, it is the same change.
    assert_eq!(
        change(&code.replace("    ", "\t").replace(" + ", "  +  ")),
        change(code)
    );
    // Another line above or below is another place.
    assert_ne!(change(&code.replace("y * 2", "y * 3")), change(code));
    assert_ne!(change(&code.replace("-> u32 {", "-> u64 {")), change(code));
    // Two lines on, code may differ.
    assert_eq!(change(&code.replace("fn g()", "fn h()")), change(code));
    // At the file's edges, and a whole line inserted.
    check_change(
        "[[->use std::ops::ControlFlow;\n]]use std::fmt;\n",
        "use std::fmt;",
        "use std::ops::ControlFlow; use std::fmt;",
    );
    check_change("a\nb[[c->]]", "a bc", "a b");
    let no_edit = EditRecord {
        target: None,
        ..serde_json::from_str::<EditRecord>(
            r#"{"kind":"rename","crate":"c","version":"1","path":"p","text":"x","cursor":0,"history":[],"target":null}"#,
        )
        .unwrap()
    };
    assert_eq!(no_edit.change(), None);
}

/// The holdout seed that sends `right` (only) to validation, of two crates.
fn left_right_seed() -> u64 {
    (0..10_000)
        .find(|&seed| {
            split_for("right", seed, 0.5) == Split::Valid
                && split_for("left", seed, 0.5) == Split::Train
        })
        .expect("some seed splits them so")
}

/// `left` (training) and `right` (validation) make the same renames in code otherwise their own.
fn left_and_right(registry: &Registry, work: &Path) {
    let own = |name: &str, salt: u32| -> String {
        (0..12)
            .map(|i| {
                format!(
                    "pub fn {name}_{i}(values: &[u32]) -> u32 {{\n    values.iter().map(|v| v * {}).sum::<u32>() + {}\n}}\n\n",
                    i + salt,
                    i * salt
                )
            })
            .collect()
    };
    for (name, salt) in [("left", 3), ("right", 7)] {
        let (old, new) = (sizes("w", "h"), sizes("width", "height"));
        let body = own(name, salt);
        registry.add(name, "0.1.0", &[("src/lib.rs", &format!("{body}{old}"))]);
        registry.add(name, "0.2.0", &[("src/lib.rs", &format!("{body}{new}"))]);
        resolve(work, name, "0.2.0", Some("0.1.0"));
    }
}

#[test]
fn no_training_case_makes_a_validation_cases_change() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new(dir.path());
    left_and_right(&registry, &dir.path().join("work"));
    let split = (0.5, left_right_seed());
    let out = dir.path().join("both");
    let manifest = registry.build_edits(
        dir.path(),
        split,
        |options| options.synthetic.per_file = 0,
        &out,
    );
    let (train, valid) = (
        records(&out, edits::TRAIN_FILE),
        records(&out, edits::VALID_FILE),
    );
    assert!(valid.iter().all(|r| r.krate == "right"));
    let perimeter = |r: &EditRecord| {
        r.target
            .as_ref()
            .is_some_and(|t| t.new_text.contains("width"))
    };
    assert!(valid.iter().any(perimeter), "{valid:#?}");
    // left's renames are right's, line for line: its training copy goes, validation stays.
    assert!(!train.iter().any(perimeter), "{train:#?}");
    assert!(
        train.iter().any(|r| r.krate == "left"),
        "left's no-edit case stays"
    );
    let taught = manifest.dropped.get("versions/validation_change").copied();
    assert_eq!(taught, Some(1), "{:#?}", manifest.dropped);
    let changes: BTreeSet<_> = valid.iter().filter_map(EditRecord::change).collect();
    assert_eq!(manifest.validation_changes, changes.len());
    assert!(train
        .iter()
        .filter_map(EditRecord::change)
        .all(|c| !changes.contains(&c)));

    // Built apart, as scripts/build-pack does: validation first, then training told of it.
    let valid_only = dir.path().join("valid-only");
    registry.build_edits(
        dir.path(),
        split,
        |options| {
            options.synthetic.per_file = 0;
            options.only_crates = vec!["right".into()];
        },
        &valid_only,
    );
    let train_only = dir.path().join("train-only");
    let manifest = registry.build_edits(
        dir.path(),
        split,
        |options| {
            options.synthetic.per_file = 0;
            options.only_crates = vec!["left".into()];
            options.validation_cases = vec![valid_only.join(edits::VALID_FILE)];
        },
        &train_only,
    );
    assert_eq!(records(&valid_only, edits::VALID_FILE), valid);
    assert_eq!(records(&train_only, edits::TRAIN_FILE), train);
    assert_eq!(
        manifest.dropped.get("versions/validation_change"),
        taught.as_ref()
    );
}
