//! `redraft-lab` end to end, one binary (one link on 2 cores): remote backends (`backend`), FIM
//! and next-edit evaluation (`eval`, `eval_next_edit`; `eval_model`: a run tied to its model),
//! GGUF conversion and scoring (`gguf`), llama.cpp parity (`llama_parity`), training (`train`)
//! and training from a GGUF (`train_init`); and how its errors are printed (here).

mod backend;
mod eval;
mod eval_model;
mod eval_next_edit;
mod gguf;
mod llama_parity;
mod train;
mod train_init;

/// A developer command's error is printed as `redraft` prints one, for its own commands and
/// the shipped ones it offers too: `Error: ` and each cause once, no backtrace, whatever
/// `RUST_BACKTRACE` says (anyhow's `main` printed a stack under it), exit 1.
#[test]
fn errors_are_printed_as_redraft_prints_them() {
    let env = [("RUST_BACKTRACE", Some("1".to_string()))];
    let runs = [
        vec!["logprobs", "--model", "/nonexistent/model", "--text", "x"],
        vec!["complete", "--file", "/", "--line", "1", "--column", "1"],
    ];
    for args in runs {
        let out = redraft_tests::cli::lab_in(&env, &args, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("Error: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("acktrace"), "{args:?}: {stderr}");
    }
}
