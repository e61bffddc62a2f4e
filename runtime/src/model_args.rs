//! The `--model` and `--device` flags every command that loads a model shares (`redraft
//! complete`, `redraft serve`, `redraft-lab eval`, `logprobs` and `bench`), so each says the same
//! thing and loads the same way.

use std::path::PathBuf;

use redraft_engine::{DeviceSpec, Engine};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ModelArgs {
    /// Model: a directory (config.json, model.safetensors, tokenizer.json, redraft.json), a GGUF
    /// file, or a name (`hf:ORG/REPO[:QUANT]`, `ollama:NAME[:TAG]`); default: the model compiled
    /// into redraft.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Where the model runs: auto (a GPU when this build has CUDA and the machine has one, else
    /// the CPU), cpu, cuda (or gpu) or cuda:N.
    #[arg(long, default_value = "auto")]
    pub device: DeviceSpec,
}

impl ModelArgs {
    /// The model `--model` names (downloading a named model's missing files, with progress on
    /// stderr), else the embedded default, on `--device`.
    pub fn load(&self) -> anyhow::Result<Engine> {
        crate::default_model::load_or_default(self.model.as_deref(), self.device)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        model: ModelArgs,
    }

    #[test]
    fn defaults_to_the_embedded_model_on_any_device() {
        let cli = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(cli.model.model, None);
        assert_eq!(cli.model.device, DeviceSpec::Auto);
    }

    #[test]
    fn reads_a_model_and_a_device() {
        let cli = Cli::try_parse_from(["x", "--model", "hf:org/repo:Q8_0", "--device", "cuda:1"])
            .unwrap();
        assert_eq!(cli.model.model, Some(PathBuf::from("hf:org/repo:Q8_0")));
        assert_eq!(cli.model.device, DeviceSpec::Cuda(1));
    }

    #[test]
    fn refuses_an_unknown_device() {
        let err = Cli::try_parse_from(["x", "--device", "tpu"]).err().unwrap();
        assert!(err.to_string().contains("tpu"), "{err}");
    }

    #[test]
    fn loads_the_embedded_model_on_the_cpu() {
        let args = ModelArgs {
            model: None,
            device: DeviceSpec::Cpu,
        };
        let engine = args.load().unwrap();
        assert_eq!(
            engine.dir(),
            std::path::Path::new(crate::default_model::ORIGIN)
        );
    }
}
