//! The default model (`assets/default-model`, trained by this project with `redraft train`),
//! compiled into the binary so redraft works offline with no set-up.

use std::path::Path;

use anyhow::Context;
use candle_core::Device;
use redraft_engine::engine::ModelFiles;
use redraft_engine::{DeviceSpec, Engine};

/// Where the embedded files came from, for error messages and `--json` reports.
pub const ORIGIN: &str = "<embedded>/assets/default-model";

pub const FILES: ModelFiles<'static> = ModelFiles {
    origin: ORIGIN,
    config: include_str!("../../assets/default-model/config.json"),
    redraft: Some(include_str!("../../assets/default-model/redraft.json")),
    weights: include_bytes!("../../assets/default-model/model.safetensors"),
    tokenizer: include_bytes!("../../assets/default-model/tokenizer.json"),
};

fn load_on(device: &Device) -> anyhow::Result<Engine> {
    Engine::from_files_on(&FILES, device).context("loading the embedded default model")
}

/// `--model DIR` if given, else the embedded default model, on `device`.
pub fn load_or_default(model: Option<&Path>, device: DeviceSpec) -> anyhow::Result<Engine> {
    let device = device.resolve()?;
    match model {
        Some(dir) => Engine::load_on(dir, &device)
            .with_context(|| format!("loading the model from {}", dir.display())),
        None => load_on(&device),
    }
}
