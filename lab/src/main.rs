//! `redraft-lab`: the developer binary. Every command of `redraft` (complete, lsp, serve,
//! convert) plus the ones an editor never runs: `train` trains a model, `eval` scores
//! completions and next edits on benchmarks, `bench` measures the engine (`bench build` makes
//! eval task sets), `score` prints a text's log-probabilities.

mod bench;
mod bench_build;
mod eval;
mod score;
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

#[derive(Subcommand)]
enum Command {
    /// Measure forward passes, cached steps and end-to-end latency against PyTorch; `bench
    /// build` makes task sets for `eval`.
    Bench(BenchArgs),
    /// Score fill-in-the-middle completions on a benchmark (by execution where it has tests).
    Eval(eval::Args),
    /// Train a masked-diffusion code model on a built corpus into a model directory.
    Train(train::Args),
    /// Print the model's log-probabilities over a text, a JSON line per position (parity
    /// checks against llama.cpp, prefill speed).
    Score(score::Args),
    #[command(flatten)]
    Shipped(redraft::Command),
}

/// `redraft-lab bench [FLAGS]` is the speed benchmark; `redraft-lab bench build ...` builds task
/// sets.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    #[command(flatten)]
    speed: bench::Args,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Build FIM task sets: HumanEvalPack-Rust cuts, or cuts of any Rust tree (--from-dir).
    Build(bench_build::Args),
}

fn main() -> anyhow::Result<ExitCode> {
    redraft::malloc::tune();
    let done = match Cli::parse().command {
        Command::Bench(BenchArgs {
            command: Some(BenchCommand::Build(args)),
            ..
        }) => bench_build::run(args),
        Command::Bench(args) => bench::run(args.speed),
        Command::Eval(args) => eval::run(args),
        Command::Train(args) => train::run(args),
        Command::Score(args) => score::run(args),
        Command::Shipped(command) => return redraft::run(command),
    };
    done.map(|()| ExitCode::SUCCESS)
}
