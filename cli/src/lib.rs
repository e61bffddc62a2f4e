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

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Subcommand;
use redraft_runtime::stderr_line;

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
/// `exit`) or success. An error is the caller's to say, with its exit status ([`finish`]);
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

/// The exit status of a command that ran ([`run`], or a `redraft-lab` command), its error said
/// on stderr: 0 when it did its work, and when whoever read its standard output stopped reading
/// (`redraft models | head -1`: a closed pipe ends it quietly, as it ends git or ripgrep); 2 for
/// a command line found wrong once its flags were read together ([`flag_error`]), said as clap
/// says its own mistakes; else 1, the error said as [`report`] says it. Nothing more can be said
/// when stderr itself cannot be written (`2>/dev/full`): the status still tells.
pub fn finish(done: anyhow::Result<ExitCode>) -> ExitCode {
    let error = match done {
        Ok(status) => return status,
        Err(error) => error,
    };
    if let Some(mistake) = error.downcast_ref::<clap::Error>() {
        let _ = mistake.print();
        return ExitCode::from(u8::try_from(mistake.exit_code()).unwrap_or(2));
    }
    let closed = error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<StdoutError>())
        .any(|e| e.0.kind() == io::ErrorKind::BrokenPipe);
    if closed {
        return ExitCode::SUCCESS;
    }
    stderr_line(format_args!("{}", report(&error)));
    ExitCode::FAILURE
}

pub use redraft_runtime::flag_error;

/// Writes a command's results to standard output: `write` gets it locked and buffered, and it
/// is flushed at the end. A failure to write (a full disk, a closed pipe) is an error
/// ([`StdoutError`]), not `println!`'s panic; [`finish`] ends a closed pipe quietly.
pub fn to_stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    write(&mut out)
        .and_then(|()| out.flush())
        .map_err(|source| StdoutError(source).into())
}

/// Standard output could not be written.
#[derive(Debug)]
pub struct StdoutError(io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write to standard output: {}", self.0)
    }
}

impl std::error::Error for StdoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
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
    use std::io;
    use std::process::ExitCode;

    use super::{finish, flag_error, report, StdoutError};

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

    /// A mistake found once the flags are read together exits 2, as clap's own; stdout closed
    /// by its reader ends quietly; any other failure, a closed pipe that is not stdout's
    /// included (a child's stdin), is an error, exit 1.
    #[test]
    fn the_exit_status_says_what_ended_the_command() {
        let mistake = flag_error::<super::models::ListArgs>("redraft models", "no such thing");
        assert_eq!(finish(Err(mistake)), ExitCode::from(2));
        let closed = StdoutError(io::Error::from(io::ErrorKind::BrokenPipe));
        let closed = anyhow::Error::new(closed).context("listing");
        assert_eq!(finish(Err(closed)), ExitCode::SUCCESS);
        let full = StdoutError(io::Error::from(io::ErrorKind::StorageFull));
        assert_eq!(finish(Err(full.into())), ExitCode::FAILURE);
        let child = anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!(finish(Err(child)), ExitCode::FAILURE);
        assert_eq!(finish(Ok(ExitCode::from(3))), ExitCode::from(3));
    }
}
