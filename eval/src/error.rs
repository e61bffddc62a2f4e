//! The eval library's errors: bad input and a broken set-up are errors; a wrong, looping or
//! memory-hungry program under test is not (it is an [`crate::score::Outcome`]).

use std::path::{Path, PathBuf};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Input { path: PathBuf, message: String },
    #[error("task `{task_id}` has no `language` field and its id does not say: pass --language rust|python")]
    UnknownLanguage { task_id: String },
    #[error("the Rust crates programs link against are not set up ({}): run scripts/setup-eval, or point REDRAFT_EVAL_DEPS at its output directory", looked.display())]
    RustDepsMissing { looked: PathBuf },
    #[error("{what}: {message}")]
    Toolchain { what: String, message: String },
    #[error("could not run `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Engine(#[from] redraft_engine::Error),
    /// A remote backend (`--backend`) gave no middle for a task.
    #[error("task `{task_id}`: {message}")]
    Backend { task_id: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
