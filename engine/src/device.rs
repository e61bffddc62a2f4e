//! Where a model runs: the `--device` setting (`auto`, `cpu`, `cuda`, `cuda:N`) and its
//! resolution to a candle [`Device`].
//!
//! CUDA exists only in builds with the `cuda` feature; asking for it elsewhere is an error that
//! says how to get it, never a silent fall back to the CPU. `auto` is the one setting that falls
//! back: the first GPU when there is one, else the CPU.

use std::fmt;
use std::str::FromStr;

use candle_core::Device;

use crate::error::{Error, Result};

/// A device as the user names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSpec {
    /// The first CUDA device when this build has CUDA and the machine a GPU, else the CPU.
    #[default]
    Auto,
    Cpu,
    /// The CUDA device with this ordinal.
    Cuda(usize),
}

impl DeviceSpec {
    /// The candle device, or an error that says why it cannot be had.
    pub fn resolve(self) -> Result<Device> {
        match self {
            DeviceSpec::Cpu => Ok(Device::Cpu),
            DeviceSpec::Auto => {
                if cuda_compiled() {
                    // No usable GPU (no driver, no device) is the ordinary case `auto` is for.
                    Ok(Device::new_cuda(0).unwrap_or(Device::Cpu))
                } else {
                    Ok(Device::Cpu)
                }
            }
            DeviceSpec::Cuda(ordinal) => {
                if !cuda_compiled() {
                    return Err(Error::Device(format!(
                        "`{self}` needs a redraft built with CUDA (`cargo build --release -p redraft -p redraft-lab --features cuda`, see docs/models.md); this one runs on the CPU only"
                    )));
                }
                Device::new_cuda(ordinal).map_err(|e| {
                    Error::Device(format!(
                        "cannot open CUDA device {ordinal} (is the NVIDIA driver installed and the GPU visible?): {e}"
                    ))
                })
            }
        }
    }
}

/// Whether this build has the CUDA backend.
pub fn cuda_compiled() -> bool {
    cfg!(feature = "cuda")
}

/// A short name for `device` in logs and reports: `cpu` or `cuda:N`.
pub fn describe(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

impl FromStr for DeviceSpec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<DeviceSpec, String> {
        let bad = || format!("unknown device `{s}`: use auto, cpu, cuda or cuda:N");
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(DeviceSpec::Auto),
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" | "gpu" => Ok(DeviceSpec::Cuda(0)),
            other => {
                let ordinal = other.strip_prefix("cuda:").ok_or_else(bad)?;
                ordinal.parse().map(DeviceSpec::Cuda).map_err(|_| bad())
            }
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_parse_and_print_back() {
        for (text, spec) in [
            ("auto", DeviceSpec::Auto),
            ("cpu", DeviceSpec::Cpu),
            (" CPU ", DeviceSpec::Cpu),
            ("cuda", DeviceSpec::Cuda(0)),
            ("gpu", DeviceSpec::Cuda(0)),
            ("cuda:3", DeviceSpec::Cuda(3)),
        ] {
            assert_eq!(text.parse::<DeviceSpec>(), Ok(spec), "{text}");
            assert_eq!(spec.to_string().parse::<DeviceSpec>(), Ok(spec));
        }
        for bad in ["", "tpu", "cuda:", "cuda:x", "cuda:-1", "metal"] {
            let err = bad.parse::<DeviceSpec>().unwrap_err();
            assert!(
                err.contains("use auto, cpu, cuda or cuda:N"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn cpu_always_resolves_and_auto_resolves_somewhere() {
        assert!(DeviceSpec::Cpu.resolve().unwrap().is_cpu());
        let auto = DeviceSpec::Auto.resolve().unwrap();
        if !cuda_compiled() {
            assert!(auto.is_cpu());
        }
        assert!(["cpu", "cuda:0"].contains(&describe(&auto).as_str()));
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_is_an_error_that_says_how_to_get_it() {
        let err = DeviceSpec::Cuda(1).resolve().unwrap_err().to_string();
        assert!(err.contains("--features cuda"), "{err}");
        assert!(err.contains("cuda:1"), "{err}");
    }
}
