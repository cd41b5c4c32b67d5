//! Synthetic traces: clients drawn from a small table of well-known deep
//! learning models, scaled so that the trace has a requested memory
//! oversubscription and a requested ratio of transfer time to compute time.
//!
//! The generator is seeded and deterministic: the same [`GenerateParams`]
//! always give the same [`Trace`] (it uses
//! [`tessera_core::rng::SplitMix64`], never global randomness).
//!
//! # Model of a client
//!
//! Each client runs one model from [`MODELS`], in inference or training
//! mode (drawn with the seed), and each of its operations is one iteration:
//!
//! - **Inference:** one clean buffer `weights`; activations are ephemeral.
//! - **Training:** `weights` and `optimizer` (Adam moments, 2 × the
//!   weights), both dirty; activations and gradients are ephemeral.
//!
//! Every operation of a client uses the same buffers, so a client's working
//! set is the working set of any of its operations.
//!
//! # Scaling
//!
//! - **Memory.** Oversubscription is [`Trace::oversubscription`]: the
//!   persistent bytes (every client's buffers, which must stay resident
//!   across its operations or be copied again) over the memory left beside
//!   the largest ephemeral (scratch) bytes of any operation. So
//!   `memory_bytes = ceil(Σ persistent bytes / oversubscription) + largest
//!   ephemeral bytes`. At 1× (or less) every client's data fits beside any
//!   operation's scratch and nothing need ever be evicted; above 1× the
//!   operation with the largest scratch cannot run with all the data
//!   resident. If that memory is smaller than the largest single working
//!   set, memory is raised to that working set (every operation must fit),
//!   so the achieved oversubscription is then *lower* than requested: it
//!   is at most Σ persistent bytes / (largest working set − largest
//!   ephemeral bytes), which grows with the number of clients.
//! - **Compute.** An operation's *transfer time* is the host-to-device time
//!   of all its buffers, each a separate copy paying the copy latency
//!   ([`Gpu::h2d_ns`]); write-backs are not counted. The table's compute
//!   times (jittered ±10 % per operation) are multiplied by one factor so
//!   that mean transfer time / mean compute time equals `transfer_ratio`
//!   (up to nanosecond rounding). Only the *relative* compute times of the
//!   models therefore matter.

use tessera_core::rng::SplitMix64;

use crate::error::SimError;
use crate::trace::{Buffer, Client, Gpu, Operation, Trace};

/// The inputs of [`generate`].
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateParams {
    /// Number of clients (≥ 1).
    pub clients: usize,
    /// Operations (iterations) per client (≥ 1).
    pub operations_per_client: usize,
    /// Persistent bytes / the memory left beside the largest ephemeral
    /// bytes ([`Trace::oversubscription`]; > 0). Large values cannot be
    /// reached with few clients (see the module docs).
    pub oversubscription: f64,
    /// Mean transfer time / mean compute time (> 0).
    pub transfer_ratio: f64,
    /// The host link, which sets both copy bandwidths.
    pub link: Link,
    /// Seed of the model choices and compute jitter.
    pub seed: u64,
}

/// The host-to-GPU link.
///
/// The bandwidths are **assumptions**, not measurements: roughly 80 % of
/// the theoretical x16 rate per direction (about 32 GB/s for Gen4 and
/// 64 GB/s for Gen5), rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Link {
    /// PCIe 4.0 x16: assumed 25 GB/s effective each way.
    #[cfg_attr(feature = "clap", value(name = "pcie4"))]
    PcieGen4,
    /// PCIe 5.0 x16: assumed 50 GB/s effective each way.
    #[cfg_attr(feature = "clap", value(name = "pcie5"))]
    PcieGen5,
}

impl Link {
    /// Assumed effective bandwidth in each direction, bytes per second.
    pub fn bytes_per_s(self) -> f64 {
        match self {
            Link::PcieGen4 => 25e9,
            Link::PcieGen5 => 50e9,
        }
    }
}

/// Assumed fixed cost of every copy command (10 µs). An assumption.
pub const COPY_LATENCY_NS: u64 = 10_000;

/// One model of the table: sizes and per-iteration compute times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelSpec {
    /// Short name, used in client names.
    pub name: &'static str,
    /// Parameters (weights are fp32: 4 bytes each).
    pub parameters: u64,
    /// Activation bytes of one inference batch (ephemeral).
    pub inference_activation_bytes: u64,
    /// Activation and gradient bytes of one training step (ephemeral).
    pub training_activation_bytes: u64,
    /// One inference batch on the reference GPU, ms.
    pub inference_ms: f64,
    /// One training step on the reference GPU, ms.
    pub training_ms: f64,
}

const MB: u64 = 1_000_000;

/// The model table.
///
/// **Approximate public figures, not measurements.** Parameter counts are
/// the published ones; activation sizes and per-iteration times are
/// order-of-magnitude estimates for an A100-class reference GPU (ResNet-50
/// and ViT-B/16: batch 64 at 224²; BERT-base: batch 32, sequence 128;
/// GPT-2 small: batch 8, sequence 1024). Compute times are rescaled by
/// [`generate`], so only their ratios matter.
pub const MODELS: [ModelSpec; 4] = [
    ModelSpec {
        name: "resnet50",
        parameters: 25_600_000,
        inference_activation_bytes: 200 * MB,
        training_activation_bytes: 5_000 * MB,
        inference_ms: 25.0,
        training_ms: 45.0,
    },
    ModelSpec {
        name: "bert-base",
        parameters: 110_000_000,
        inference_activation_bytes: 100 * MB,
        training_activation_bytes: 3_000 * MB,
        inference_ms: 15.0,
        training_ms: 100.0,
    },
    ModelSpec {
        name: "vit-b16",
        parameters: 86_000_000,
        inference_activation_bytes: 300 * MB,
        training_activation_bytes: 8_000 * MB,
        inference_ms: 40.0,
        training_ms: 130.0,
    },
    ModelSpec {
        name: "gpt2-small",
        parameters: 124_000_000,
        inference_activation_bytes: 500 * MB,
        training_activation_bytes: 10_000 * MB,
        inference_ms: 40.0,
        training_ms: 200.0,
    },
];

/// Builds a synthetic trace (see the module docs for the model and the
/// scaling). Errors name the first bad parameter.
pub fn generate(params: &GenerateParams) -> Result<Trace, SimError> {
    check(params)?;
    let bandwidth = params.link.bytes_per_s();
    let gpu = Gpu {
        memory_bytes: 0,
        h2d_bytes_per_s: bandwidth,
        d2h_bytes_per_s: bandwidth,
        copy_latency_ns: COPY_LATENCY_NS,
    };
    let mut rng = SplitMix64::new(params.seed);
    let mut clients = Vec::with_capacity(params.clients);
    for i in 0..params.clients {
        let model = &MODELS[rng.below(MODELS.len())];
        let training = rng.below(2) == 1;
        let weights = model.parameters * 4;
        let (mode, buffers, ephemeral_bytes, base_ms) = if training {
            let buffers = vec![
                Buffer { name: "weights".into(), bytes: weights, dirty: true },
                Buffer { name: "optimizer".into(), bytes: 2 * weights, dirty: true },
            ];
            ("train", buffers, model.training_activation_bytes, model.training_ms)
        } else {
            let buffers = vec![Buffer { name: "weights".into(), bytes: weights, dirty: false }];
            ("infer", buffers, model.inference_activation_bytes, model.inference_ms)
        };
        let operations = (0..params.operations_per_client)
            .map(|_| Operation {
                compute_ms: base_ms * rng.uniform(0.9, 1.1),
                buffers: buffers.clone(),
                ephemeral_bytes,
            })
            .collect();
        clients.push(Client { name: format!("c{i}-{}-{mode}", model.name), operations });
    }

    let operations = clients.iter().flat_map(|c| &c.operations);
    let count = (params.clients * params.operations_per_client) as f64;
    let mean_transfer_ns = operations.clone().map(|op| gpu.fetch_ns(op) as f64).sum::<f64>() / count;
    let mean_compute_ms = operations.map(|op| op.compute_ms).sum::<f64>() / count;
    let factor = mean_transfer_ns / 1e6 / params.transfer_ratio / mean_compute_ms;
    for op in clients.iter_mut().flat_map(|c| &mut c.operations) {
        op.compute_ms *= factor;
    }

    let mut trace = Trace { gpu, clients };
    let largest_working_set = trace.clients.iter().map(|c| c.operations[0].working_set_bytes()).max().unwrap_or(0);
    let persistent_share = (trace.persistent_bytes() as f64 / params.oversubscription).ceil() as u64;
    trace.gpu.memory_bytes = persistent_share.saturating_add(trace.largest_ephemeral_bytes()).max(largest_working_set);
    // The table's sizes always fit; only compute times scaled up by a tiny
    // ratio can pass the simulator's clock.
    trace.validate().map_err(|error| match error {
        SimError::ComputeTime { .. } | SimError::TraceTime { .. } => SimError::Parameter {
            parameter: "transfer_ratio",
            requirement: "large enough for the scaled compute times to fit the simulator's clock (2^64 ns in all)",
            value: params.transfer_ratio,
        },
        other => other,
    })?;
    Ok(trace)
}

fn check(params: &GenerateParams) -> Result<(), SimError> {
    let bad = |parameter, requirement, value: f64| Err(SimError::Parameter { parameter, requirement, value });
    if params.clients == 0 {
        return bad("clients", "at least 1", 0.0);
    }
    if params.operations_per_client == 0 {
        return bad("operations_per_client", "at least 1", 0.0);
    }
    for (parameter, value) in [("oversubscription", params.oversubscription), ("transfer_ratio", params.transfer_ratio)]
    {
        if !(value.is_finite() && value > 0.0) {
            return bad(parameter, "a positive finite number", value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(seed: u64) -> GenerateParams {
        GenerateParams {
            clients: 6,
            operations_per_client: 4,
            oversubscription: 2.0,
            transfer_ratio: 0.5,
            link: Link::PcieGen4,
            seed,
        }
    }

    fn ratios(trace: &Trace) -> (f64, f64) {
        let ops: Vec<&Operation> = trace.clients.iter().flat_map(|c| &c.operations).collect();
        let transfer: u64 = ops.iter().map(|op| trace.gpu.fetch_ns(op)).sum();
        let compute: u64 = ops.iter().map(|op| op.compute_ns()).sum();
        (trace.oversubscription(), transfer as f64 / compute as f64)
    }

    #[test]
    fn hits_the_requested_ratios_and_validates() {
        for seed in 0..20 {
            for (oversubscription, transfer_ratio, link) in
                [(2.0, 0.5, Link::PcieGen4), (1.5, 2.0, Link::PcieGen5), (0.5, 1.0, Link::PcieGen4)]
            {
                let p = GenerateParams { oversubscription, transfer_ratio, link, ..params(seed) };
                let trace = generate(&p).unwrap();
                let json = serde_json::to_string(&trace).unwrap();
                assert_eq!(Trace::from_json(&json).unwrap(), trace);
                assert_eq!(trace.clients.len(), 6);
                assert!(trace.clients.iter().all(|c| c.operations.len() == 4));
                let (over, ratio) = ratios(&trace);
                let largest = trace.clients.iter().map(|c| c.operations[0].working_set_bytes()).max().unwrap();
                if trace.gpu.memory_bytes > largest {
                    assert!((over - oversubscription).abs() / oversubscription < 1e-6, "{over} vs {oversubscription}");
                } else {
                    assert!(over <= oversubscription + 1e-9);
                }
                assert!((ratio - transfer_ratio).abs() / transfer_ratio < 1e-3, "{ratio} vs {transfer_ratio}");
            }
        }
    }

    #[test]
    fn oversubscription_counts_persistent_data_beside_the_largest_scratch() {
        // Measured by its definition, independently of Trace::oversubscription.
        let measured = |trace: &Trace| {
            let persistent: u64 =
                trace.clients.iter().map(|c| c.operations[0].buffers.iter().map(|b| b.bytes).sum::<u64>()).sum();
            let scratch = trace.clients.iter().flat_map(|c| &c.operations).map(|op| op.ephemeral_bytes).max().unwrap();
            persistent as f64 / (trace.gpu.memory_bytes - scratch) as f64
        };
        for seed in 0..5 {
            for requested in [1.0, 2.0, 4.0, 8.0, 16.0] {
                let trace =
                    generate(&GenerateParams { clients: 64, oversubscription: requested, ..params(seed) }).unwrap();
                let largest = trace.clients.iter().map(|c| c.operations[0].working_set_bytes()).max().unwrap();
                assert!(trace.gpu.memory_bytes > largest, "{requested}× is reachable with 64 clients");
                let got = measured(&trace);
                assert!((got - requested).abs() / requested < 1e-6, "seed {seed}: {got} vs {requested}");
                assert_eq!(trace.oversubscription(), got);
            }
        }
    }

    #[test]
    fn memory_pressure_rises_with_oversubscription() {
        let policies = crate::Policies {
            eviction: crate::Eviction::Belady,
            prefetch: crate::Prefetch::Lookahead(1),
            retention: crate::Retention::ReleaseAfterLastUse,
        };
        for seed in 0..5 {
            let moved: Vec<u64> = [1.0, 2.0, 4.0, 8.0]
                .iter()
                .map(|&oversubscription| {
                    let p = GenerateParams { clients: 24, operations_per_client: 3, oversubscription, ..params(seed) };
                    let trace = generate(&p).unwrap();
                    let schedule =
                        crate::plan_schedule(&trace, policies, &crate::SchedulerKind::Fifo, &mut |_, _| {}).unwrap();
                    let result = crate::simulate(&trace, &schedule, policies).unwrap();
                    if oversubscription == 1.0 {
                        assert_eq!(
                            u128::from(result.h2d_bytes),
                            trace.persistent_bytes(),
                            "at 1× every buffer is copied in once"
                        );
                    }
                    result.h2d_bytes
                })
                .collect();
            assert!(moved.windows(2).all(|w| w[0] < w[1]), "seed {seed}: bytes moved {moved:?}");
        }
    }

    #[test]
    fn raises_memory_to_the_largest_working_set() {
        let trace = generate(&GenerateParams { clients: 2, oversubscription: 100.0, ..params(3) }).unwrap();
        let largest = trace.clients.iter().map(|c| c.operations[0].working_set_bytes()).max().unwrap();
        assert_eq!(trace.gpu.memory_bytes, largest);
        assert!(trace.validate().is_ok());
    }

    #[test]
    fn is_deterministic_per_seed() {
        assert_eq!(generate(&params(42)).unwrap(), generate(&params(42)).unwrap());
        let names = |seed| generate(&params(seed)).unwrap().clients.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert!((0..10).any(|seed| names(seed) != names(42)));
    }

    #[test]
    fn uses_both_modes_and_all_models() {
        let trace = generate(&GenerateParams { clients: 64, ..params(1) }).unwrap();
        for model in MODELS {
            assert!(trace.clients.iter().any(|c| c.name.contains(model.name)), "{}", model.name);
        }
        let training = trace.clients.iter().filter(|c| c.name.ends_with("-train")).count();
        assert!(training > 0 && training < 64);
        for client in &trace.clients {
            let dirty = client.operations[0].buffers.iter().all(|b| b.dirty);
            assert_eq!(dirty, client.name.ends_with("-train"));
        }
    }

    #[test]
    fn rejects_bad_parameters_naming_them() {
        type Edit = fn(&mut GenerateParams);
        let cases: [(Edit, &str); 7] = [
            (|p| p.transfer_ratio = 1e-12, "transfer_ratio"),
            (|p| p.clients = 0, "clients"),
            (|p| p.operations_per_client = 0, "operations_per_client"),
            (|p| p.oversubscription = 0.0, "oversubscription"),
            (|p| p.oversubscription = f64::NAN, "oversubscription"),
            (|p| p.transfer_ratio = -1.0, "transfer_ratio"),
            (|p| p.transfer_ratio = f64::INFINITY, "transfer_ratio"),
        ];
        for (edit, name) in cases {
            let mut p = params(0);
            edit(&mut p);
            let message = generate(&p).unwrap_err().to_string();
            assert!(message.contains(&format!("parameter {name} ")) && !message.contains('\n'), "{message}");
        }
    }
}
