//! `redraft-lab`: the developer binary. Every command of `redraft` (complete, lsp, serve,
//! convert) plus the ones an editor never runs: `train` trains a model, `eval` scores
//! completions and next edits on benchmarks, `tasks` builds its task sets, `bench` measures the
//! engine's speed, `logprobs` prints a text's log-probabilities.

mod bench;
mod eval;
mod logprobs;
mod tasks;
mod train;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "redraft-lab",
    version,
    about = "redraft's developer commands: training, evaluation, benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once, at start: boxing the larger flag sets would buy nothing (the sizes differ by
// target: aarch64's clippy sees a gap x86_64's does not).
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Measure forward passes, cached steps and end-to-end latency against PyTorch.
    Bench(bench::Args),
    /// Score fill-in-the-middle completions on a benchmark (by execution where it has tests).
    Eval(eval::Args),
    /// Build FIM task sets for `eval`: HumanEvalPack-Rust cuts, or cuts of any Rust tree
    /// (--from-dir). (Was `bench build`.)
    Tasks(tasks::Args),
    /// Train a masked-diffusion code model on a built corpus into a model directory.
    Train(train::Args),
    /// Print the model's log-probabilities over a text, a JSON line per position (parity
    /// checks against llama.cpp, prefill speed). (Was `score`, which still works.)
    #[command(alias = "score")]
    Logprobs(logprobs::Args),
    #[command(flatten)]
    Shipped(redraft::Command),
}

fn main() -> ExitCode {
    redraft::malloc::tune();
    let done = match Cli::parse().command {
        Command::Tasks(args) => tasks::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Train(args) => train::run(args),
        Command::Logprobs(args) => logprobs::run(args),
        Command::Shipped(command) => return redraft::finish(redraft::run(command)),
    };
    // An error said as `redraft` says one (each cause once, no backtrace), with its status.
    redraft::finish(done.map(|()| ExitCode::SUCCESS))
}
