//! `redraft convert`'s `--out`, as a careless or hostile command line gives it: an existing GGUF
//! is replaced, but a directory, a device or pipe, a missing directory or a file of the model
//! being converted is refused before the model is read, with nothing written.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use redraft_tests::cli::{ok, path, redraft, repo};

/// `redraft convert ARGS`'s stderr, which must be a refusal (exit status 1) saying `says`.
fn refused(args: &[&str], says: &str) {
    let out = redraft(&[&["convert"][..], args].concat(), "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
}

#[test]
fn out_that_is_not_a_file_to_replace_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    // A socket stands for a device or a pipe: before, it was renamed over (as root, `--out
    // /dev/null` replaced the device with the GGUF).
    let socket = dir.path().join("model.gguf");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    refused(&["--out", path(&socket)], "it is not a regular file");
    assert!(std::fs::metadata(&socket).unwrap().file_type().is_socket());

    refused(
        &["--out", path(dir.path())],
        &format!(
            "it is a directory; name the file to write (like --out {})",
            dir.path().join("model.gguf").display()
        ),
    );
    let missing = dir.path().join("missing/deeper/x.gguf");
    refused(
        &["--out", path(&missing)],
        "does not exist; create it first (mkdir -p",
    );
    assert!(!dir.path().join("missing").exists());
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(entries.len(), 1, "nothing but the socket: {entries:?}");
}

#[test]
fn out_naming_a_file_of_the_model_being_converted_is_refused() {
    let model = tempfile::tempdir().unwrap();
    let fixture = repo().join("fixtures/small-model");
    for file in [
        "config.json",
        "redraft.json",
        "tokenizer.json",
        "model.safetensors",
    ] {
        std::fs::copy(fixture.join(file), model.path().join(file)).unwrap();
    }
    let weights = std::fs::read(model.path().join("model.safetensors")).unwrap();
    for file in ["model.safetensors", "tokenizer.json"] {
        refused(
            &[
                "--model",
                path(model.path()),
                "--out",
                path(&model.path().join(file)),
            ],
            "it is a file of the model being converted",
        );
    }
    assert_eq!(
        std::fs::read(model.path().join("model.safetensors")).unwrap(),
        weights
    );
    // A GGUF beside the model's files is fine, and written again is replaced.
    let gguf = model.path().join("model-f16.gguf");
    let convert = |to: &Path| {
        ok(redraft(
            &[
                "convert",
                "--model",
                path(model.path()),
                "--out",
                path(to),
                "--type",
                "f16",
            ],
            "",
        ))
    };
    convert(&gguf);
    std::fs::write(&gguf, b"an older file").unwrap();
    convert(&gguf);
    assert_eq!(&std::fs::read(&gguf).unwrap()[..4], b"GGUF");
}

/// `redraft convert --model fixtures/small-model --out OUT --type TYPE`, run to its end.
fn convert_small(out: &Path, dtype: &str) -> std::process::Output {
    let fixture = repo().join("fixtures/small-model");
    redraft(
        &[
            "convert",
            "--model",
            path(&fixture),
            "--out",
            path(out),
            "--type",
            dtype,
        ],
        "",
    )
}

/// The file is written under a name of this run's own and renamed over --out: what is already
/// beside --out is left alone, a link where the writer used to put its temporary file
/// (`OUT.tmp`) is not written through, a user's own `OUT.tmp` is not deleted, a link at --out
/// is replaced rather than written through, and nothing is left behind.
#[test]
fn files_beside_out_are_left_alone_and_a_link_is_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let out = dir.path().join("w.gguf");
    let planted = dir.path().join("w.gguf.tmp");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    ok(convert_small(&out, "f16"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
    assert_eq!(&std::fs::read(&out).unwrap()[..4], b"GGUF");
    assert!(std::fs::symlink_metadata(&planted).unwrap().is_symlink());

    let own = dir.path().join("x.gguf.tmp");
    std::fs::write(&own, "mine").unwrap();
    ok(convert_small(&dir.path().join("x.gguf"), "f16"));
    assert_eq!(std::fs::read_to_string(&own).unwrap(), "mine");

    let linked = dir.path().join("l.gguf");
    std::os::unix::fs::symlink(&victim, &linked).unwrap();
    ok(convert_small(&linked, "f16"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(std::fs::symlink_metadata(&linked).unwrap().is_file());

    // Readable as a file the user made is (0644 under the usual umask), not owner-only as a
    // temporary file is made.
    use std::os::unix::fs::PermissionsExt;
    let made = dir.path().join("made-by-hand");
    std::fs::File::create(&made).unwrap();
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode();
    assert_eq!(mode(&out) & 0o777, mode(&made) & 0o777);
    std::fs::remove_file(&made).unwrap();

    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "l.gguf",
            "victim.txt",
            "w.gguf",
            "w.gguf.tmp",
            "x.gguf",
            "x.gguf.tmp"
        ],
        "nothing left behind"
    );
}

/// Conversions to one --out at once each write their own file: all succeed, and what is
/// left is one whole GGUF, byte for byte what one conversion writes (before, they all wrote
/// one `OUT.tmp`: a rename after another's failed, or the file was several interleaved; a
/// race, so without the fix this fails most runs, not every one).
#[test]
fn conversions_to_one_out_at_once_do_not_write_into_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("alone.gguf");
    ok(convert_small(&alone, "q8_0"));
    let out = dir.path().join("shared.gguf");
    let runs: Vec<_> = (0..3)
        .map(|_| {
            let out = out.clone();
            std::thread::spawn(move || convert_small(&out, "q8_0"))
        })
        .collect();
    for run in runs {
        ok(run.join().unwrap());
    }
    assert!(
        std::fs::read(&out).unwrap() == std::fs::read(&alone).unwrap(),
        "the file is one conversion's"
    );
}

/// The report says how many matrices got the type asked for and what the others got: the
/// small model's widths are not multiples of Q4_K's 256-value blocks but two, so its file is
/// mostly F32 (and bigger than an F16 one), which the report must not hide behind `Q4_K`.
#[test]
fn the_report_says_what_type_each_matrix_got() {
    let dir = tempfile::tempdir().unwrap();
    let stderr = |dtype: &str| {
        let out = convert_small(&dir.path().join(format!("{dtype}.gguf")), dtype);
        assert!(out.status.success(), "{dtype}");
        String::from_utf8(out.stderr).unwrap()
    };
    let q4 = stderr("q4_k");
    assert!(
        q4.contains("2 of 15 matrices Q4_K, 13 F32 (widths that Q4_K's 256-value blocks do not divide stay F32)"),
        "{q4}"
    );
    assert!(!q4.contains("Q4K"), "{q4}");
    let q8 = stderr("q8_0");
    assert!(
        q8.contains(
            "): 15 matrices Q8_0
"
        ),
        "{q8}"
    );
}

/// A stderr that cannot take the report (`2>/dev/full`) does not undo the work: the file is
/// written and the exit status is 0.
#[test]
fn a_stderr_that_cannot_take_the_report_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.gguf");
    let fixture = repo().join("fixtures/small-model");
    let status = std::process::Command::new(redraft_tests::cli::redraft_binary())
        .args(["convert", "--model", path(&fixture), "--out", path(&out)])
        .stderr(std::fs::File::create("/dev/full").unwrap())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(&std::fs::read(&out).unwrap()[..4], b"GGUF");
}

/// A model that is not there, or a directory without its tokenizer, is said as `complete` says
/// it (it was "/nonexistent/config.json is missing", and "reading .../tokenizer.json: No such
/// file or directory" after the weights were read).
#[test]
fn a_missing_model_or_tokenizer_is_named_as_a_load_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.gguf");
    let missing = dir.path().join("nowhere/model");
    refused(
        &["--model", path(&missing), "--out", path(&out)],
        &format!("no such file or directory: {}", missing.display()),
    );
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    for file in ["config.json", "model.safetensors", "redraft.json"] {
        let from = repo().join("fixtures/small-model").join(file);
        std::fs::copy(from, model.join(file)).unwrap();
    }
    refused(
        &["--model", path(&model), "--out", path(&out)],
        "tokenizer.json is missing: a model directory needs a tokenizer (tokenizer.json)",
    );
    assert!(!out.exists());
}
