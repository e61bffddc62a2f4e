//! `redraft`: AI inline completion backed by a masked-diffusion language model.
//!
//! One binary, one subcommand per file: `complete` fills a middle from the command line,
//! `bench` measures the engine on this machine (`bench build` makes eval task sets), `eval`
//! scores completions on benchmarks, `train` trains a model, `lsp` serves editors over LSP,
//! `serve` over HTTP, `score` prints a text's log-probabilities.

mod backend;
mod bench;
mod bench_build;
mod complete;
mod convert;
mod default_model;
mod eval;
mod fim_template;
mod lsp;
mod malloc;
mod sampler_args;
mod score;
mod serve;
mod train;

use std::process::ExitCode;

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
    /// Measure forward passes, cached steps and end-to-end latency against PyTorch; `bench
    /// build` makes task sets for `eval`.
    Bench(BenchArgs),
    /// Score fill-in-the-middle completions on a benchmark (by execution where it has tests).
    Eval(eval::Args),
    /// Train a masked-diffusion code model on a built corpus into a model directory.
    Train(train::Args),
    /// Run the language server on stdin/stdout (inline completion for editors).
    Lsp(lsp::Args),
    /// Serve completions and next edits over HTTP (OpenAI-, Ollama- and Mercury-shaped APIs).
    Serve(serve::Args),
    /// Write a model as one GGUF file, its matrices quantized (q8_0, q4_k, ...) or not.
    Convert(convert::Args),
    /// Print the model's log-probabilities over a text, a JSON line per position (parity
    /// checks against llama.cpp, prefill speed).
    Score(score::Args),
}

/// `redraft bench [FLAGS]` is the speed benchmark; `redraft bench build ...` builds task sets.
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
    malloc::tune();
    let done = match Cli::parse().command {
        Command::Complete(args) => complete::run(args),
        Command::Bench(BenchArgs {
            command: Some(BenchCommand::Build(args)),
            ..
        }) => bench_build::run(args),
        Command::Bench(args) => bench::run(args.speed),
        Command::Eval(args) => eval::run(args),
        Command::Train(args) => train::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Score(args) => score::run(args),
        Command::Convert(args) => convert::run(args),
        // The language server's status says how the session ended (the protocol's `exit`).
        Command::Lsp(args) => return lsp::run(args),
    };
    done.map(|()| ExitCode::SUCCESS)
}
