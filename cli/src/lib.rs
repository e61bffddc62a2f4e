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
/// `exit`) or success. An error is the caller's to print ([`report`]) with exit status 1;
/// clap's own errors (the command line itself is wrong) exit with 2 before this runs.
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

/// An error as the binaries print it: `Error: ` and the message, then the causes the message
/// does not already say. No backtrace, whatever `RUST_BACKTRACE` says: an error here is a
/// user's input or environment, never a bug (a bug panics, and a panic keeps its backtrace).
/// Many errors below (`std::io` wrapped by a library's own error) repeat their source in their
/// message, which would otherwise be printed twice.
pub fn report(error: &anyhow::Error) -> String {
    let mut causes: Vec<String> = Vec::new();
    let mut last = error.to_string();
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        if !last.contains(&text) {
            causes.push(text.clone());
        }
        last = text;
    }
    let mut text = format!("Error: {error}");
    match causes.as_slice() {
        [] => {}
        [cause] => text.push_str(&format!("\n\nCaused by:\n    {cause}")),
        causes => {
            text.push_str("\n\nCaused by:");
            for (i, cause) in causes.iter().enumerate() {
                text.push_str(&format!("\n    {i}: {cause}"));
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::report;

    /// What `std::io` errors wrapped by a thiserror `{source}` message look like: the source
    /// is also in the message.
    #[derive(Debug)]
    struct Repeats(std::io::Error);

    impl std::fmt::Display for Repeats {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "could not read x: {}", self.0)
        }
    }

    impl std::error::Error for Repeats {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_report_says_each_cause_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let error = anyhow::Error::new(Repeats(io)).context("pulling y");
        assert_eq!(
            report(&error),
            "Error: pulling y\n\nCaused by:\n    could not read x: entity not found"
        );
        let plain = anyhow::anyhow!("b").context("a").context("top");
        assert_eq!(
            report(&plain),
            "Error: top\n\nCaused by:\n    0: a\n    1: b"
        );
        assert_eq!(report(&anyhow::anyhow!("alone")), "Error: alone");
    }
}
