//! Model names turned into local files, the way llama.cpp's `-hf`, Ollama and huggingface_hub
//! do it, sharing their caches.
//!
//! # API
//!
//! - [`Resolver::new`]`(`[`Settings`]`)` / [`Resolver::from_env`]: one resolver per settings;
//!   its HTTP client is made on first use, so cached names never make one.
//! - [`Resolver::resolve`]`(name, progress)` -> [`ResolvedModel`] `{ path, format }`: the
//!   cache first, the Hub for what is missing (unless offline).
//! - [`Resolver::pull`]`(name, progress)`: asks the Hub where the revision is now, even when
//!   the cache has an older commit, and fetches again a cached file whose size is not the
//!   Hub's (cut short by a full disk or a killed copy) (for `redraft pull`).
//! - [`Resolver::list_local`]`()` -> [`LocalModel`]s `{ name, format, size, path }`: the Hub
//!   cache's snapshots and Ollama's models, each under a name that resolves back to it;
//!   [`Resolver::scan_local`]`()` -> [`LocalScan`] `{ models, skipped }` adds what was passed
//!   over and why ([`Skipped`] `{ path, why }`: a link to a deleted blob, a download never
//!   finished, a manifest naming a missing blob, ...).
//! - [`ModelName::parse`]: names without resolving them (for validating settings).
//! - [`Progress`] (`start(file, total)`, `advance(bytes)`, `finish()`, and `resume(bytes)`,
//!   `waiting(file)` with defaults): implemented by [`TerminalProgress`] (a bar on a terminal,
//!   plain lines otherwise, on stderr) and [`Messages`]; the LSP server sends the latter's as
//!   `$/progress`. [`NoProgress`] reports nothing.
//! - [`Error`]: every failure, with a message that says what to do next; [`Result`].
//! - [`resolve`] and [`list_local`]: the same with [`Settings::from_env`].
//!
//! Blocking: call it from a plain thread or `spawn_blocking`, never on an async runtime's
//! worker (reqwest's blocking client refuses to be made or dropped there).
//!
//! ```no_run
//! use redraft_models::{Resolver, TerminalProgress};
//!
//! let resolver = Resolver::from_env();
//! let model = resolver.resolve("hf:bartowski/Qwen2.5-Coder-0.5B-GGUF:Q4_K_M", &mut TerminalProgress::new())?;
//! println!("{} ({:?})", model.path.display(), model.format);
//! for local in resolver.list_local() {
//!     println!("{}\t{}", local.name, local.path.display());
//! }
//! # Ok::<(), redraft_models::Error>(())
//! ```
//!
//! # Names
//!
//! | name | resolves to |
//! |---|---|
//! | an existing path | itself (a GGUF file, or a model directory) |
//! | `hf:ORG/REPO` | the snapshot directory of a safetensors checkpoint: `config.json`, `tokenizer.json`, `model.safetensors` (or `model.safetensors.index.json` and every shard it names), and `tokenizer_config.json`, `generation_config.json`, `special_tokens_map.json`, `redraft.json` when the repository has them. A repository with only GGUF files gives the GGUF llama.cpp would pick without a tag |
//! | `hf:ORG/REPO:QUANT` | one GGUF file, picked as llama.cpp's `-hf ORG/REPO:QUANT` does: the first (in name order) whose path holds `QUANT.` or `QUANT-`, case-insensitive, skipping `mmproj`, `imatrix` and draft-head files; without a tag Q4_K_M, then Q8_0, then the first GGUF. A tag is letters, digits, `_` and `-` (`UD-Q4_K_XL`). A split GGUF (`-00001-of-00003.gguf`) fetches every part and resolves to the first |
//! | `hf:ORG/REPO/FILE.gguf` | that GGUF file (and its other parts, if split) |
//! | `...@REVISION` | any `hf:` form at a branch, tag or commit (default `main`) |
//! | `ollama:NAME[:TAG]` | the GGUF blob `ollama pull NAME:TAG` stored, read in place (`NAME` is `x`, `library/x`, `user/x` or `host/ns/x`; tag `latest` by default). Never downloads |
//!
//! A `redraft.json` beside a GGUF in its repository is fetched too (the engine reads it there).
//! `hf:ORG/REPO/` (a repository's address, copied) is `hf:ORG/REPO`.
//!
//! # Environment
//!
//! [`Settings::from_env`] reads what huggingface_hub and Ollama read: `HF_HUB_CACHE` /
//! `HF_HOME` (the cache), `HF_ENDPOINT`, `HF_TOKEN` (or the token file `hf auth login` writes;
//! sent only to the endpoint's origin, never to the CDN it redirects to, and redacted from
//! every `Debug`: [`HfToken`]), `HF_HUB_OFFLINE` (cache only: a missing file is an error
//! naming it and the repository and revision) and `OLLAMA_MODELS`. As in huggingface_hub, a
//! leading `~` and `$VAR` in the Hugging Face paths are expanded; `HOME` unset, the home
//! directory is the user database's.
//!
//! # The Hub cache
//!
//! Downloads go to the Hugging Face hub cache in huggingface_hub's own layout, so a model
//! fetched by transformers, `hf download` or llama.cpp is found here, with no request at all
//! when its revision's ref exists and the snapshot has every needed file, and what redraft
//! fetches is theirs too:
//!
//! ```text
//! <cache>/models--ORG--REPO/blobs/<etag>                 file contents, named by ETag (the
//!                                                        sha256 for LFS files, the git blob sha
//!                                                        for small ones)
//! <cache>/models--ORG--REPO/blobs/<etag>.incomplete      a download in progress
//! <cache>/models--ORG--REPO/snapshots/<commit>/<path>    relative symlink to ../../blobs/<etag>
//! <cache>/models--ORG--REPO/refs/<revision>              the commit the revision was at
//! <cache>/.locks/models--ORG--REPO/<etag>.lock           held while the blob downloads
//! ```
//!
//! The Hub is asked three things: `GET {endpoint}/api/models/{repo}/revision/{rev}` (the
//! commit and the file list), `HEAD {endpoint}/{repo}/resolve/{commit}/{path}` for each missing
//! file (its `X-Linked-Etag` or `ETag`, `X-Linked-Size`, and the CDN location when the answer
//! is a redirect, whose own headers count), and a `GET` of that location. The API's redirects
//! (a renamed repository) are followed, the token going to the endpoint's origin only; a busy
//! answer (429, 5xx) is asked again up to 3 times after its `Retry-After` (at most 30 s; a
//! longer one ends in [`Error::Busy`] saying it).
//!
//! # Downloads
//!
//! - **Lock**: the blob's lock file is locked exclusively (`flock`, as huggingface_hub's
//!   `filelock` does, so the two tools exclude each other) for the whole download; a second
//!   process or thread says it waits ([`Progress::waiting`]), waits, then finds the blob in
//!   place and fetches nothing. Under the lock, a blob already there whose size is not the
//!   Hub's (cut short by another tool) is removed and fetched again.
//! - **Resume**: bytes gather in `blobs/<etag>.incomplete` (huggingface_hub's name). A
//!   download that finds one asks for the rest with `Range: bytes=N-` and appends; a server
//!   that answers 200 instead of 206 sends the whole file, so the partial file is emptied
//!   first. A connection that breaks mid-way is resumed the same way a few times before the
//!   error, and the partial file stays for the next run, which says it resumes
//!   ([`Progress::resume`]). A write that fails (a full disk) keeps it too.
//! - **Verify**: for an LFS file (its ETag is a sha256), the sha256 is computed while writing,
//!   over the resumed prefix too, and compared before the file enters the cache; a mismatch,
//!   or more bytes than the Hub announced, deletes the partial file and names the file in the
//!   error.
//! - **Place**: only a verified file is renamed to `blobs/<etag>` (atomic within a directory),
//!   and only then is the snapshot link made, and `refs/<revision>` written once every file is
//!   in place; a killed download leaves at most the `.incomplete` file, which nothing loads.
//!
//! Only safetensors, GGUF, JSON and tokenizer files (`tokenizer.model`, `*.txt`) are ever
//! downloaded. Pickled weights (`*.bin`, `*.pt`, `*.pth`, `*.pkl`, `*.ckpt`) are refused
//! because unpickling can execute code, and code files (`*.py`, ...) because nothing from a
//! model repository is ever executed; a checkpoint with only pickled weights is an error that
//! says so. Paths the server names are checked to stay inside the snapshot.
//!
//! # Why not the `hf-hub` crate
//!
//! `hf-hub` (what candle's examples use) was evaluated first. Version 1.0 is async-first and
//! depends on reqwest with its default TLS (aws-lc-rs, a C/CMake build redraft avoids: it runs
//! rustls on ring) and on `hf-xet`'s large tree; its plain-HTTP download neither resumes a
//! partial blob with a `Range` request nor checks the sha256 of what it wrote before moving it
//! into the cache, and it has no file-kind policy or offline switch of its own. The protocol
//! needed here is the three calls above, so this crate speaks it with the workspace's reqwest
//! (blocking, rustls on ring) and `sha2`.

mod cache;
mod download;
mod error;
mod hf;
mod hub;
mod list;
mod name;
mod ollama;
mod plan;
mod progress;
mod settings;

use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

pub use error::{Error, Refusal, Result};
pub use list::{LocalModel, LocalScan, Skipped};
pub use name::{
    HfName, HfTarget, ModelName, OllamaName, DEFAULT_OLLAMA_HOST, DEFAULT_OLLAMA_TAG,
    DEFAULT_REVISION,
};
pub use progress::{human_bytes, Messages, NoProgress, Progress, TerminalProgress};
pub use settings::{HfToken, Settings, DEFAULT_ENDPOINT};

/// What a name resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedModel {
    /// A GGUF file (the first part of a split one) or a checkpoint directory.
    pub path: PathBuf,
    pub format: ModelFormat,
}

/// The kind of files a model is stored as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelFormat {
    /// One GGUF file (llama.cpp's format), or a directory holding one.
    Gguf,
    /// A directory with `config.json`, `tokenizer.json` and safetensors weights.
    SafetensorsDir,
}

/// Resolves names with one set of [`Settings`]; the HTTP client is made on first use, so a
/// resolver that only meets cached names never makes one.
pub struct Resolver {
    settings: Settings,
    hub: OnceLock<hub::Hub>,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Resolver {
    pub fn new(settings: Settings) -> Resolver {
        Resolver {
            settings,
            hub: OnceLock::new(),
        }
    }

    /// A resolver with [`Settings::from_env`].
    pub fn from_env() -> Resolver {
        Resolver::new(Settings::from_env())
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Parses `name` and resolves it (see [`Resolver::resolve_name`]).
    pub fn resolve(&self, name: &str, progress: &mut dyn Progress) -> Result<ResolvedModel> {
        self.resolve_name(&ModelName::parse(name)?, progress)
    }

    /// Local files for `name`: a path as it is, an Ollama blob in place, a `hf:` name from the
    /// cache when its snapshot is complete, else downloaded (unless offline).
    pub fn resolve_name(
        &self,
        name: &ModelName,
        progress: &mut dyn Progress,
    ) -> Result<ResolvedModel> {
        self.resolve_with(name, false, progress)
    }

    /// Like [`Resolver::resolve_name`], but a `hf:` name always asks the Hub which commit its
    /// revision is at now, fetches what that commit adds, and fetches again each cached file
    /// whose size differs from the Hub's (so pulling again repairs a damaged cache; for
    /// `redraft pull`). Offline, it is the same as `resolve_name`.
    pub fn pull(&self, name: &ModelName, progress: &mut dyn Progress) -> Result<ResolvedModel> {
        self.resolve_with(name, true, progress)
    }

    /// Every model already on disk: Hub cache snapshots, then Ollama's store.
    pub fn list_local(&self) -> Vec<LocalModel> {
        self.scan_local().models
    }

    /// [`Resolver::list_local`]'s models, and what was passed over: a link to a deleted blob,
    /// a split GGUF missing a part, safetensors without their config or tokenizer, a download
    /// never finished, an Ollama manifest that does not resolve, a cache folder no name
    /// reaches. Never fails: what cannot be read is one more [`Skipped`].
    pub fn scan_local(&self) -> LocalScan {
        let mut scan = LocalScan::default();
        list::hub_models(&self.settings.hub_cache, &mut scan);
        list::ollama_models(&self.settings.ollama_models, &mut scan);
        scan
    }

    fn resolve_with(
        &self,
        name: &ModelName,
        refresh: bool,
        progress: &mut dyn Progress,
    ) -> Result<ResolvedModel> {
        match name {
            ModelName::Path(path) => resolve_path(path),
            ModelName::Ollama(name) => {
                let path = ollama::resolve(&self.settings.ollama_models, name)?;
                Ok(ResolvedModel {
                    path,
                    format: ModelFormat::Gguf,
                })
            }
            ModelName::Hf(name) => {
                if !refresh || self.settings.offline {
                    match hf::from_cache(&self.settings, name) {
                        Ok(resolved) => return Ok(resolved),
                        Err(missing) if self.settings.offline => {
                            return Err(Error::Offline {
                                repo: name.repo.clone(),
                                revision: name.revision.clone(),
                                missing,
                                cache: self.settings.hub_cache.clone(),
                            })
                        }
                        Err(_) => {}
                    }
                }
                hf::from_hub(self.hub()?, &self.settings, name, refresh, progress)
            }
        }
    }

    fn hub(&self) -> Result<&hub::Hub> {
        if let Some(hub) = self.hub.get() {
            return Ok(hub);
        }
        let hub = hub::Hub::new(&self.settings)?;
        Ok(self.hub.get_or_init(|| hub))
    }
}

fn resolve_path(path: &std::path::Path) -> Result<ResolvedModel> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io("read", path, e))?;
    // A directory without safetensors weights but with a GGUF in it is a GGUF model (the
    // engine loads the file it holds, a config.json beside it or not).
    let safetensors = [plan::WEIGHTS_FILE, plan::WEIGHTS_INDEX_FILE];
    let gguf_dir = || !safetensors.iter().any(|f| path.join(f).exists()) && has_gguf(path);
    let format = if meta.is_file() || gguf_dir() {
        ModelFormat::Gguf
    } else {
        ModelFormat::SafetensorsDir
    };
    Ok(ResolvedModel {
        path: path.to_path_buf(),
        format,
    })
}

fn has_gguf(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_str().is_some_and(plan::is_gguf))
    })
}

/// [`Resolver::resolve`] with [`Settings::from_env`].
pub fn resolve(name: &str, progress: &mut dyn Progress) -> Result<ResolvedModel> {
    Resolver::from_env().resolve(name, progress)
}

/// [`Resolver::list_local`] with [`Settings::from_env`].
pub fn list_local() -> Vec<LocalModel> {
    Resolver::from_env().list_local()
}
