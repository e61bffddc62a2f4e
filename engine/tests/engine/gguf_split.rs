//! Split GGUF checkpoints (`llama-gguf-split`'s `NAME-00001-of-00002.gguf`, ...): loaded from
//! their first part, the others found beside it, the same model as the one file; a later part,
//! a missing part, a tensor in two parts and parts named otherwise are clear errors.

use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;
use redraft_engine::gguf::GgufWriter;
use redraft_engine::Engine;

use super::gguf::{default_tensors, logits, model_gguf};

/// The default model as Q8_0, one file, and its tensors' names.
fn whole() -> (GgufWriter, Vec<String>) {
    let (config, tensors) = default_tensors();
    let mut gguf = model_gguf("dream", &config, &tensors, GgmlDType::Q8_0);
    let names = gguf.tensors_mut().iter().map(|(n, _)| n.clone()).collect();
    (gguf, names)
}

/// `parts` written into `dir` as `NAME-0000i-of-0000n.gguf`: part i holds the tensors
/// `holds(i, name)` says, and states `split.no` and `split.count`.
fn write_parts(dir: &Path, name: &str, parts: u16, holds: impl Fn(u16, &str) -> bool) {
    let (_, names) = whole();
    for no in 0..parts {
        let mut part = whole()
            .0
            .set("split.no", Value::U16(no))
            .set("split.count", Value::U16(parts));
        for tensor in names.iter().filter(|n| !holds(no, n)) {
            part = part.without(tensor);
        }
        let file = format!("{name}-{:05}-of-{parts:05}.gguf", no + 1);
        part.write(&dir.join(file)).unwrap();
    }
}

/// Even layers' tensors in the first part, the rest in the second (the embedding among them).
fn by_layer(no: u16, name: &str) -> bool {
    let layer = name
        .strip_prefix("blk.")
        .and_then(|rest| rest.split('.').next())
        .and_then(|n| n.parse::<u16>().ok());
    match layer {
        Some(layer) => layer % 2 == no,
        None => no == 1,
    }
}

/// [`by_layer`]'s layers in the first two of three parts, the other tensors in the third.
fn in_three(no: u16, name: &str) -> bool {
    if name.starts_with("blk.") {
        no < 2 && by_layer(no, name)
    } else {
        no == 2
    }
}

#[test]
fn a_split_gguf_is_the_model_its_one_file_is() {
    let dir = tempfile::tempdir().unwrap();
    whole().0.write(&dir.path().join("one.gguf")).unwrap();
    write_parts(dir.path(), "m-Q8_0", 2, by_layer);
    let one = Engine::load(&dir.path().join("one.gguf")).unwrap();
    let split = Engine::load(&dir.path().join("m-Q8_0-00001-of-00002.gguf")).unwrap();
    assert!(split.model().is_quantized());
    let ids = one.tokenizer().encode("fn add(a: u32) -> u32 {").unwrap();
    assert_eq!(logits(&one, &ids), logits(&split, &ids));
    assert_eq!(one.settings(), split.settings());
}

#[test]
fn split_ggufs_that_cannot_load_say_why() {
    let err = |path: &Path| match Engine::load(path) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(err) => err.to_string(),
    };
    let dir = tempfile::tempdir().unwrap();
    write_parts(dir.path(), "m", 3, in_three);
    let first = dir.path().join("m-00001-of-00003.gguf");
    // A later part names the first.
    let msg = err(&dir.path().join("m-00002-of-00003.gguf"));
    assert!(
        msg.contains("part 2 of a GGUF split into 3 files")
            && msg.contains(&first.display().to_string()),
        "{msg}"
    );
    // A part missing.
    std::fs::remove_file(dir.path().join("m-00003-of-00003.gguf")).unwrap();
    let msg = err(&first);
    assert!(
        msg.contains("a part of this split GGUF is missing") && msg.contains("m-00003-of-00003"),
        "{msg}"
    );
    // A first part not named as llama.cpp names parts: the others cannot be found.
    let renamed = dir.path().join("model.gguf");
    std::fs::copy(&first, &renamed).unwrap();
    let msg = err(&renamed);
    assert!(
        msg.contains("not named as llama.cpp names the parts"),
        "{msg}"
    );

    // A tensor in two parts.
    let dir = tempfile::tempdir().unwrap();
    write_parts(dir.path(), "m", 2, |no, name| {
        by_layer(no, name) || name == "blk.0.attn_q.weight"
    });
    let msg = err(&dir.path().join("m-00001-of-00002.gguf"));
    assert!(
        msg.contains("tensor `blk.0.attn_q.weight` is in two parts"),
        "{msg}"
    );
}

/// A directory is loaded from the one GGUF it holds: a split file's parts count once, and a
/// `config.json` beside the file (a checkpoint converted in place) does not make it a
/// safetensors directory unless its weights are there (it was "model.safetensors is missing").
#[test]
fn a_directory_loads_its_one_gguf_split_or_beside_a_config() {
    let dir = tempfile::tempdir().unwrap();
    write_parts(dir.path(), "m", 3, in_three);
    let first = dir.path().join("m-00001-of-00003.gguf");
    assert_eq!(Engine::load(dir.path()).unwrap().dir(), first.as_path());

    let small = super::gguf::small_model();
    std::fs::copy(small.join("config.json"), dir.path().join("config.json")).unwrap();
    assert_eq!(Engine::load(dir.path()).unwrap().dir(), first.as_path());
    // With the checkpoint's weights and tokenizer there, the directory is the checkpoint.
    for file in ["model.safetensors", "tokenizer.json", "redraft.json"] {
        std::fs::copy(small.join(file), dir.path().join(file)).unwrap();
    }
    assert_eq!(Engine::load(dir.path()).unwrap().dir(), dir.path());

    // Two files (not parts of one): which is meant is not guessed.
    let dir = tempfile::tempdir().unwrap();
    whole().0.write(&dir.path().join("a.gguf")).unwrap();
    whole().0.write(&dir.path().join("b.gguf")).unwrap();
    let msg = Engine::load(dir.path()).err().unwrap().to_string();
    assert!(
        msg.contains("holds 2 GGUF files: name the one to load")
            && !msg.contains("invalid request"),
        "{msg}"
    );
}
