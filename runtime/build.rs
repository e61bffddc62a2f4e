//! Which form the embedded default model (`assets/default-model`) takes: `model.gguf` (the
//! shipped form of a model trained on a GPU: Q8_0 blocks, read in place) sets the
//! `embedded_gguf` cfg; `model.safetensors` with `config.json` does not. Exactly one of the two
//! must be there.

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"))
        .join("../assets/default-model");
    // A directory: cargo reruns when any file in it changes, is added or goes.
    println!("cargo::rerun-if-changed={}", dir.display());
    println!("cargo::rustc-check-cfg=cfg(embedded_gguf)");
    let gguf = dir.join("model.gguf").exists();
    let safetensors = dir.join("model.safetensors").exists();
    match (gguf, safetensors) {
        (true, false) => println!("cargo::rustc-cfg=embedded_gguf"),
        (false, true) => {}
        (true, true) => panic!(
            "{} holds both model.gguf and model.safetensors: the default model is one of them \
             (scripts/ship-model writes model.gguf and removes the other)",
            dir.display()
        ),
        (false, false) => panic!(
            "{} holds no model.gguf or model.safetensors: the repository is incomplete",
            dir.display()
        ),
    }
}
