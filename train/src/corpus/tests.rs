//! End-to-end tests of [`super::build`] on fake registry directories.

use std::fs;
use std::path::Path;

use tempfile::TempDir;

use super::*;

/// Writes an unpacked crate `name-version/` under `source`, as `cargo fetch` would.
fn add_crate(
    source: &Path,
    name: &str,
    version: &str,
    license: Option<&str>,
    files: &[(&str, &str)],
) {
    let dir = source.join(format!("{name}-{version}"));
    fs::create_dir_all(&dir).unwrap();
    let license = license.map_or(String::new(), |l| format!("license = \"{l}\"\n"));
    let toml = format!("[package]\nname = \"{name}\"\nversion = \"{version}\"\n{license}");
    fs::write(dir.join("Cargo.toml"), toml).unwrap();
    for (path, text) in files {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
}

fn options(source: &Path) -> CorpusOptions {
    CorpusOptions {
        sources: vec![source.to_path_buf()],
        holdout_fraction: 0.0,
        ..CorpusOptions::default()
    }
}

fn records(out: &Path, file: &str) -> Vec<CorpusRecord> {
    fs::read_to_string(out.join(file))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The paths of the training split's records, in order.
fn train_paths(out: &Path) -> Vec<String> {
    records(out, TRAIN_FILE)
        .into_iter()
        .map(|r| r.path)
        .collect()
}

fn kept(manifest: &CorpusManifest) -> Vec<String> {
    manifest
        .crates
        .iter()
        .map(|c| format!("{} {}", c.name, c.version))
        .collect()
}

fn dropped(manifest: &CorpusManifest) -> Vec<String> {
    manifest
        .dropped_crates
        .iter()
        .map(|c| format!("{} {} {:?}", c.name, c.version, c.reason))
        .collect()
}

fn dropped_files(manifest: &CorpusManifest) -> Vec<String> {
    manifest
        .dropped_files
        .iter()
        .map(|f| format!("{}/{} {:?}", f.krate, f.path, f.reason))
        .collect()
}

/// Distinct, plausible file text so that nothing counts as a duplicate by accident.
fn code(tag: &str) -> String {
    format!("pub fn {tag}() -> u32 {{\n    {}\n}}\n", tag.len())
}

#[test]
fn keeps_only_crates_with_an_mit_or_apache_alternative() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    let f = |tag: &str| vec![("src/lib.rs", code(tag))];
    let add = |name, license, tag: &str| {
        let files = f(tag);
        let files: Vec<_> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
        add_crate(s, name, "1.0.0", license, &files);
    };
    add("dual", Some("MIT OR Apache-2.0"), "a");
    add("legacy", Some("MIT/Apache-2.0"), "b");
    add("llvm", Some("Apache-2.0 WITH LLVM-exception"), "c");
    add("unlicense", Some("Unlicense OR MIT"), "d");
    add("mpl", Some("MPL-2.0"), "e");
    add("gpl", Some("GPL-3.0-or-later"), "f");
    add("unicode", Some("(MIT OR Apache-2.0) AND Unicode-3.0"), "g");
    add("none", None, "h");
    let out = TempDir::new().unwrap();
    let manifest = build(&options(s), out.path()).unwrap();
    assert_eq!(
        kept(&manifest),
        [
            "dual 1.0.0",
            "legacy 1.0.0",
            "llvm 1.0.0",
            "unlicense 1.0.0"
        ]
    );
    assert_eq!(
        dropped(&manifest),
        [
            "gpl 1.0.0 License",
            "mpl 1.0.0 License",
            "none 1.0.0 License",
            "unicode 1.0.0 License"
        ]
    );
    assert_eq!(manifest.stats.crates_dropped[&CrateDropReason::License], 4);
}

#[test]
fn keeps_the_newest_version_of_each_crate() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    add_crate(
        s,
        "foo",
        "1.2.0",
        Some("MIT"),
        &[("src/lib.rs", &code("one"))],
    );
    add_crate(
        s,
        "foo",
        "1.10.0",
        Some("MIT"),
        &[("src/lib.rs", &code("ten"))],
    );
    add_crate(
        s,
        "foo",
        "1.10.0-rc.1",
        Some("MIT"),
        &[("src/lib.rs", &code("rc"))],
    );
    // The newest version decides the licence even when an older one was acceptable.
    add_crate(
        s,
        "bar",
        "0.1.0",
        Some("MIT"),
        &[("src/lib.rs", &code("bar"))],
    );
    add_crate(
        s,
        "bar",
        "0.2.0",
        Some("GPL-3.0"),
        &[("src/lib.rs", &code("bar2"))],
    );
    let out = TempDir::new().unwrap();
    let manifest = build(&options(s), out.path()).unwrap();
    assert_eq!(kept(&manifest), ["foo 1.10.0"]);
    assert_eq!(
        dropped(&manifest),
        [
            "bar 0.1.0 OlderVersion",
            "bar 0.2.0 License",
            "foo 1.10.0-rc.1 OlderVersion",
            "foo 1.2.0 OlderVersion"
        ]
    );
    let train = records(out.path(), TRAIN_FILE);
    assert_eq!(train.len(), 1);
    assert_eq!(train[0].text, code("ten"));
}

#[test]
fn an_earlier_source_wins_for_the_same_version() {
    let (first, second) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    add_crate(
        first.path(),
        "foo",
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", &code("first"))],
    );
    add_crate(
        second.path(),
        "foo",
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", &code("second"))],
    );
    let out = TempDir::new().unwrap();
    let options = CorpusOptions {
        sources: vec![first.path().to_path_buf(), second.path().to_path_buf()],
        ..options(first.path())
    };
    let manifest = build(&options, out.path()).unwrap();
    assert_eq!(dropped(&manifest), ["foo 1.0.0 DuplicateSource"]);
    assert_eq!(records(out.path(), TRAIN_FILE)[0].text, code("first"));
}

#[test]
fn drops_generated_vendored_and_oversized_files_and_binding_crates() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    let big = format!("// big\n{}", "fn f() {}\n".repeat(210));
    let table = format!("pub static T: [u8; 600] = [{}];\n", "0, ".repeat(600));
    add_crate(
        s,
        "mixed",
        "0.3.0",
        Some("MIT"),
        &[
            ("src/lib.rs", &code("lib")),
            (
                "src/tables.rs",
                "// DO NOT EDIT: generated by ucd-generate\npub const A: u8 = 1;\n",
            ),
            ("src/sys/bindings.rs", &code("bindings")),
            ("vendor/other/src/lib.rs", &code("vendored")),
            ("target/debug/out.rs", &code("built")),
            ("src/big.rs", &big),
            (
                "src/big_table.rs",
                &format!("// @generated by gen.py\n{big}"),
            ),
            (
                "src/output_tests/expected/derive.expected.rs",
                &code("expanded"),
            ),
            ("src/data.rs", &table),
            ("src/empty.rs", "\n"),
            ("src/latin1.rs", "// caf\u{e9}\n"),
            ("README.md", "# not rust\n"),
        ],
    );
    fs::write(s.join("mixed-0.3.0/src/latin1.rs"), b"// caf\xe9\n").unwrap();
    add_crate(
        s,
        "libc",
        "0.2.191",
        Some("MIT OR Apache-2.0"),
        &[("src/lib.rs", &code("c"))],
    );
    add_crate(
        s,
        "windows_x86_64_gnu",
        "0.52.6",
        Some("MIT"),
        &[("src/lib.rs", &code("w"))],
    );
    add_crate(
        s,
        "tree-sitter-loader",
        "0.25.0",
        Some("MIT"),
        &[("src/loader.rs", &code("t"))],
    );
    let out = TempDir::new().unwrap();
    let manifest = build(
        &CorpusOptions {
            max_file_bytes: 2000,
            ..options(s)
        },
        out.path(),
    )
    .unwrap();
    assert_eq!(kept(&manifest), ["mixed 0.3.0"]);
    assert_eq!(
        dropped(&manifest),
        [
            "libc 0.2.191 GeneratedBindings",
            "tree-sitter-loader 0.25.0 Excluded",
            "windows_x86_64_gnu 0.52.6 GeneratedBindings"
        ]
    );
    assert_eq!(
        dropped_files(&manifest),
        [
            "mixed/src/big.rs TooLarge",
            "mixed/src/big_table.rs GeneratedMarker",
            "mixed/src/data.rs LongLines",
            "mixed/src/empty.rs Empty",
            "mixed/src/latin1.rs NotUtf8",
            "mixed/src/output_tests/expected/derive.expected.rs GeneratedPath",
            "mixed/src/sys/bindings.rs GeneratedPath",
            "mixed/src/tables.rs GeneratedMarker",
            "mixed/target/debug/out.rs BuildOutput",
            "mixed/vendor/other/src/lib.rs Vendored"
        ]
    );
    assert_eq!(train_paths(out.path()), ["src/lib.rs"]);
}

#[test]
fn deduplicates_files_across_crates_and_line_endings() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    let shared = "pub fn shared() {}\npub fn more() {}\n";
    let shared_crlf = shared.replace('\n', "\r\n");
    add_crate(
        s,
        "alpha",
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", shared), ("src/a.rs", &code("a"))],
    );
    add_crate(
        s,
        "beta",
        "1.0.0",
        Some("MIT"),
        &[("src/util.rs", &shared_crlf), ("src/lib.rs", &code("b"))],
    );
    add_crate(s, "gamma", "1.0.0", Some("MIT"), &[("src/lib.rs", shared)]);
    let out = TempDir::new().unwrap();
    let manifest = build(&options(s), out.path()).unwrap();
    assert_eq!(
        dropped_files(&manifest),
        ["beta/src/util.rs Duplicate", "gamma/src/lib.rs Duplicate"]
    );
    assert_eq!(
        manifest.dropped_files[0].detail.as_deref(),
        Some("same as alpha/src/lib.rs")
    );
    assert_eq!(dropped(&manifest), ["gamma 1.0.0 NoFilesLeft"]);
    let train = records(out.path(), TRAIN_FILE);
    let texts: Vec<_> = train.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(texts, [code("a").as_str(), shared, code("b").as_str()]);
    assert!(!texts.iter().any(|t| t.contains('\r')));
}

/// Crate names, seed and fraction for which both splits are non-empty, found with the same
/// function `build` uses rather than hard-coded, so the test follows any change of hash.
fn mixed_split_crates(seed: u64, fraction: f64) -> Vec<String> {
    let names: Vec<String> = (0..24).map(|i| format!("crate{i}")).collect();
    let valid = names
        .iter()
        .filter(|n| split_for(n, seed, fraction) == Split::Valid)
        .count();
    assert!(
        valid > 0 && valid < names.len(),
        "seed {seed} gives one split only"
    );
    names
}

#[test]
fn holds_out_whole_crates_and_families() {
    let (seed, fraction) = (7, 0.4);
    let source = TempDir::new().unwrap();
    let s = source.path();
    let mut names = mixed_split_crates(seed, fraction);
    names.extend([
        "fam".to_string(),
        "fam-derive".to_string(),
        "fam_core".to_string(),
    ]);
    for name in &names {
        let files: Vec<(String, String)> = (0..3)
            .map(|i| {
                (
                    format!("src/m{i}.rs"),
                    code(&format!("{}_{i}", name.replace('-', "_"))),
                )
            })
            .collect();
        let files: Vec<_> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        add_crate(s, name, "1.0.0", Some("MIT"), &files);
    }
    let out = TempDir::new().unwrap();
    let options = CorpusOptions {
        seed,
        holdout_fraction: fraction,
        ..options(s)
    };
    let manifest = build(&options, out.path()).unwrap();
    let train = records(out.path(), TRAIN_FILE);
    let valid = records(out.path(), VALID_FILE);
    assert!(!train.is_empty() && !valid.is_empty());
    for krate in &manifest.crates {
        assert_eq!(krate.split, split_for(&krate.name, seed, fraction));
        let (mine, other) = match krate.split {
            Split::Train => (&train, &valid),
            Split::Valid => (&valid, &train),
        };
        assert_eq!(mine.iter().filter(|r| r.krate == krate.name).count(), 3);
        assert!(!other.iter().any(|r| r.krate == krate.name));
    }
    let family: Vec<_> = ["fam", "fam-derive", "fam_core"]
        .iter()
        .map(|n| split_for(n, seed, fraction))
        .collect();
    assert!(family.iter().all(|s| *s == family[0]));
    assert_eq!(
        manifest.stats.files_train + manifest.stats.files_valid,
        names.len() * 3
    );
}

/// A validation crate's name and a training crate's that sorts after it, so only the split
/// order can make the training crate claim a shared file first.
fn valid_then_train(seed: u64, fraction: f64) -> (String, String) {
    let valid = mixed_split_crates(seed, fraction)
        .into_iter()
        .find(|n| split_for(n, seed, fraction) == Split::Valid)
        .unwrap();
    let train = (0..)
        .map(|i| format!("{valid}z{i}"))
        .find(|n| split_for(n, seed, fraction) == Split::Train)
        .unwrap();
    (valid, train)
}

#[test]
fn a_validation_copy_of_a_training_file_is_dropped_from_validation() {
    let (seed, fraction) = (7, 0.4);
    let (valid, train) = valid_then_train(seed, fraction);
    let source = TempDir::new().unwrap();
    let s = source.path();
    let shared = code("shared");
    add_crate(
        s,
        &valid,
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", &shared), ("src/own.rs", &code("own"))],
    );
    add_crate(s, &train, "1.0.0", Some("MIT"), &[("src/lib.rs", &shared)]);
    let out = TempDir::new().unwrap();
    let options = CorpusOptions {
        seed,
        holdout_fraction: fraction,
        ..options(s)
    };
    let manifest = build(&options, out.path()).unwrap();
    assert_eq!(
        dropped_files(&manifest),
        [format!("{valid}/src/lib.rs Duplicate")]
    );
    assert_eq!(records(out.path(), VALID_FILE).len(), 1);
}

#[test]
fn building_twice_gives_identical_files() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    for (i, name) in mixed_split_crates(3, 0.3).iter().enumerate() {
        let files: Vec<(String, String)> = (0..4)
            .map(|j| {
                (
                    format!("src/d{j}/f.rs"),
                    code(&format!("{name}_{}", (i + j) % 7)),
                )
            })
            .collect();
        let files: Vec<_> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        add_crate(s, name, "0.1.0", Some("Apache-2.0"), &files);
    }
    let options = CorpusOptions {
        seed: 3,
        holdout_fraction: 0.3,
        ..options(s)
    };
    let (a, b) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let first = build(&options, a.path()).unwrap();
    let second = build(&options, b.path()).unwrap();
    assert_eq!(first, second);
    for file in [TRAIN_FILE, VALID_FILE, MANIFEST_FILE, MANIFEST_TSV_FILE] {
        let (x, y) = (
            fs::read(a.path().join(file)).unwrap(),
            fs::read(b.path().join(file)).unwrap(),
        );
        assert!(!x.is_empty(), "{file} is empty");
        assert!(x == y, "{file} differs between builds");
    }
    let train = records(a.path(), TRAIN_FILE);
    let keys: Vec<_> = train.iter().map(|r| (&r.krate, &r.path)).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "train.jsonl is sorted by crate, then path");
    let manifest: CorpusManifest =
        serde_json::from_slice(&fs::read(a.path().join(MANIFEST_FILE)).unwrap()).unwrap();
    assert_eq!(manifest, first);
}

#[test]
fn refuses_benchmark_directories_as_sources() {
    let root = TempDir::new().unwrap();
    let benchmarks = root.path().join("shared/benchmarks");
    add_crate(
        &benchmarks,
        "foo",
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", &code("x"))],
    );
    let out = TempDir::new().unwrap();
    let err = build(&options(&benchmarks), out.path()).unwrap_err();
    assert!(matches!(err, CorpusError::BenchmarkSource { .. }), "{err}");

    // A crate directory that is a link into benchmark data is refused too.
    let humaneval = root.path().join("HumanEval-infilling");
    add_crate(
        &humaneval,
        "bar",
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", &code("y"))],
    );
    let source = root.path().join("registry");
    fs::create_dir_all(&source).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(humaneval.join("bar-1.0.0"), source.join("bar-1.0.0")).unwrap();
        let err = build(&options(&source), out.path()).unwrap_err();
        assert!(matches!(err, CorpusError::BenchmarkSource { .. }), "{err}");
    }
    assert!(!out.path().join(TRAIN_FILE).exists());
}

#[test]
fn lockfiles_restrict_the_crates_and_must_be_fetched() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    add_crate(
        s,
        "locked",
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", &code("l"))],
    );
    add_crate(
        s,
        "locked",
        "2.0.0",
        Some("MIT"),
        &[("src/lib.rs", &code("l2"))],
    );
    add_crate(
        s,
        "stray",
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", &code("s"))],
    );
    let lock_dir = TempDir::new().unwrap();
    let lockfile = lock_dir.path().join("Cargo.lock");
    let entry = |name: &str, version: &str| {
        format!("[[package]]\nname = \"{name}\"\nversion = \"{version}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n")
    };
    fs::write(&lockfile, entry("locked", "1.0.0")).unwrap();
    let out = TempDir::new().unwrap();
    let options = CorpusOptions {
        lockfiles: vec![lockfile.clone()],
        ..options(s)
    };
    let manifest = build(&options, out.path()).unwrap();
    assert_eq!(kept(&manifest), ["locked 1.0.0"]);
    assert!(manifest.dropped_crates.is_empty());

    fs::write(
        &lockfile,
        entry("locked", "1.0.0") + &entry("unfetched", "0.1.0"),
    )
    .unwrap();
    let err = build(&options, out.path()).unwrap_err();
    assert!(
        matches!(&err, CorpusError::MissingLockedCrates { count: 1, first } if first == "unfetched 0.1.0"),
        "{err}"
    );
}

#[test]
fn an_empty_validation_split_is_an_error() {
    let source = TempDir::new().unwrap();
    let name = (0..)
        .map(|i| format!("lonely{i}"))
        .find(|n| split_for(n, 0, 0.05) == Split::Train)
        .unwrap();
    add_crate(
        source.path(),
        &name,
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", &code("x"))],
    );
    let out = TempDir::new().unwrap();
    let options = CorpusOptions {
        holdout_fraction: 0.05,
        ..options(source.path())
    };
    let err = build(&options, out.path()).unwrap_err();
    assert!(matches!(err, CorpusError::EmptyValidation { .. }), "{err}");
}

#[test]
fn crate_patterns_ignore_case_and_separator_style() {
    assert!(matches_crate_pattern("windows-*", "windows_x86_64_gnu"));
    assert!(matches_crate_pattern("windows-*", "windows-sys"));
    assert!(!matches_crate_pattern("windows-*", "windows"));
    assert!(matches_crate_pattern("linux-raw-sys", "linux_raw_sys"));
    assert!(matches_crate_pattern("tree-sitter*", "tree-sitter"));
    assert!(!matches_crate_pattern("libc", "libcst"));
    assert_eq!(holdout_family("serde_derive"), "serde");
    assert_eq!(holdout_family("regex-automata"), "regex");
    assert_eq!(holdout_family("syn"), "syn");
}

#[test]
fn held_out_crates_are_refused_whatever_the_options_say() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    for (name, version) in [
        ("chrono", "0.4.19"),
        ("chrono", "0.4.41"),
        ("csv_core", "0.1.12"),
        ("chrono-tz", "0.10.0"),
        ("serde", "1.0.0"),
    ] {
        let tag = format!("{}_{}", name.replace('-', "_"), version.replace('.', "_"));
        add_crate(
            s,
            name,
            version,
            Some("MIT OR Apache-2.0"),
            &[("src/lib.rs", &code(&tag))],
        );
    }
    let out = TempDir::new().unwrap();
    // Empty exclusion lists cannot let a held-out crate back in, nor one of its family.
    let options = CorpusOptions {
        excluded_crates: Vec::new(),
        generated_crates: Vec::new(),
        ..options(s)
    };
    let manifest = build(&options, out.path()).unwrap();
    assert_eq!(kept(&manifest), ["serde 1.0.0"]);
    assert_eq!(
        dropped(&manifest),
        [
            "chrono 0.4.19 HeldOut",
            "chrono 0.4.41 HeldOut",
            "chrono-tz 0.10.0 HeldOut",
            "csv_core 0.1.12 HeldOut"
        ]
    );
    let train = records(out.path(), TRAIN_FILE);
    assert!(train.iter().all(|r| !is_held_out(&r.krate)));
    assert!(is_held_out("Quick_XML") && is_held_out("csv-sniffer") && is_held_out("chrono-tz"));
    assert!(is_held_out("pulldown-cmark-to-cmark") && !is_held_out("chronology"));
    assert!(!is_held_out("quick-error") && !is_held_out("comfy") && !is_held_out("pulldown"));
}

/// A crate as Debian's `librust-*-dev` packages unpack it under `usr/share/cargo/registry`: the
/// normalised `Cargo.toml` of crates.io, plus `.cargo-checksum.json` and a `debian/` folder.
fn add_debian_crate(source: &Path, name: &str, version: &str, license: &str, tag: &str) {
    add_crate(
        source,
        name,
        version,
        None,
        &[
            ("src/lib.rs", &code(tag)),
            ("src/debian/control.rs", &code(&format!("{tag}_control"))),
            (
                "debian/patches/fix-build.rs",
                &code(&format!("{tag}_patch")),
            ),
            ("debian/patches/series", "fix-build.rs\n"),
            (".cargo-checksum.json", "{\"package\":\"\",\"files\":{}}\n"),
        ],
    );
    let toml = format!(
        "# THIS FILE IS AUTOMATICALLY GENERATED BY CARGO\n#\n# When uploading crates to the registry \
         Cargo will automatically\n# \"normalize\" Cargo.toml files for maximal compatibility\n\n\
         [package]\nedition = \"2018\"\nname = \"{name}\"\nversion = \"{version}\"\n\
         authors = [\"Someone <someone@example.com>\"]\ndescription = \"\"\"\nA crate.\n\"\"\"\n\
         license = \"{license}\"\n\n[dependencies.serde]\nversion = \"1\"\noptional = true\n"
    );
    fs::write(source.join(format!("{name}-{version}/Cargo.toml")), toml).unwrap();
}

#[test]
fn whole_sources_are_not_filtered_by_the_lockfiles_and_the_newest_version_wins() {
    let (registry, debian) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let r = registry.path();
    for (name, version) in [
        ("pinned", "1.0.0"),
        ("stray", "1.0.0"),
        ("both", "2.0.0"),
        ("newer", "0.1.0"),
    ] {
        let tag = format!("{name}_{}", version.replace('.', "_"));
        add_crate(
            r,
            name,
            version,
            Some("MIT"),
            &[("src/lib.rs", &code(&tag))],
        );
    }
    let d = debian.path();
    add_debian_crate(d, "debonly", "0.3.0", "MIT/Apache-2.0", "debonly");
    add_debian_crate(d, "both", "1.5.0", "MIT", "both_old");
    add_debian_crate(d, "newer", "0.2.0", "Apache-2.0 / MIT", "newer_deb");
    let lock_dir = TempDir::new().unwrap();
    let lockfile = lock_dir.path().join("Cargo.lock");
    let entry = |name: &str, version: &str| {
        format!("[[package]]\nname = \"{name}\"\nversion = \"{version}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n")
    };
    let lock = [("pinned", "1.0.0"), ("both", "2.0.0"), ("newer", "0.1.0")]
        .map(|(name, version)| entry(name, version))
        .concat();
    fs::write(&lockfile, lock).unwrap();
    let out = TempDir::new().unwrap();
    let options = CorpusOptions {
        whole_sources: vec![d.to_path_buf()],
        lockfiles: vec![lockfile],
        ..options(r)
    };
    let manifest = build(&options, out.path()).unwrap();
    assert_eq!(
        kept(&manifest),
        ["both 2.0.0", "debonly 0.3.0", "newer 0.2.0", "pinned 1.0.0"]
    );
    assert_eq!(
        dropped(&manifest),
        ["both 1.5.0 OlderVersion", "newer 0.1.0 OlderVersion"]
    );
    let licenses: Vec<_> = manifest.crates.iter().map(|c| c.license.as_str()).collect();
    assert_eq!(
        licenses,
        ["MIT", "MIT/Apache-2.0", "Apache-2.0 / MIT", "MIT"]
    );
    // Debian's packaging stays out; a module that happens to be called `debian` does not.
    assert_eq!(
        dropped_files(&manifest),
        [
            "debonly/debian/patches/fix-build.rs Packaging",
            "newer/debian/patches/fix-build.rs Packaging"
        ]
    );
    let train = records(out.path(), TRAIN_FILE);
    let paths: Vec<_> = train
        .iter()
        .map(|r| format!("{} {}", r.krate, r.path))
        .collect();
    assert_eq!(
        paths,
        [
            "both src/lib.rs",
            "debonly src/debian/control.rs",
            "debonly src/lib.rs",
            "newer src/debian/control.rs",
            "newer src/lib.rs",
            "pinned src/lib.rs"
        ]
    );
}

/// A plausible file of `n` functions whose names and constants come from `seed`: long enough
/// for a MinHash signature, and unrelated to the file of any other seed.
pub(super) fn functions(seed: u64, n: usize) -> String {
    (0..n)
        .map(|i| {
            let x = splitmix64(seed.wrapping_mul(1000) + i as u64);
            let (a, b) = (x % 9973, (x >> 20) % 9973);
            format!(
                "pub fn f_{x:016x}(input: &[u8]) -> usize {{\n    let a_{a:04} = input.len() * {:02};\n    let b_{b:04} = a_{a:04} + {:02};\n    b_{b:04} ^ a_{a:04}\n}}\n\n",
                x % 97,
                x % 13
            )
        })
        .collect()
}

/// `text` with a few of its lines changed, as a fork or a vendored copy would have it.
fn lightly_edited(text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for at in [5, 41, 90] {
        lines[at] = format!("    input.len() - {at} // patched");
    }
    lines.insert(60, "// A comment the fork added.".to_string());
    lines.join("\n") + "\n"
}

#[test]
fn drops_near_copies_of_kept_files_and_keeps_unrelated_ones() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    let original = functions(1, 40);
    let unrelated = functions(2, 40);
    assert_eq!(original.len(), unrelated.len());
    add_crate(
        s,
        "alpha",
        "1.0.0",
        Some("MIT"),
        &[("src/parse.rs", &original)],
    );
    add_crate(
        s,
        "beta",
        "1.0.0",
        Some("MIT"),
        &[
            ("src/vendored_parse.rs", &lightly_edited(&original)),
            ("src/own.rs", &unrelated),
        ],
    );
    let out = TempDir::new().unwrap();
    let manifest = build(&options(s), out.path()).unwrap();
    assert_eq!(
        dropped_files(&manifest),
        ["beta/src/vendored_parse.rs NearDuplicate"]
    );
    let detail = manifest.dropped_files[0].detail.as_deref().unwrap();
    assert!(
        detail.starts_with("near copy of alpha/src/parse.rs (estimated Jaccard 0."),
        "{detail}"
    );
    let tally = manifest.stats.files_dropped[&FileDropReason::NearDuplicate];
    assert_eq!(tally.files, 1);
    let kept: Vec<_> = records(out.path(), TRAIN_FILE)
        .into_iter()
        .map(|r| format!("{}/{}", r.krate, r.path))
        .collect();
    assert_eq!(kept, ["alpha/src/parse.rs", "beta/src/own.rs"]);

    // Without the check, the near copy stays.
    let options = CorpusOptions {
        near_duplicate_jaccard: None,
        ..options(s)
    };
    let manifest = build(&options, out.path()).unwrap();
    assert!(manifest.dropped_files.is_empty());
}

#[test]
fn a_validation_near_copy_of_a_training_file_is_dropped_from_validation() {
    let (seed, fraction) = (7, 0.4);
    let (valid, train) = valid_then_train(seed, fraction);
    let source = TempDir::new().unwrap();
    let s = source.path();
    let shared = functions(5, 40);
    add_crate(
        s,
        &valid,
        "1.0.0",
        Some("MIT"),
        &[
            ("src/lib.rs", &lightly_edited(&shared)),
            ("src/own.rs", &code("own")),
        ],
    );
    add_crate(s, &train, "1.0.0", Some("MIT"), &[("src/lib.rs", &shared)]);
    let out = TempDir::new().unwrap();
    let options = CorpusOptions {
        seed,
        holdout_fraction: fraction,
        ..options(s)
    };
    let manifest = build(&options, out.path()).unwrap();
    assert_eq!(
        dropped_files(&manifest),
        [format!("{valid}/src/lib.rs NearDuplicate")]
    );
    assert_eq!(records(out.path(), VALID_FILE).len(), 1);
    assert_eq!(records(out.path(), TRAIN_FILE).len(), 1);
}

#[test]
fn near_duplicate_removal_is_deterministic_across_batches() {
    // More crates than one parallel batch, each with files that are near copies of files of
    // other crates (several versions of the same code under different names), so the kept and
    // dropped files depend on the order decisions are made in.
    let source = TempDir::new().unwrap();
    let s = source.path();
    let crates = 2 * CRATES_PER_BATCH + 5;
    for i in 0..crates {
        let base = functions((i % 9) as u64, 30);
        let mut text = base.clone();
        if i % 2 == 1 {
            text = lightly_edited(&base);
        }
        let own = functions(100 + i as u64, 30);
        add_crate(
            s,
            &format!("crate{i:03}"),
            "1.0.0",
            Some("MIT"),
            &[("src/shared.rs", &text), ("src/own.rs", &own)],
        );
    }
    let (a, b) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let first = build(&options(s), a.path()).unwrap();
    let second = build(&options(s), b.path()).unwrap();
    assert_eq!(first, second);
    for file in [TRAIN_FILE, MANIFEST_FILE] {
        assert!(
            fs::read(a.path().join(file)).unwrap() == fs::read(b.path().join(file)).unwrap(),
            "{file} differs between builds"
        );
    }
    // The nine bases survive once each, in the first crate that has them.
    let shared: Vec<_> = records(a.path(), TRAIN_FILE)
        .into_iter()
        .filter(|r| r.path == "src/shared.rs")
        .map(|r| r.krate)
        .collect();
    let expected: Vec<_> = (0..9).map(|i| format!("crate{i:03}")).collect();
    assert_eq!(shared, expected);
    let dropped = &first.stats.files_dropped;
    assert_eq!(
        dropped[&FileDropReason::Duplicate].files + dropped[&FileDropReason::NearDuplicate].files,
        crates - 9
    );
}

#[test]
fn the_tsv_manifest_has_one_row_per_kept_crate() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    add_crate(
        s,
        "zeta",
        "0.2.0",
        Some("Apache-2.0 OR MIT"),
        &[("src/lib.rs", &code("z")), ("src/b.rs", &code("zb"))],
    );
    add_crate(
        s,
        "alpha",
        "1.0.0",
        Some("MIT"),
        &[("src/lib.rs", &code("a"))],
    );
    add_crate(
        s,
        "gpl",
        "1.0.0",
        Some("GPL-3.0"),
        &[("src/lib.rs", &code("g"))],
    );
    let out = TempDir::new().unwrap();
    build(&options(s), out.path()).unwrap();
    let (a, z, zb) = (code("a").len(), code("z").len(), code("zb").len());
    assert_eq!(
        fs::read_to_string(out.path().join(MANIFEST_TSV_FILE)).unwrap(),
        format!(
            "crate\tversion\tlicense\tsplit\tfiles\tbytes\n\
             alpha\t1.0.0\tMIT\ttrain\t1\t{a}\n\
             zeta\t0.2.0\tApache-2.0 OR MIT\ttrain\t2\t{}\n",
            z + zb
        )
    );
}

#[test]
fn copies_of_held_out_files_stay_out_of_the_corpus() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    let reader = functions(11, 40);
    let format = functions(12, 40);
    // A held-out crate's licence does not matter: its files are read only to keep copies out.
    add_crate(
        s,
        "csv-core",
        "0.1.12",
        Some("Unlicense"),
        &[("src/reader.rs", &reader)],
    );
    add_crate(s, "chrono", "0.4.41", None, &[("src/format.rs", &format)]);
    add_crate(
        s,
        "aardvark",
        "1.0.0",
        Some("MIT"),
        &[
            ("src/csv/reader.rs", &lightly_edited(&reader)),
            ("src/time/format.rs", &format),
            ("src/lib.rs", &functions(13, 40)),
        ],
    );
    let out = TempDir::new().unwrap();
    let manifest = build(&options(s), out.path()).unwrap();
    assert_eq!(kept(&manifest), ["aardvark 1.0.0"]);
    let details: Vec<_> = manifest
        .dropped_files
        .iter()
        .map(|f| {
            let detail = f.detail.as_deref().unwrap();
            format!(
                "{} {:?} {}",
                f.path,
                f.reason,
                &detail[..detail.find(" (").unwrap_or(detail.len())]
            )
        })
        .collect();
    assert_eq!(
        details,
        [
            "src/csv/reader.rs HeldOutCopy near copy of held-out csv-core/src/reader.rs",
            "src/time/format.rs HeldOutCopy same as held-out chrono/src/format.rs"
        ]
    );
    assert_eq!(train_paths(out.path()), ["src/lib.rs"]);
}

#[test]
fn held_out_files_claim_their_text_whatever_the_file_filters_say() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    // pulldown-cmark's `entities.rs` says `Autogenerated`: a corpus crate's file would be dropped
    // for it, but a held-out crate's still claims its text, so the same table shipped without
    // the marker (html-escape's `tables.rs`) stays out too.
    let table = functions(21, 40);
    add_crate(
        s,
        "pulldown-cmark",
        "0.9.6",
        Some("MIT"),
        &[(
            "src/entities.rs",
            &format!("// Autogenerated by mk_entities.py\n{table}"),
        )],
    );
    add_crate(
        s,
        "aardvark",
        "1.0.0",
        Some("MIT"),
        &[
            ("src/tables.rs", &format!("// Entity table.\n{table}")),
            ("src/lib.rs", &functions(22, 40)),
        ],
    );
    let out = TempDir::new().unwrap();
    let manifest = build(&options(s), out.path()).unwrap();
    let dropped: Vec<_> = manifest
        .dropped_files
        .iter()
        .map(|f| format!("{} {:?}", f.path, f.reason))
        .collect();
    assert_eq!(dropped, ["src/tables.rs HeldOutCopy"]);
    assert_eq!(train_paths(out.path()), ["src/lib.rs"]);
}

#[test]
fn files_sharing_a_passage_of_held_out_code_stay_out_of_the_corpus() {
    let source = TempDir::new().unwrap();
    let s = source.path();
    let held_out = functions(41, 40);
    add_crate(
        s,
        "textwrap",
        "0.16.0",
        Some("MIT"),
        &[("src/lib.rs", &held_out)],
    );
    // Four of its 40 functions (about 150 code tokens), re-indented and with a comment added
    // between two copied lines, in the middle of a file of the crate's own code: far from a near
    // copy of the held-out file, but its text all the same.
    let lines: Vec<&str> = held_out.lines().collect();
    let copied: Vec<String> = lines[6 * 10..6 * 14]
        .iter()
        .enumerate()
        .map(|(i, line)| match i {
            8 => format!("\t{}\n// Taken from textwrap.", line.trim()),
            _ => format!("\t{}", line.trim()),
        })
        .collect();
    let with_passage = format!(
        "{}{}\n{}",
        functions(42, 20),
        copied.join("\n"),
        functions(43, 20)
    );
    // What every serde `Deserializer` and every error type has: short idioms, and a long table
    // of zeros with nothing else in it.
    let idioms = "    forward_to_deserialize_any! {\n        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string\n        bytes byte_buf option unit unit_struct newtype_struct seq tuple\n        tuple_struct map struct enum identifier ignored_any\n    }\n";
    let display = "impl fmt::Display for Error {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        match self {\n            Error::Io(e) => write!(f, \"I/O error: {}\", e),\n            Error::Utf8(e) => write!(f, \"invalid UTF-8: {}\", e),\n        }\n    }\n}\n";
    let table = format!("static TABLE: [u8; 256] = [{}];\n", "0, ".repeat(256));
    add_crate(
        s,
        "csv",
        "1.4.0",
        Some("MIT"),
        &[("src/error.rs", &format!("{display}{table}{idioms}"))],
    );
    let with_idioms = format!(
        "{}{display}{}{table}{}{idioms}{}",
        functions(44, 10),
        functions(45, 10),
        functions(46, 10),
        functions(47, 10)
    );
    add_crate(
        s,
        "aardvark",
        "1.0.0",
        Some("MIT"),
        &[
            ("src/wrap.rs", &with_passage),
            ("src/de.rs", &with_idioms),
            ("src/lib.rs", &functions(48, 40)),
        ],
    );
    let out = TempDir::new().unwrap();
    let manifest = build(&options(s), out.path()).unwrap();
    let dropped: Vec<_> = manifest
        .dropped_files
        .iter()
        .map(|f| format!("{} {:?} {}", f.path, f.reason, f.detail.as_deref().unwrap()))
        .collect();
    // 4 functions of 37 tokens, the `}` before them and the `pub fn` after.
    assert_eq!(
        dropped,
        ["src/wrap.rs HeldOutPassage shares 151 consecutive code tokens with held-out textwrap/src/lib.rs (0.16.0)"]
    );
    let tally = manifest.stats.files_dropped[&FileDropReason::HeldOutPassage];
    assert_eq!((tally.files, tally.bytes), (1, with_passage.len() as u64));
    assert_eq!(train_paths(out.path()), ["src/de.rs", "src/lib.rs"]);
    assert_eq!(manifest.held_out_passage_tokens, HELD_OUT_PASSAGE_TOKENS);

    // Text read elsewhere (next edits' earlier versions) is checked by the same rule.
    let code = HeldOutCode::read(&options(s)).unwrap();
    assert_eq!(code.files(), 2);
    let shared = code.shared_passage(&with_passage).unwrap();
    assert_eq!(
        (shared.tokens, shared.source.as_str()),
        (151, "textwrap/src/lib.rs (0.16.0)")
    );
    assert_eq!(code.shared_passage(&with_idioms), None);
    assert_eq!(HeldOutCode::none().shared_passage(&with_passage), None);
}
