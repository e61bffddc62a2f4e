//! The crate's one error type: every way a model name can fail to become local files.
//!
//! Messages are lowercase, name the file, repository and revision involved, and say what to
//! do next. None of them ever contains the Hugging Face token: requests carry it in a header,
//! and no variant holds a header or a request.

use std::path::PathBuf;

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a name could not be resolved or a file could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not an existing path and not a `hf:` or `ollama:` name.
    #[error(
        "`{name}` is neither an existing path nor a model name; give one of:\n  \
         a path to a GGUF file or a model directory\n  \
         hf:ORG/REPO[@REVISION] (a safetensors checkpoint from the Hugging Face Hub)\n  \
         hf:ORG/REPO:QUANT[@REVISION] or hf:ORG/REPO/FILE.gguf[@REVISION] (one GGUF file)\n  \
         ollama:NAME[:TAG] (a model `ollama pull` has fetched)"
    )]
    UnknownName { name: String },

    /// A `hf:` or `ollama:` name that does not parse.
    #[error("`{name}` is not a valid model name: {reason}")]
    InvalidName { name: String, reason: String },

    /// `HF_ENDPOINT` (where the Hub is) is set to something that is not a URL.
    #[error(
        "HF_ENDPOINT is `{value}`, which is not a URL ({reason}); set it to the Hub's address \
         (https://huggingface.co or a mirror's) or unset it"
    )]
    InvalidEndpoint { value: String, reason: String },

    /// A file redraft will not download, whatever the repository says.
    #[error("refusing to download {file} from {repo}: {reason}")]
    Refused {
        repo: String,
        file: String,
        reason: Refusal,
    },

    /// A checkpoint whose only weights are pickled.
    #[error(
        "{repo}@{revision} has only pickled weights ({files}); pickled weights can execute code \
         when loaded, so redraft never downloads them: use a repository that has \
         model.safetensors or a .gguf file"
    )]
    OnlyPickledWeights {
        repo: String,
        revision: String,
        files: String,
    },

    /// A repository with neither safetensors weights nor a GGUF file.
    #[error(
        "{repo}@{revision} has no model.safetensors, model.safetensors.index.json or .gguf file; \
         check the name on the Hub"
    )]
    NoWeights { repo: String, revision: String },

    /// A file the checkpoint needs is not in the repository.
    #[error("{repo}@{revision} has no {file}, which redraft needs to load the model")]
    MissingFile {
        repo: String,
        revision: String,
        file: String,
    },

    /// No GGUF file in the repository matches the asked quantization (or file name).
    #[error("{repo}@{revision} has no GGUF file matching `{wanted}`; its GGUF files: {available}")]
    NoMatchingGguf {
        repo: String,
        revision: String,
        wanted: String,
        available: String,
    },

    /// `HF_HUB_OFFLINE` is set and the Hub cache lacks something.
    #[error(
        "HF_HUB_OFFLINE is set and {missing} of {repo}@{revision} is not in the Hugging Face \
         cache ({cache}); unset HF_HUB_OFFLINE to download it"
    )]
    Offline {
        repo: String,
        revision: String,
        missing: String,
        cache: PathBuf,
    },

    /// The repository or revision does not exist (or is private and no token was sent).
    #[error("{repo}@{revision} was not found on {endpoint}{hint}")]
    NotFound {
        repo: String,
        revision: String,
        endpoint: String,
        hint: &'static str,
    },

    /// The Hub refused access (gated or private repository, or a token it does not accept).
    #[error("{endpoint} refused access to {repo} ({status}{detail}){hint}")]
    Unauthorized {
        repo: String,
        endpoint: String,
        status: u16,
        /// The Hub's own `X-Error-Message`, after `: `, or empty.
        detail: String,
        hint: &'static str,
    },

    /// The server stayed busy (429, 5xx) through the retries, or asked for a long wait.
    #[error("{url} answered {status}{advice}")]
    Busy {
        url: String,
        status: u16,
        advice: String,
    },

    /// Any other unexpected HTTP status.
    #[error("{url} answered {status}{detail}")]
    Http {
        url: String,
        status: u16,
        detail: String,
    },

    /// The request did not get an answer (DNS, connection, TLS, timeout).
    #[error("could not reach {url}: {message}; check the network, HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use the cache only")]
    Network { url: String, message: String },

    /// The server's answer lacks what the Hub protocol promises.
    #[error("unexpected answer from {url}: {what}")]
    Malformed { url: String, what: String },

    /// The connection broke before the whole file arrived (after retries).
    #[error("the download of {file} from {repo} stopped at {got} of {expected} bytes ({message}); run again to resume it")]
    Interrupted {
        repo: String,
        file: String,
        got: u64,
        expected: String,
        message: String,
    },

    /// The downloaded bytes do not hash to the sha256 the Hub names the file by.
    #[error(
        "{file} from {repo} is corrupt: its sha256 is {actual}, the Hub says {expected}; the \
         partial download was deleted, run again to download it afresh"
    )]
    Checksum {
        repo: String,
        file: String,
        expected: String,
        actual: String,
    },

    /// The download has a different size than the Hub announced.
    #[error(
        "{file} from {repo} has {actual} bytes, the Hub says {expected}; the partial download \
         was deleted, run again to download it afresh"
    )]
    SizeMismatch {
        repo: String,
        file: String,
        expected: u64,
        actual: u64,
    },

    /// No manifest for an `ollama:` name.
    #[error(
        "ollama model {name} is not pulled (no manifest at {manifest}); run `ollama pull {name}` \
         first, or set OLLAMA_MODELS to the store that has it"
    )]
    OllamaNotPulled { name: String, manifest: PathBuf },

    /// Ollama's store (`OLLAMA_MODELS`) is something other than a directory.
    #[error(
        "ollama's model store {store} is not a directory; set OLLAMA_MODELS to the directory \
         holding Ollama's manifests/ and blobs/ (by default ~/.ollama/models), or unset it"
    )]
    OllamaStoreNotDir { store: PathBuf },

    /// An Ollama manifest without a model layer.
    #[error(
        "ollama manifest {manifest} has no layer of type application/vnd.ollama.image.model; \
         {name} is not a model redraft can load"
    )]
    OllamaNoModelLayer { name: String, manifest: PathBuf },

    /// An Ollama manifest that is not the JSON Ollama writes.
    #[error(
        "ollama manifest {manifest} is unreadable: {what}; run `ollama pull {name}` again (or \
         `ollama rm {name}`)"
    )]
    OllamaManifest {
        name: String,
        manifest: PathBuf,
        what: String,
    },

    /// The manifest names a blob that is not in the store.
    #[error(
        "ollama model {name} names blob {blob}, which is missing; run `ollama pull {name}` again"
    )]
    OllamaBlobMissing { name: String, blob: PathBuf },

    /// Writing to the Hugging Face cache failed (a full disk, a cache that is a file, read-only
    /// or not the user's); the advice says which.
    #[error("could not {action} {path}: {source}; {advice}")]
    CacheWrite {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
        advice: &'static str,
    },

    /// A file-system operation failed.
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A failed write into the Hub cache, with what to do about it.
    pub(crate) fn cache_write(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        use std::io::ErrorKind;
        let advice = match source.kind() {
            ErrorKind::StorageFull | ErrorKind::FileTooLarge | ErrorKind::QuotaExceeded => {
                "free some space (or set HF_HUB_CACHE to a disk with room) and run again: the \
                 download resumes where it stopped"
            }
            _ => {
                "the Hugging Face cache must be a directory redraft can write: set HF_HUB_CACHE \
                 (or HF_HOME) to one"
            }
        };
        Error::CacheWrite {
            action,
            path: path.into(),
            source,
            advice,
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Why a file is refused: nothing from a model repository is ever executed or unpickled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `*.bin`, `*.pt`, `*.pth`, `*.pkl`, `*.ckpt`, ...: Python pickles.
    Pickle,
    /// `*.py`, shell scripts and other code.
    Code,
    /// Anything else that is not weights, JSON or tokenizer data.
    NotModelData,
    /// A path that would leave the snapshot directory (`..`, absolute, backslashes).
    UnsafePath,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Pickle => {
                "it holds pickled weights, which can execute code when loaded; redraft only \
                 downloads safetensors and GGUF weights"
            }
            Refusal::Code => {
                "it is code, and nothing from a model repository is ever executed; redraft \
                 only downloads weights, JSON and tokenizer files"
            }
            Refusal::NotModelData => {
                "redraft only downloads safetensors and GGUF weights, JSON and tokenizer files"
            }
            Refusal::UnsafePath => "its path would leave the snapshot directory",
        })
    }
}
