//! A plan becomes a serving system: one segment per MIG instance, shapes
//! from the catalogue where it has them.

use tessera_core::{
    GpuAssignment, GpuModel, InstanceAssignment, ModelProfile, Plan, ProfileCatalog, ProfilePoint, SegmentConfig,
    ServiceReport,
};
use tessera_serving::{simulate, ServingSystem, SimulationOptions};

fn instance(
    service: &str,
    model: &str,
    size: u8,
    start: u8,
    batch: u32,
    procs: u32,
    latency_ms: f64,
) -> InstanceAssignment {
    let throughput_rps = f64::from(procs * batch) * 1000.0 / latency_ms;
    InstanceAssignment {
        profile: format!("{size}g.{}gb", 10 * u32::from(size)),
        size,
        start,
        service: service.into(),
        model: model.into(),
        batch,
        procs,
        throughput_rps,
        latency_ms,
        capacity_rps: None,
    }
}

fn report(service: &str, model: &str, rate_rps: f64, latency_slo_ms: f64) -> ServiceReport {
    ServiceReport {
        service: service.into(),
        model: model.into(),
        rate_rps,
        latency_slo_ms,
        provisioned_rps: 0.0,
        worst_latency_ms: 0.0,
        segments: 0,
        met: true,
        percentile: None,
        predicted_attainment: None,
        tolerance: None,
        busiest_load: None,
    }
}

/// Two GPUs: `chat` (model `llm`) on a 3g and a 2g instance, `vision`
/// (model `resnet`) on a 2g instance.
fn plan() -> Plan {
    let gpu = |node, index, instances| GpuAssignment {
        node,
        index,
        gpu_model: GpuModel::A100_80GB,
        instances,
        shared: Vec::new(),
    };
    let gpus = vec![
        gpu(0, 0, vec![instance("chat", "llm", 3, 0, 8, 2, 40.0), instance("vision", "resnet", 2, 4, 4, 1, 12.0)]),
        gpu(0, 1, vec![instance("chat", "llm", 2, 0, 4, 1, 30.0)]),
    ];
    Plan {
        services: vec![report("chat", "llm", 300.0, 200.0), report("vision", "resnet", 100.0, 50.0)],
        ..Plan::from_gpus(gpus, "optimal", "queueing", 8)
    }
}

/// `llm` on the A100 80GB: batches 1, 2 and 4 at 3g with 2 processes (the
/// batch 2 point slower than batch 4's: profiling noise), and batch 4 at 3g
/// with 1 process (another configuration); nothing for `resnet`.
fn catalog() -> ProfileCatalog {
    let point = |size_gpcs, batch, procs, latency_ms: f64| {
        let config = SegmentConfig { size_gpcs, batch, procs };
        ProfilePoint::new(config, f64::from(batch * procs) * 1000.0 / latency_ms, latency_ms, None).unwrap()
    };
    let points = vec![
        point(3, 1, 2, 10.0),
        point(3, 2, 2, 26.0),
        point(3, 4, 2, 24.0),
        point(3, 4, 1, 18.0),
        point(3, 8, 2, 38.0),
    ];
    let mut catalog = ProfileCatalog::new();
    catalog.insert(ModelProfile::new(GpuModel::A100_80GB, "llm", points).unwrap());
    catalog
}

#[test]
fn each_instance_is_a_segment_with_its_profiled_partial_batches() {
    let (system, notes) = ServingSystem::from_plan(&plan(), Some(&catalog()), 99.0).unwrap();
    assert_eq!(system.services().len(), 2);
    assert_eq!((system.services()[0].rate_rps, system.services()[1].latency_slo_ms), (300.0, 50.0));
    assert_eq!(system.services()[0].percentile, 99.0);
    let segments = system.segments();
    assert_eq!(segments.len(), 3);
    let labels: Vec<&str> = segments.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["node 0 gpu 0 3g.30gb@0", "node 0 gpu 0 2g.20gb@4", "node 0 gpu 1 2g.20gb@0"]);
    assert_eq!(segments.iter().map(|s| s.service).collect::<Vec<_>>(), [0, 1, 0]);
    // The 3g instance: the catalogue's batches 1, 2 and 4 at 2 processes (batch 4
    // raised to batch 2's 26 ms), and the plan's 40 ms for its batch of 8 (not the
    // catalogue's 38 ms).
    assert_eq!(segments[0].shape.batch_latencies(), &[(1, 10.0), (2, 26.0), (4, 26.0), (8, 40.0)]);
    assert_eq!(segments[0].shape.procs(), 2);
    // No 2g points for llm, none at all for resnet: the full batch only.
    assert_eq!(segments[2].shape.batch_latencies(), &[(4, 30.0)]);
    assert_eq!(segments[1].shape.batch_latencies(), &[(4, 12.0)]);
    // Weighted by throughput: 2 × 8 / 40 ms = 400 req/s against 4 / 30 ms.
    assert_eq!(segments[0].weight, 400.0);
    assert!((system.routed_share(0) - 400.0 / (400.0 + 4000.0 / 30.0)).abs() < 1e-12);
    assert_eq!(
        notes,
        [
            "2 of 3 segments simulated with every partial batch at the full batch's latency (the catalogue has no \
             smaller batch of their model at their size and processes)",
            "1 profiled partial-batch latency raised or lowered to keep latency non-decreasing in the batch up to \
             the plan's full-batch latency",
        ]
    );
    let report = simulate(&system, &SimulationOptions { seconds: 20.0, warmup_s: 2.0, ..Default::default() }).unwrap();
    assert_eq!(report.segments.len(), 3);
    assert!(report.attainment.unwrap() > 0.9, "{:?}", report.attainment);
}

#[test]
fn without_a_catalogue_every_partial_batch_runs_at_the_full_batch() {
    let (system, notes) = ServingSystem::from_plan(&plan(), None, 95.0).unwrap();
    assert!(system.segments().iter().all(|s| s.shape.batch_latencies().len() == 1));
    assert_eq!(system.services()[1].percentile, 95.0);
    assert_eq!(
        notes,
        ["3 of 3 segments simulated with every partial batch at the full batch's latency (no profile catalogue was given)"]
    );
}

#[test]
fn a_plan_that_does_not_hold_together_is_refused() {
    let mut stray = plan();
    stray.gpus[1].instances[0].service = "audio".into();
    let error = ServingSystem::from_plan(&stray, None, 99.0).unwrap_err().to_string();
    assert_eq!(error, "plan: node 0 gpu 1 2g.20gb@0 serves 'audio', which is not among the plan's services");
    let mut orphan = plan();
    orphan.gpus[0].instances.remove(1);
    let error = ServingSystem::from_plan(&orphan, None, 99.0).unwrap_err().to_string();
    assert!(error.contains("service 'vision' has no segment"), "{error}");
    assert!(ServingSystem::from_plan(&plan(), None, 100.0).unwrap_err().to_string().starts_with("percentile:"));
}
