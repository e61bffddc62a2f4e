//! The default model (`assets/default-model`, trained by this project: see its README),
//! compiled into the binary so redraft works offline with no set-up.

use std::path::{Path, PathBuf};

use anyhow::Context;
use candle_core::Device;
use redraft_engine::engine::{ModelFiles, WeightsFile};
use redraft_engine::{DeviceSpec, Engine};

/// Where the embedded files came from, for error messages and `--json` reports.
pub const ORIGIN: &str = "<embedded>/assets/default-model";

pub const FILES: ModelFiles = ModelFiles {
    origin: ORIGIN,
    weights: WEIGHTS,
    redraft: Some(include_str!("../../assets/default-model/redraft.json")),
    tokenizer: include_bytes!("../../assets/default-model/tokenizer.json"),
};

/// `model.gguf`, read in place: GGUF aligns each tensor to 32 bytes within the file, so the
/// file itself starts on a 32-byte boundary here.
#[cfg(embedded_gguf)]
const WEIGHTS: WeightsFile = {
    #[repr(C, align(32))]
    struct Aligned<T: ?Sized>(T);
    static GGUF: &Aligned<[u8]> =
        &Aligned(*include_bytes!("../../assets/default-model/model.gguf"));
    WeightsFile::Gguf(&GGUF.0)
};

#[cfg(not(embedded_gguf))]
const WEIGHTS: WeightsFile = WeightsFile::Safetensors {
    config: include_str!("../../assets/default-model/config.json"),
    weights: include_bytes!("../../assets/default-model/model.safetensors"),
};

fn load_on(device: &Device) -> anyhow::Result<Engine> {
    Engine::from_files_on(&FILES, device).context("loading the embedded default model")
}

/// `--model` (a path or a model name, [`locate`]) if given, else the embedded default model,
/// on `device`.
pub fn load_or_default(model: Option<&Path>, device: DeviceSpec) -> anyhow::Result<Engine> {
    load_or_default_reporting(model, device, &mut redraft_models::TerminalProgress::new())
}

/// [`load_or_default`], reporting a named model's downloads to `progress`.
pub fn load_or_default_reporting(
    model: Option<&Path>,
    device: DeviceSpec,
    progress: &mut dyn redraft_models::Progress,
) -> anyhow::Result<Engine> {
    let device = device.resolve()?;
    match model {
        Some(model) => {
            let loaded = load_dir(&locate_reporting(model, progress)?, &device);
            with_repair_hint(model, loaded)
        }
        None => load_on(&device),
    }
}

/// A model found and read, not yet built: what [`check_reporting`] gives [`load_checked`].
pub struct Checked {
    /// The model's files; `None`: the embedded default.
    pub dir: Option<PathBuf>,
    device: Device,
}

/// The part of a load that needs no memory for the model: the device, the model found
/// (downloaded, for a name) and its header, tensor extents, configuration and tokenizer read,
/// no tensor (`redraft_engine::engine::inspect`). A model that fails here leaves whatever is
/// loaded serving; [`load_checked`] then builds it.
pub fn check_reporting(
    model: Option<&Path>,
    device: DeviceSpec,
    progress: &mut dyn redraft_models::Progress,
) -> anyhow::Result<Checked> {
    let device = device.resolve()?;
    let dir = match model {
        Some(model) => {
            let dir = locate_reporting(model, progress)?;
            let checked = unpanicked(|| Ok(redraft_engine::engine::inspect(&dir)?))
                .with_context(|| format!("loading the model from {}", dir.display()));
            with_repair_hint(model, checked)?;
            Some(dir)
        }
        None => None,
    };
    Ok(Checked { dir, device })
}

/// Builds a model [`check_reporting`] found.
pub fn load_checked(checked: Checked) -> anyhow::Result<Engine> {
    match &checked.dir {
        Some(dir) => load_dir(dir, &checked.device),
        None => load_on(&checked.device),
    }
}

fn load_dir(dir: &Path, device: &Device) -> anyhow::Result<Engine> {
    unpanicked(|| Ok(Engine::load_on(dir, device)?))
        .with_context(|| format!("loading the model from {}", dir.display()))
}

/// A named model whose cached file does not read (a download cut short, a disk error) says
/// how to fetch it again: the engine's "truncated or corrupt?" alone left a user to find the
/// cache and delete it.
pub fn with_repair_hint<T>(model: &Path, result: anyhow::Result<T>) -> anyhow::Result<T> {
    let Err(err) = result else {
        return result;
    };
    let damaged = err.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<redraft_engine::Error>(),
            Some(
                redraft_engine::Error::CorruptGguf { .. }
                    | redraft_engine::Error::CorruptWeights { .. }
            )
        )
    });
    let name = model.to_str().unwrap_or("");
    let scheme = |s: &str| {
        name.get(..s.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(s))
    };
    let fetch = if scheme("hf:") {
        format!("`redraft pull {name}` fetches it again")
    } else if scheme("ollama:") {
        format!(
            "`ollama pull {}` fetches it again",
            &name["ollama:".len()..]
        )
    } else {
        return Err(err);
    };
    if !damaged {
        return Err(err);
    }
    Err(err.context(format!("the stored copy of {name} is damaged; {fetch}")))
}

/// `read` with a panic turned into an error: a model file no check foresaw must not take down
/// the server reading it (the thread that owns the model, or `redraft serve` at start-up).
pub fn unpanicked<T>(read: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|panic| {
        let what = redraft_engine::panic_text(&*panic).unwrap_or("a panic");
        Err(anyhow::anyhow!(
            "reading the model failed: {what} (a bug in redraft on a file it should refuse: please report it)"
        ))
    })
}

/// Where a `--model` value (or an editor's `model` setting) leads: a path as it is; a model
/// name (`hf:ORG/REPO[:QUANT]`, `hf:ORG/REPO/FILE.gguf`, `...@REVISION`, `ollama:NAME[:TAG]`)
/// to its files in the Hugging Face hub cache or Ollama's store, downloading what the cache
/// lacks with progress on stderr (`redraft_models`); a bare word that names neither is an
/// error listing the forms. Blocking: never called on an async runtime's thread.
pub fn locate(model: &Path) -> anyhow::Result<PathBuf> {
    locate_reporting(model, &mut redraft_models::TerminalProgress::new())
}

/// [`locate`], reporting downloads to `progress`.
pub fn locate_reporting(
    model: &Path,
    progress: &mut dyn redraft_models::Progress,
) -> anyhow::Result<PathBuf> {
    let Some(text) = model.to_str() else {
        return Ok(model.to_path_buf());
    };
    let name = match redraft_models::ModelName::parse(text) {
        Ok(redraft_models::ModelName::Path(path)) => return Ok(path),
        Ok(name) => name,
        // Meant as a path that is not there: loading says so, naming it; unless it reads as a
        // Hub repository written without `hf:` (the likeliest slip), which is said instead.
        Err(redraft_models::Error::UnknownName { .. }) if looks_like_path(text) => {
            if let Some(name) = hub_name_meant(text) {
                anyhow::bail!(
                    "no such file or directory: {text}; for the Hugging Face repository, write \
                     {name} (hf:ORG/REPO:QUANT for one of its GGUF files)"
                );
            }
            return Ok(model.to_path_buf());
        }
        Err(err) => return Err(err).with_context(|| format!("finding the model {text}")),
    };
    let resolved = redraft_models::Resolver::from_env()
        .resolve_name(&name, progress)
        .with_context(|| format!("finding the model {text}"))?;
    Ok(resolved.path)
}

/// A string meant as a path even when nothing is there (the engine's error then names it).
fn looks_like_path(text: &str) -> bool {
    text.contains(['/', '\\']) || text.starts_with(['.', '~']) || text.ends_with(".gguf")
}

/// The `hf:` name a missing path was likely meant as: `ORG/REPO` (a relative path of two plain
/// parts) or a Hub page's URL (`https://huggingface.co/ORG/REPO`, a file's `.../blob/REV/F.gguf`
/// or `.../resolve/REV/F.gguf`).
fn hub_name_meant(text: &str) -> Option<String> {
    let plain = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    };
    let url = ["https://", "http://", ""].iter().find_map(|scheme| {
        let rest = text.strip_prefix(scheme)?;
        ["huggingface.co/", "hf.co/"]
            .iter()
            .find_map(|host| rest.strip_prefix(host))
    });
    let Some(url) = url else {
        let (org, repo) = text.split_once('/')?;
        return (plain(org) && plain(repo) && !repo.ends_with(".gguf"))
            .then(|| format!("hf:{text}"));
    };
    let mut parts = url.trim_end_matches('/').split('/');
    let (org, repo) = (parts.next()?, parts.next()?);
    if !plain(org) || !plain(repo) {
        return None;
    }
    let rest: Vec<&str> = parts.collect();
    match rest.as_slice() {
        [] | ["tree", ..] => Some(format!("hf:{org}/{repo}")),
        ["blob" | "resolve", revision, file @ ..] if file.last()?.ends_with(".gguf") => {
            let at = if *revision == "main" {
                String::new()
            } else {
                format!("@{revision}")
            };
            Some(format!("hf:{org}/{repo}/{}{at}", file.join("/")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A named model whose stored file does not read says how to fetch it again; a path, or an
    /// error that is not about a damaged file, is left as it was.
    #[test]
    fn a_damaged_named_model_says_how_to_fetch_it_again() {
        let corrupt = || -> anyhow::Result<()> {
            Err(anyhow::Error::new(redraft_engine::Error::CorruptGguf {
                path: "/cache/blob".into(),
                message: "cut short".into(),
            })
            .context("loading the model from /cache/snapshot/m.gguf"))
        };
        let said = |model: &str, result: anyhow::Result<()>| {
            format!(
                "{:#}",
                with_repair_hint(Path::new(model), result).unwrap_err()
            )
        };
        let hf = said("hf:org/repo:Q8_0", corrupt());
        assert!(
            hf.starts_with("the stored copy of hf:org/repo:Q8_0 is damaged; `redraft pull hf:org/repo:Q8_0` fetches it again: loading the model from"),
            "{hf}"
        );
        let ollama = said("ollama:qwen:1b", corrupt());
        assert!(
            ollama.contains("`ollama pull qwen:1b` fetches it again"),
            "{ollama}"
        );
        let path = said("/models/m.gguf", corrupt());
        assert!(path.starts_with("loading the model from"), "{path}");
        let other = said("hf:org/repo", Err(anyhow::anyhow!("out of memory")));
        assert_eq!(other, "out of memory");
    }

    /// A missing path that reads as a Hub repository (no `hf:`) names the `hf:` name; other
    /// missing paths are the engine's to name.
    #[test]
    fn a_hub_repository_written_as_a_path_is_named_as_one() {
        for (text, meant) in [
            (
                "Qwen/Qwen2.5-Coder-0.5B",
                Some("hf:Qwen/Qwen2.5-Coder-0.5B"),
            ),
            (
                "https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
                Some("hf:Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"),
            ),
            (
                "https://huggingface.co/Qwen/Q-GGUF/tree/main",
                Some("hf:Qwen/Q-GGUF"),
            ),
            (
                "https://huggingface.co/Qwen/Q-GGUF/blob/main/q-q8_0.gguf",
                Some("hf:Qwen/Q-GGUF/q-q8_0.gguf"),
            ),
            (
                "huggingface.co/Qwen/Q-GGUF/resolve/abc123/sub/q.gguf",
                Some("hf:Qwen/Q-GGUF/sub/q.gguf@abc123"),
            ),
            ("models/qwen.gguf", None),
            ("./Qwen/Coder", None),
            ("/opt/models", None),
            ("a/b/c", None),
            ("~/models", None),
            ("https://example.com/a/b", None),
        ] {
            assert_eq!(hub_name_meant(text).as_deref(), meant, "{text}");
        }
        let err = locate(Path::new("Nobody-Here/No-Such-Model")).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "no such file or directory: Nobody-Here/No-Such-Model; for the Hugging Face \
             repository, write hf:Nobody-Here/No-Such-Model (hf:ORG/REPO:QUANT for one of its \
             GGUF files)"
        );
    }
}
