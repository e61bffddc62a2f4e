//! A flag's value found wrong after clap read it: a mistake on the command line all the same.

/// A flag's value found wrong once the flags are read together (`--kv-heads` that does not
/// divide `--heads`) or by the code that takes it (`redraft serve --allow-origin '*'`): a
/// mistake on the command line of `command` (`redraft-lab train`, whose flags are `A`), a
/// [`clap::Error`] with the command's usage, which the binaries (`redraft::finish`) say as clap
/// says its own and end with exit status 2.
pub fn flag_error<A: clap::Args>(
    command: &'static str,
    message: impl std::fmt::Display,
) -> anyhow::Error {
    let mut command = A::augment_args(clap::Command::new(command));
    command
        .error(
            clap::error::ErrorKind::ValueValidation,
            format!("{message:#}"),
        )
        .into()
}
