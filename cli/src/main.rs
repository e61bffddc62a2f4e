//! `redraft`: AI inline completion and next edits backed by a masked-diffusion language model.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "redraft",
    version,
    about = "masked-diffusion code completion",
    after_help = "Developer commands (train, eval, tasks, bench, logprobs) are in redraft-lab: `redraft train ...` runs it when it is installed beside redraft."
)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

// Parsed once at start-up: the size of the commands' arguments does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand)]
enum Top {
    #[command(flatten)]
    Shipped(redraft::Command),
    #[command(external_subcommand)]
    Other(Vec<OsString>),
}

fn main() -> ExitCode {
    redraft::malloc::tune();
    let done = match Cli::parse().command {
        Top::Shipped(command) => redraft::run(command),
        Top::Other(args) => redraft::lab::hand_over(&args),
    };
    redraft::finish(done)
}
