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
