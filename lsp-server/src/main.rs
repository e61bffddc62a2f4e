//! `redraft`: AI inline completion backed by a masked-diffusion language model.
//!
//! One binary, one subcommand per file: `complete` fills a middle from the command line,
//! `bench` measures the engine on this machine, `train` trains a model.

mod bench;
mod complete;
mod default_model;
mod lsp;
mod malloc;
mod train;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "redraft", version, about = "masked-diffusion code completion")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fill in the middle at a cursor (or between a prefix and a suffix) and print it.
    Complete(complete::Args),
    /// Measure forward passes, cached steps and end-to-end latency against PyTorch.
    Bench(bench::Args),
    /// Train a masked-diffusion code model on a built corpus into a model directory.
    Train(train::Args),
    /// Run the language server on stdin/stdout (inline completion for editors).
    Lsp(lsp::Args),
}

fn main() -> anyhow::Result<()> {
    malloc::tune();
    match Cli::parse().command {
        Command::Complete(args) => complete::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Train(args) => train::run(args),
        Command::Lsp(args) => lsp::run(args),
    }
}
