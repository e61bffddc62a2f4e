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
            let dir = locate_reporting(model, progress)?;
            Engine::load_on(&dir, &device)
                .with_context(|| format!("loading the model from {}", dir.display()))
        }
        None => load_on(&device),
    }
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
        // Meant as a path that is not there: loading says so, naming it.
        Err(redraft_models::Error::UnknownName { .. }) if looks_like_path(text) => {
            return Ok(model.to_path_buf())
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
