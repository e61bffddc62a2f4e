//! The commands of the `redraft` binary, the one editors start: `complete` fills a middle from
//! the command line, `lsp` serves editors over LSP (`redraft-lsp`), `serve` over HTTP
//! (`redraft-http`), `convert` writes a model as one GGUF file, `pull` and `models` fetch and
//! list models by name (`redraft-models`). All of them run suggestions
//! through the one runtime (`redraft-runtime`).
//!
//! The developer commands (`train`, `eval`, `bench`, `score`) are in the `redraft-lab` binary,
//! which also offers every command here; `redraft train ...` hands over to a `redraft-lab`
//! found beside the running binary or on `PATH` ([`lab`]).

pub mod complete;
pub mod convert;
pub mod lab;
pub mod malloc;
pub mod models;

use std::process::ExitCode;

use clap::Subcommand;

/// The commands an editor or a user of the shipped binary runs.
#[derive(Subcommand)]
pub enum Command {
    /// Fill in the middle at a cursor (or between a prefix and a suffix) and print it.
    Complete(complete::Args),
    /// Run the language server on stdin/stdout (inline completion for editors).
    Lsp(redraft_lsp::Args),
    /// Serve completions and next edits over HTTP (OpenAI-, Ollama- and Mercury-shaped APIs).
    Serve(redraft_http::Args),
    /// Write a model as one GGUF file, its matrices quantized (q8_0, q4_k, ...) or not.
    Convert(convert::Args),
    /// Download a model (`hf:ORG/REPO[:QUANT]`, `hf:ORG/REPO/FILE.gguf`) into the Hugging Face hub
    /// cache, or check an Ollama one (`ollama:NAME[:TAG]`); runs nothing.
    Pull(models::PullArgs),
    /// List the models available here: the embedded one, the Hugging Face hub cache and
    /// Ollama's store, with what each is and whether redraft runs it.
    Models(models::ListArgs),
}

/// Runs one command to its end; the exit status is the language server's (the protocol's
/// `exit`) or success.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    let done = match command {
        Command::Complete(args) => complete::run(args),
        Command::Serve(args) => redraft_http::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Pull(args) => models::pull(args),
        Command::Models(args) => models::list(args),
        Command::Lsp(args) => return redraft_lsp::run(args),
    };
    done.map(|()| ExitCode::SUCCESS)
}
