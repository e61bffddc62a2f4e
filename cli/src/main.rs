//! `redraft`: AI inline completion and next edits backed by a masked-diffusion language model.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};

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
    let command = Cli::command().mut_subcommands(|sub| sub.mut_args(negative_values));
    let cli = Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|error| error.exit());
    let done = match cli.command {
        Top::Shipped(command) => redraft::run(command),
        Top::Other(args) => redraft::lab::hand_over(&args),
    };
    redraft::finish(done)
}

/// A flag's value may be a negative number (`--seed -1`, `--min-confidence -0.1`), so that the
/// flag's own parser says what it takes; clap would otherwise read `-1` as an unknown flag
/// (`unexpected argument '-1' found`).
fn negative_values(arg: clap::Arg) -> clap::Arg {
    if arg.get_action().takes_values() {
        arg.allow_negative_numbers(true)
    } else {
        arg
    }
}
