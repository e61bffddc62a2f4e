//! The one-way layering of ARCHITECTURE.md, checked on the real dependency graph
//! (rust-analyzer checks its own the same way).

use std::process::Command;

/// Every package `package` depends on (normal and build edges, not dev), by name.
fn dependencies(package: &str) -> Vec<String> {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "-p",
            package,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn engine_knows_nothing_of_editors_or_async() {
    let deps = dependencies("redraft-engine");
    assert!(
        deps.iter().any(|d| d == "candle-core"),
        "sanity: the tree was read"
    );
    for forbidden in [
        "tokio",
        "tower-lsp-server",
        "ls-types",
        "ropey",
        "tree-sitter",
        "tree-sitter-rust",
        // Training sits above the engine: the inference crate never pulls it in.
        "redraft-train",
    ] {
        assert!(
            !deps.iter().any(|d| d == forbidden),
            "redraft-engine depends on {forbidden}"
        );
    }
}

#[test]
fn context_layer_knows_neither_the_model_nor_the_protocol() {
    let deps = dependencies("redraft-context");
    assert!(
        deps.iter().any(|d| d == "tree-sitter"),
        "sanity: the tree was read"
    );
    for forbidden in [
        "redraft-engine",
        "redraft-train",
        "candle-core",
        "tokenizers",
        "tokio",
        "tower-lsp-server",
        "ls-types",
    ] {
        assert!(
            !deps.iter().any(|d| d == forbidden),
            "redraft-context depends on {forbidden}"
        );
    }
}

#[test]
fn eval_knows_nothing_of_the_protocol() {
    // `redraft eval` reaches the model through the engine and the context layer only, as the
    // language server does; it never goes through (or copies) the server.
    let deps = dependencies("redraft-eval");
    assert!(
        deps.iter().any(|d| d == "redraft-context"),
        "sanity: the tree was read"
    );
    for forbidden in ["redraft", "tokio", "tower-lsp-server", "ls-types", "ropey"] {
        assert!(
            !deps.iter().any(|d| d == forbidden),
            "redraft-eval depends on {forbidden}"
        );
    }
}

#[test]
fn training_sits_on_the_engine_and_knows_nothing_of_editors() {
    // Corpus building, next-edit data and the training loop may use the engine and the context
    // layer (tree-sitter included), never the server, the eval harness or an async runtime.
    let deps = dependencies("redraft-train");
    assert!(
        deps.iter().any(|d| d == "redraft-engine"),
        "sanity: the tree was read"
    );
    for forbidden in [
        "redraft",
        "redraft-eval",
        "tokio",
        "tower-lsp-server",
        "ls-types",
        "ropey",
    ] {
        assert!(
            !deps.iter().any(|d| d == forbidden),
            "redraft-train depends on {forbidden}"
        );
    }
}

#[test]
fn the_suggestion_pipeline_has_no_protocol_in_it() {
    // One pipeline behind every front door (LSP, HTTP, eval): it sits on the engine and the
    // context layer and knows no protocol, runtime or harness.
    let deps = dependencies("redraft-suggest");
    assert!(
        deps.iter().any(|d| d == "redraft-engine") && deps.iter().any(|d| d == "redraft-context"),
        "sanity: the tree was read"
    );
    for forbidden in [
        "redraft",
        "redraft-eval",
        "redraft-train",
        "tokio",
        "tower-lsp-server",
        "ls-types",
        "ropey",
        "axum",
        "hyper",
    ] {
        assert!(
            !deps.iter().any(|d| d == forbidden),
            "redraft-suggest depends on {forbidden}"
        );
    }
}
