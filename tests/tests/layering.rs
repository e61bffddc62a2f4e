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
        // Nor the model downloader (an HTTP client): the engine reads files it is given.
        "redraft-models",
    ] {
        assert!(
            !deps.iter().any(|d| d == forbidden),
            "redraft-engine depends on {forbidden}"
        );
    }
}

#[test]
fn prompt_layouts_depend_on_nothing() {
    // Text only: the engine, the context layer, the trainers and the HTTP parser all sit above
    // the one definition of each layout, so none may be pulled into it.
    let deps = dependencies("redraft-prompts");
    assert_eq!(
        deps,
        ["redraft-prompts"],
        "redraft-prompts has dependencies"
    );
    for user in [
        "redraft-engine",
        "redraft-context",
        "redraft-runtime",
        "redraft-http",
        "redraft-train",
    ] {
        assert!(
            dependencies(user).iter().any(|d| d == "redraft-prompts"),
            "{user} writes or reads prompts without redraft-prompts"
        );
    }
}

#[test]
fn kernels_know_no_tensor_library_and_no_redraft_crate() {
    // Plain slices in, plain slices out: the engine wraps them as candle ops, training calls
    // them directly, and they depend on neither (nor on anything above them).
    let deps = dependencies("redraft-kernels");
    assert!(
        deps.iter().any(|d| d == "gemm"),
        "sanity: the tree was read"
    );
    let above: Vec<&String> = deps
        .iter()
        .filter(|d| {
            (d.starts_with("redraft") && *d != "redraft-kernels") || d.starts_with("candle")
        })
        .collect();
    assert!(above.is_empty(), "redraft-kernels depends on {above:?}");
    // The engine reaches the CPU kernels through the crate (none are its own any more).
    assert!(
        dependencies("redraft-engine")
            .iter()
            .any(|d| d == "redraft-kernels"),
        "redraft-engine runs its CPU kernels from redraft-kernels"
    );
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
    for forbidden in [
        "redraft",
        "redraft-runtime",
        "tokio",
        "tower-lsp-server",
        "ls-types",
        "ropey",
    ] {
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

/// `package` depends on none of `forbidden` (and, as a check that the tree was read, on
/// `present`).
fn assert_layer(package: &str, present: &str, forbidden: &[&str]) {
    let deps = dependencies(package);
    assert!(
        deps.iter().any(|d| d == present),
        "sanity: the tree of {package} was read"
    );
    for forbidden in forbidden {
        assert!(
            !deps.iter().any(|d| d == forbidden),
            "{package} depends on {forbidden}"
        );
    }
}

#[test]
fn the_runtime_knows_no_door_and_no_lab() {
    // The one runtime sits on the pipeline; the doors sit on it, never it on them.
    assert_layer(
        "redraft-runtime",
        "redraft-suggest",
        &[
            "redraft",
            "redraft-lsp",
            "redraft-http",
            "redraft-eval",
            "redraft-train",
            "tower-lsp-server",
            "axum",
        ],
    );
}

#[test]
fn each_door_holds_its_protocol_only() {
    // The LSP and HTTP servers are adapters over the runtime: neither knows the other, the
    // lab, or the command line.
    let lab = ["redraft", "redraft-eval", "redraft-train", "redraft-lab"];
    let lsp: Vec<&str> = lab
        .iter()
        .copied()
        .chain(["redraft-http", "axum"])
        .collect();
    assert_layer("redraft-lsp", "redraft-runtime", &lsp);
    let http: Vec<&str> = lab
        .iter()
        .copied()
        .chain(["redraft-lsp", "tower-lsp-server"])
        .collect();
    assert_layer("redraft-http", "redraft-runtime", &http);
}

#[test]
fn the_shipped_binary_links_no_lab() {
    // What an editor starts (`redraft`) has no training, eval sandbox or benchmarks in it:
    // those are `redraft-lab`'s, which sits on top of everything.
    assert_layer(
        "redraft",
        "redraft-runtime",
        &["redraft-eval", "redraft-train", "redraft-lab"],
    );
    assert_layer("redraft-lab", "redraft-train", &[]);
}
