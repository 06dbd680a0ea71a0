//! Which device the trainer runs on: `auto`, `cpu`, `cuda` or `cuda:N`.

use std::fmt;
use std::str::FromStr;

use candle_core::Device;
use serde::{Deserialize, Serialize};

use crate::error::TrainError;

/// The device a run asks for. `Auto` takes the first GPU of a CUDA build
/// and the CPU otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DeviceChoice {
    #[default]
    Auto,
    Cpu,
    Cuda(usize),
}

impl FromStr for DeviceChoice {
    type Err = TrainError;

    fn from_str(s: &str) -> Result<Self, TrainError> {
        let bad = || {
            TrainError::Device(format!(
                "unknown device `{s}`: use auto, cpu, cuda or cuda:N (N the GPU's index)"
            ))
        };
        match s.trim() {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceChoice::Cuda)
                .ok_or_else(bad),
        }
    }
}

impl TryFrom<String> for DeviceChoice {
    type Error = TrainError;

    fn try_from(s: String) -> Result<Self, TrainError> {
        s.parse()
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Auto => f.write_str("auto"),
            DeviceChoice::Cpu => f.write_str("cpu"),
            DeviceChoice::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl From<DeviceChoice> for String {
    fn from(d: DeviceChoice) -> String {
        d.to_string()
    }
}

impl DeviceChoice {
    /// Opens the device. `Auto` falls back to the CPU when no GPU answers;
    /// an explicit `cuda` that cannot be had is an error that says why.
    pub fn open(self) -> Result<Device, TrainError> {
        match self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Auto if !candle_core::utils::cuda_is_available() => Ok(Device::Cpu),
            DeviceChoice::Auto => match Device::new_cuda(0) {
                Ok(d) => Ok(d),
                Err(e) => {
                    tracing::warn!("no usable GPU ({e}); training on the CPU");
                    Ok(Device::Cpu)
                }
            },
            DeviceChoice::Cuda(_) if !candle_core::utils::cuda_is_available() => {
                Err(TrainError::Device(
                    "this build has no CUDA support: build Reverie with `--features cuda` \
                     on a machine with the CUDA toolkit, or train with `--device cpu`"
                        .into(),
                ))
            }
            DeviceChoice::Cuda(n) => Device::new_cuda(n).map_err(|e| {
                TrainError::Device(format!(
                    "CUDA device {n} cannot be opened ({e}); check `nvidia-smi`, \
                     or train with `--device cpu`"
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_every_choice() {
        for (text, choice) in [
            ("auto", DeviceChoice::Auto),
            ("cpu", DeviceChoice::Cpu),
            ("cuda:1", DeviceChoice::Cuda(1)),
        ] {
            assert_eq!(text.parse::<DeviceChoice>().unwrap(), choice);
            assert_eq!(choice.to_string(), text);
        }
        assert_eq!(
            "cuda".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Cuda(0)
        );
        let json = serde_json::to_string(&DeviceChoice::Cuda(2)).unwrap();
        assert_eq!(json, "\"cuda:2\"");
        assert_eq!(
            serde_json::from_str::<DeviceChoice>(&json).unwrap(),
            DeviceChoice::Cuda(2)
        );
    }

    #[test]
    fn a_bad_name_says_what_is_accepted() {
        for bad in ["gpu", "cuda:x", "cuda:", ""] {
            let err = bad.parse::<DeviceChoice>().unwrap_err().to_string();
            assert!(
                err.contains("use auto, cpu, cuda or cuda:N"),
                "{bad}: {err}"
            );
        }
        assert!(serde_json::from_str::<DeviceChoice>("\"tpu\"").is_err());
    }

    #[test]
    fn cpu_and_auto_open_without_a_gpu() {
        assert!(DeviceChoice::Cpu.open().unwrap().is_cpu());
        if !candle_core::utils::cuda_is_available() {
            assert!(DeviceChoice::Auto.open().unwrap().is_cpu());
            let err = DeviceChoice::Cuda(0).open().unwrap_err().to_string();
            assert!(err.contains("--features cuda"), "{err}");
        }
    }
}
