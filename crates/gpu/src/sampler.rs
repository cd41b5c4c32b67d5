//! GPU utilisation samples: from NVML on a GPU node, or scripted in tests.

#[cfg(any(test, feature = "fake"))]
use std::collections::VecDeque;

use nvml_wrapper::Nvml;

use crate::error::GpuError;
use crate::nvml::query_error;

/// One reading of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GpuSample {
    /// SM (kernel) utilisation over NVML's last sample period, %.
    pub sm_util_pct: f64,
    /// Memory-controller utilisation over NVML's last sample period, %.
    pub mem_util_pct: f64,
    /// Device memory in use, bytes.
    pub memory_used_bytes: u64,
}

/// Reads a GPU's utilisation.
pub trait GpuSampler {
    /// One reading now.
    fn sample(&mut self) -> Result<GpuSample, GpuError>;
}

/// Samples one GPU through NVML. `libnvidia-ml` is loaded at run time, so
/// the binary runs (and fails with a one-line error) without a driver.
pub struct NvmlSampler {
    nvml: Nvml,
    index: u32,
}

impl std::fmt::Debug for NvmlSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSampler").field("index", &self.index).finish_non_exhaustive()
    }
}

impl NvmlSampler {
    /// Loads NVML and checks that GPU `device_index` exists. Only reads:
    /// never changes MIG mode or any other setting.
    pub fn open(device_index: u32) -> Result<Self, GpuError> {
        let nvml = crate::nvml::init()?;
        nvml.device_by_index(device_index).map_err(|error| query_error(device_index, "device", &error))?;
        Ok(Self { nvml, index: device_index })
    }
}

impl GpuSampler for NvmlSampler {
    fn sample(&mut self) -> Result<GpuSample, GpuError> {
        let index = self.index;
        let nvml_error = |what: &str, error: nvml_wrapper::error::NvmlError| query_error(index, what, &error);
        let device = self.nvml.device_by_index(index).map_err(|e| nvml_error("device", e))?;
        let utilization = device.utilization_rates().map_err(|e| nvml_error("utilization rates", e))?;
        let memory = device.memory_info().map_err(|e| nvml_error("memory info", e))?;
        Ok(GpuSample {
            sm_util_pct: f64::from(utilization.gpu),
            mem_util_pct: f64::from(utilization.memory),
            memory_used_bytes: memory.used,
        })
    }
}

/// Replays scripted samples; after the last one it repeats it (or fails
/// when none was scripted).
#[cfg(any(test, feature = "fake"))]
#[derive(Debug, Clone, Default)]
pub struct FakeSampler {
    samples: VecDeque<GpuSample>,
    last: Option<GpuSample>,
    /// How many samples were taken.
    pub taken: usize,
}

#[cfg(any(test, feature = "fake"))]
impl FakeSampler {
    /// Replays `samples` in order.
    pub fn new(samples: impl IntoIterator<Item = GpuSample>) -> Self {
        Self { samples: samples.into_iter().collect(), last: None, taken: 0 }
    }
}

#[cfg(any(test, feature = "fake"))]
impl GpuSampler for FakeSampler {
    fn sample(&mut self) -> Result<GpuSample, GpuError> {
        let sample = match self.samples.pop_front() {
            Some(sample) => sample,
            None => self.last.ok_or_else(|| GpuError::Nvml { message: "the fake sampler has no samples".into() })?,
        };
        self.last = Some(sample);
        self.taken += 1;
        Ok(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fake_replays_then_repeats_the_last_sample() {
        let a = GpuSample { sm_util_pct: 10.0, mem_util_pct: 5.0, memory_used_bytes: 1 };
        let b = GpuSample { sm_util_pct: 20.0, ..a };
        let mut fake = FakeSampler::new([a, b]);
        assert_eq!(fake.sample().unwrap(), a);
        assert_eq!(fake.sample().unwrap(), b);
        assert_eq!(fake.sample().unwrap(), b);
        assert_eq!(fake.taken, 3);
        assert!(FakeSampler::default().sample().is_err());
    }

    #[test]
    fn without_a_driver_opening_nvml_is_a_one_line_error() {
        // On a GPU node this opens; elsewhere it must fail with one line.
        if let Err(error) = NvmlSampler::open(0) {
            let message = error.to_string();
            assert!(!message.contains('\n'), "{message}");
            if matches!(error, GpuError::NvmlUnavailable { .. }) {
                assert!(message.starts_with("NVML is not available (no NVIDIA driver): "), "{message}");
                assert!(!message.contains("deploy"), "no hint for another command: {message}");
            }
        }
    }

    /// Real hardware: `cargo test -p tessera-gpu -- --ignored` on a GPU
    /// node. Samples GPU 0 through NVML for one second; only reads (never
    /// changes MIG mode or any setting).
    #[test]
    #[ignore = "needs an NVIDIA GPU and driver"]
    fn samples_nvml_for_one_second() {
        let mut sampler = NvmlSampler::open(0).expect("NVML on a GPU node");
        let start = std::time::Instant::now();
        let mut count = 0;
        while start.elapsed() < std::time::Duration::from_secs(1) {
            let sample = sampler.sample().expect("an NVML sample");
            assert!((0.0..=100.0).contains(&sample.sm_util_pct), "{sample:?}");
            assert!((0.0..=100.0).contains(&sample.mem_util_pct), "{sample:?}");
            count += 1;
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(count >= 5);
    }
}
