//! Typed errors of the engine: every failure names the file, tensor or setting at fault.

use std::path::PathBuf;

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while loading a checkpoint or running the model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is missing: a model directory needs {what}")]
    MissingFile { path: PathBuf, what: &'static str },
    /// The model path itself does not exist.
    #[error("no such file or directory: {path}")]
    NotFound { path: PathBuf },
    /// The model path is a file, but not a GGUF file.
    #[error(
        "{path} is neither a GGUF file nor a model directory: name a GGUF file, a directory \
         holding one, or a directory with config.json, model.safetensors (or \
         model.safetensors.index.json and its shards) and tokenizer.json"
    )]
    NotAModel { path: PathBuf },
    /// A directory holding several GGUF files (split parts counted once) and no safetensors
    /// weights: which one is meant is not guessed.
    #[error("{path} holds {count} GGUF files: name the one to load ({}{}FILE.gguf)", path.display(), std::path::MAIN_SEPARATOR)]
    SeveralGgufs { path: PathBuf, count: usize },
    #[error("{path} is not valid JSON for {what}: {message}")]
    BadJson {
        path: PathBuf,
        what: &'static str,
        message: String,
    },
    #[error("unsupported model config in {path}: {message}")]
    UnsupportedConfig { path: PathBuf, message: String },
    #[error("{path} is not a readable safetensors file (truncated or corrupt?): {message}")]
    CorruptWeights { path: PathBuf, message: String },
    #[error("{path} is not a readable GGUF file (truncated or corrupt?): {message}")]
    CorruptGguf { path: PathBuf, message: String },
    #[error("tensor `{name}` is missing from the checkpoint ({searched})")]
    MissingTensor { name: String, searched: String },
    #[error("tensor `{name}` in {path} has shape {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        path: PathBuf,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("tensor `{name}` in {path} has dtype {dtype}, which is not supported (use f32, f16 or bf16)")]
    TensorDtype {
        name: String,
        path: PathBuf,
        dtype: String,
    },
    #[error("diffusion setting `{setting}` is missing: {hint}")]
    MissingSetting { setting: &'static str, hint: String },
    #[error("diffusion setting `{setting}` is contradictory: {message}")]
    ContradictorySetting {
        setting: &'static str,
        message: String,
    },
    #[error("tokenizer {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("device: {0}")]
    Device(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("cancelled")]
    Cancelled,
    #[error("model computation failed: {0}")]
    Candle(#[from] candle_core::Error),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// What a caught panic said (its message, when it was a string): the one reading of a panic's
/// payload, for the places that turn a panic into an error.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}
