//! `redraft train|eval|tasks|bench|logprobs ...`: the developer commands live in the `redraft-lab`
//! binary, so the one an editor starts links no training, eval sandbox or benchmark code. A
//! user who types one here is handed over to `redraft-lab` with the same arguments.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::Context;

/// The subcommands `redraft-lab` adds to `redraft`'s.
pub const LAB_COMMANDS: [&str; 6] = [
    "train", "eval", "tasks", "bench", "logprobs", // `score`: logprobs' old name, still taken
    "score",
];

/// The lab binary's file name.
const LAB: &str = "redraft-lab";

/// Runs `redraft-lab ARGS` (found beside this binary, else on `PATH`) when `args[0]` is a lab
/// command and returns its status; any other name is an unknown command, a mistake on the
/// command line (exit status 2, as clap's own).
pub fn hand_over(args: &[OsString]) -> anyhow::Result<ExitCode> {
    let name = args
        .first()
        .map(|a| a.to_string_lossy())
        .unwrap_or_default();
    if !LAB_COMMANDS.contains(&name.as_ref()) {
        let message = format!(
            "unknown command `{name}`: redraft's commands are complete, lsp, serve, convert, pull and models (see `redraft --help`); the developer commands {} are in redraft-lab\n",
            LAB_COMMANDS.join(", ")
        );
        return Err(clap::Error::raw(clap::error::ErrorKind::InvalidSubcommand, message).into());
    }
    let lab = find_lab().with_context(|| {
        format!(
            "`redraft {name}` is a developer command of redraft-lab, which is not installed beside {} nor on PATH: build it with `cargo build --release -p redraft-lab` and run `redraft-lab {name} ...`",
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "redraft".into())
        )
    })?;
    let status = Command::new(&lab)
        .args(args)
        .status()
        .with_context(|| format!("running {}", lab.display()))?;
    Ok(match status.code() {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// `redraft-lab` in this binary's directory, else the first on `PATH`.
fn find_lab() -> Option<PathBuf> {
    let file = format!("{LAB}{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&file)));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(&file));
    beside.into_iter().chain(on_path).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::hand_over;

    /// A command redraft does not have is a mistake on the command line, exit status 2, as
    /// `redraft --bogus` is.
    #[test]
    fn an_unknown_command_is_a_command_line_mistake() {
        let error = hand_over(&["bogus".into()]).unwrap_err();
        let mistake = error
            .downcast_ref::<clap::Error>()
            .expect("said as clap says its mistakes");
        assert_eq!(mistake.exit_code(), 2);
        assert!(
            mistake.to_string().contains("unknown command `bogus`"),
            "{mistake}"
        );
    }
}
