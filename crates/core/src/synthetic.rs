//! Tessera's built-in example data: a synthetic segment-profile model.
//!
//! These numbers are **not measurements**. They come from a small analytic
//! model with made-up, plausible parameters, so that `tessera plan --demo`
//! runs on a fresh machine with no files and no GPU. For a segment of
//! `g` compute slices running `p` MPS processes with batch `b`:
//!
//! ```text
//! capacity_rps(g) = peak_rps × speed(gpu) × (g / 7)^gpc_exponent      (sub-linear in g)
//! latency_ms      = overhead_ms + 1000 × p × b / capacity_rps(g) × (1 + 0.03 (p − 1))
//! per-process rps = 1000 × b / latency_ms                              (latency = batch / throughput)
//! segment rps     = p × per-process rps                                (sub-linear in p, ≤ capacity)
//! memory_gb       = p × (0.8 + weights_gb + activation_gb_per_sample × b)
//! ```
//!
//! The fixed per-batch `overhead_ms` (kernel launches, pre/post-processing)
//! makes small batches latency-bound, so more processes or bigger batches
//! raise throughput until the instance's compute capacity saturates; the
//! `p` processes share that capacity, with a 3% MPS contention penalty per
//! extra process. A configuration whose memory exceeds the MIG instance's
//! memory is infeasible and left out, which rules out large batches on small
//! instances. Batches are 1, 2, 4, …, 256 and processes 1 to 5.

use std::collections::BTreeMap;

use crate::error::CoreError;
use crate::gpu::GpuModel;
use crate::profile::{ModelProfile, ProfileCatalog, ProfilePoint, SegmentConfig};
use crate::slo::{ServiceImage, ServiceSlo};

/// Parameters of one synthetic model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyntheticModel {
    /// Model name.
    pub name: &'static str,
    /// Saturated throughput of a whole A100 (7g), requests/s.
    pub peak_rps: f64,
    /// Exponent of the growth of capacity with compute slices (< 1).
    pub gpc_exponent: f64,
    /// Fixed time per batch, ms.
    pub overhead_ms: f64,
    /// Weights per process, GB.
    pub weights_gb: f64,
    /// Activation memory per request in a batch, GB.
    pub activation_gb_per_sample: f64,
}

/// The built-in synthetic models.
#[rustfmt::skip]
pub const MODELS: [SyntheticModel; 5] = [
    SyntheticModel { name: "bert-base", peak_rps: 900.0, gpc_exponent: 0.80, overhead_ms: 6.0, weights_gb: 0.45, activation_gb_per_sample: 0.10 },
    SyntheticModel { name: "gpt2", peak_rps: 240.0, gpc_exponent: 0.80, overhead_ms: 10.0, weights_gb: 0.55, activation_gb_per_sample: 0.30 },
    SyntheticModel { name: "mobilenetv2", peak_rps: 4000.0, gpc_exponent: 0.75, overhead_ms: 3.0, weights_gb: 0.02, activation_gb_per_sample: 0.08 },
    SyntheticModel { name: "resnet50", peak_rps: 2600.0, gpc_exponent: 0.85, overhead_ms: 4.0, weights_gb: 0.10, activation_gb_per_sample: 0.12 },
    SyntheticModel { name: "vit-b16", peak_rps: 1100.0, gpc_exponent: 0.85, overhead_ms: 5.0, weights_gb: 0.35, activation_gb_per_sample: 0.15 },
];

/// GPU models with built-in example profiles.
pub const BUILTIN_GPUS: [GpuModel; 2] = [GpuModel::A100_80GB, GpuModel::H100_80GB];

/// Batch sizes of the synthetic profiles.
pub const BATCHES: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Most MPS processes in a synthetic profile.
pub const MAX_PROCS: u32 = 5;

const CONTEXT_GB_PER_PROCESS: f64 = 0.8;
const MPS_CONTENTION_PER_EXTRA_PROCESS: f64 = 0.03;

/// Assumed speed of one compute slice relative to an A100's.
pub fn relative_speed(gpu: GpuModel) -> f64 {
    match gpu {
        GpuModel::A100_40GB | GpuModel::A100_80GB => 1.0,
        GpuModel::A30_24GB => 0.6,
        GpuModel::H100_80GB => 1.8,
        GpuModel::H100_94GB => 1.9,
        GpuModel::H200_141GB => 2.0,
        GpuModel::B200_180GB => 2.6,
    }
}

/// The synthetic profile of `model` on `gpu`: every feasible configuration.
pub fn synthetic_profile(gpu: GpuModel, model: &SyntheticModel) -> Result<ModelProfile, CoreError> {
    let spec = gpu.spec();
    let mut points = Vec::new();
    for profile in spec.primary_profiles() {
        let size = profile.compute_slices;
        let capacity_rps = model.peak_rps * relative_speed(gpu) * (f64::from(size) / 7.0).powf(model.gpc_exponent);
        for batch in BATCHES {
            for procs in 1..=MAX_PROCS {
                let (b, p) = (f64::from(batch), f64::from(procs));
                let memory_gb = p * (CONTEXT_GB_PER_PROCESS + model.weights_gb + model.activation_gb_per_sample * b);
                if memory_gb > f64::from(profile.memory_gb) {
                    continue;
                }
                let contention = 1.0 + MPS_CONTENTION_PER_EXTRA_PROCESS * (p - 1.0);
                let latency_ms = model.overhead_ms + 1000.0 * p * b / capacity_rps * contention;
                let segment_rps = p * 1000.0 * b / latency_ms;
                let config = SegmentConfig { size_gpcs: size, batch, procs };
                points.push(ProfilePoint::new(config, segment_rps, latency_ms, Some(memory_gb))?);
            }
        }
    }
    ModelProfile::new(gpu, model.name, points)
}

/// Estimates the profile of a measured model on another GPU model with the
/// same slice structure and at least as much memory per instance: every
/// configuration keeps fitting, throughput scales by the ratio of
/// [`relative_speed`]s and batch latency by its inverse. `None` when the
/// GPU models differ in structure or the target has less memory.
pub fn transfer_profile(measured: &ModelProfile, to: GpuModel) -> Option<ModelProfile> {
    let (from, to_spec) = (measured.gpu_model.spec(), to.spec());
    if from.compute_slices != to_spec.compute_slices || from.memory_slices != to_spec.memory_slices {
        return None;
    }
    for size in from.sizes() {
        let (source, target) = (from.profile_for_size(size).ok()?, to_spec.profile_for_size(size).ok()?);
        if target.memory_gb < source.memory_gb {
            return None;
        }
    }
    let speedup = relative_speed(to) / relative_speed(measured.gpu_model);
    let points = measured
        .points()
        .iter()
        .map(|p| ProfilePoint::new(p.config, p.throughput_rps * speedup, p.latency_ms / speedup, p.memory_gb))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    ModelProfile::new(to, measured.model.clone(), points).ok()
}

/// Synthetic profiles of every built-in model on every built-in GPU.
pub fn builtin_catalog() -> ProfileCatalog {
    BUILTIN_GPUS
        .iter()
        .flat_map(|&gpu| MODELS.iter().map(move |model| synthetic_profile(gpu, model)))
        .map(|profile| profile.expect("built-in synthetic parameters are valid"))
        .collect()
}

/// The example services of `tessera plan --demo`: six tenants of five
/// models, two of them sharing `bert-base` with different objectives.
pub fn demo_services() -> Vec<ServiceSlo> {
    #[rustfmt::skip]
    let table: [(&str, &str, f64, f64); 6] = [
        ("search-ranking", "bert-base", 600.0, 120.0),
        ("fraud-check", "bert-base", 300.0, 20.0),
        ("chat-assist", "gpt2", 40.0, 800.0),
        ("photo-tagging", "resnet50", 2500.0, 80.0),
        ("thumbnails", "mobilenetv2", 3000.0, 40.0),
        ("moderation", "vit-b16", 350.0, 200.0),
    ];
    table
        .iter()
        .map(|&(service, model, rate_rps, latency_ms)| {
            ServiceSlo::new(service, model, rate_rps, latency_ms).expect("built-in demo objectives are valid")
        })
        .collect()
}

/// Example container images of the demo services (one per model, with the
/// batch size as an argument), so that the demo plan can be exported as
/// Kubernetes manifests. They are placeholders under the reserved
/// `example.invalid` domain: replace them with the images that serve the
/// models.
pub fn demo_images() -> BTreeMap<String, ServiceImage> {
    demo_services()
        .into_iter()
        .map(|slo| {
            let image = ServiceImage {
                image: format!("example.invalid/tessera-demo/{}:1.0", slo.model),
                args: vec!["--model".into(), slo.model.clone(), "--batch".into(), "{batch}".into()],
            };
            (slo.service, image)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resnet_a100() -> ModelProfile {
        synthetic_profile(GpuModel::A100_80GB, &MODELS[3]).unwrap()
    }

    fn point(profile: &ModelProfile, size_gpcs: u8, batch: u32, procs: u32) -> Option<ProfilePoint> {
        profile.point(SegmentConfig { size_gpcs, batch, procs }).copied()
    }

    #[test]
    fn throughput_grows_sub_linearly_with_compute_slices() {
        let profile = resnet_a100();
        let one = point(&profile, 1, 16, 1).unwrap().throughput_rps;
        let seven = point(&profile, 7, 16, 1).unwrap().throughput_rps;
        assert!(seven > one && seven < 7.0 * one, "1g {one} 7g {seven}");
    }

    #[test]
    fn throughput_grows_sub_linearly_with_processes() {
        let profile = resnet_a100();
        let one = point(&profile, 7, 4, 1).unwrap().throughput_rps;
        let three = point(&profile, 7, 4, 3).unwrap().throughput_rps;
        assert!(three > one && three < 3.0 * one, "1 proc {one}, 3 procs {three}");
    }

    #[test]
    fn latency_is_batch_over_per_process_throughput() {
        for p in resnet_a100().points() {
            let per_process = p.throughput_rps / f64::from(p.config.procs);
            let expected_ms = 1000.0 * f64::from(p.config.batch) / per_process;
            assert!((p.latency_ms - expected_ms).abs() < 1e-9 * expected_ms);
        }
    }

    #[test]
    fn memory_rules_out_large_batches_on_small_instances() {
        let profile = resnet_a100();
        assert!(point(&profile, 1, 256, 1).is_none());
        assert!(point(&profile, 7, 256, 1).is_some());
    }

    #[test]
    fn transfers_scale_speed_and_refuse_smaller_or_different_gpus() {
        let a100 = resnet_a100();
        let h100 = transfer_profile(&a100, GpuModel::H100_80GB).unwrap();
        assert_eq!(h100.points().len(), a100.points().len());
        let (slow, fast) = (a100.points()[0], h100.points()[0]);
        assert!((fast.throughput_rps / slow.throughput_rps - 1.8).abs() < 1e-9);
        assert!((slow.latency_ms / fast.latency_ms - 1.8).abs() < 1e-9);
        assert!(transfer_profile(&a100, GpuModel::A100_40GB).is_none(), "less memory");
        assert!(transfer_profile(&a100, GpuModel::A30_24GB).is_none(), "other slices");
    }

    #[test]
    fn builtin_catalog_covers_every_demo_model_on_both_gpus() {
        let catalog = builtin_catalog();
        assert_eq!(catalog.len(), MODELS.len() * BUILTIN_GPUS.len());
        for service in demo_services() {
            for gpu in BUILTIN_GPUS {
                assert!(catalog.get(gpu, &service.model).is_some(), "{} on {gpu}", service.model);
            }
        }
        let a100 = catalog.get(GpuModel::A100_80GB, "bert-base").unwrap().points()[0];
        let h100 = catalog.get(GpuModel::H100_80GB, "bert-base").unwrap().points()[0];
        assert!(h100.throughput_rps > a100.throughput_rps);
    }
}
