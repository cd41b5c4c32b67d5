//! ParvaGPU's measured segments as serving shapes, and its latency SLOs.

use tessera_core::GpuModel;
use tessera_serving::SegmentShape;

/// One profiled configuration of one model, as a serving shape.
#[derive(Debug, Clone)]
pub struct Config {
    /// The model (profile file stem).
    pub model: String,
    /// MIG instance size in GPCs.
    pub size_gpcs: u8,
    /// MPS processes.
    pub procs: u32,
    /// Largest batch.
    pub batch: u32,
    /// The shape: latencies of the same size and procs at batches <= `batch`.
    pub shape: SegmentShape,
    /// The model's distinct latency SLOs (ms) over scenarios 1..=6.
    pub slos_ms: Vec<f64>,
    /// The SLO of each scenario 1..=6 (`None`: the model is absent).
    pub scenario_slos_ms: Vec<Option<f64>>,
    /// `true` when the profile's latencies fall somewhere as the batch
    /// grows (1 ms rounding): the shape then runs a partial batch at the
    /// fastest profiled batch that holds it, up to `batch` (it may be
    /// padded), which makes the latencies non-decreasing.
    pub padded: bool,
}

impl Config {
    /// `model size g batch B x procs`.
    pub fn name(&self) -> String {
        format!("{} {}g B{} x{}", self.model, self.size_gpcs, self.batch, self.procs)
    }
}

/// Every feasible configuration of ParvaGPU's 11 models with its model's
/// SLOs, or `None` (after saying so) when the data is absent.
pub fn parvagpu_configs() -> Option<Vec<Config>> {
    let dir = tessera_testkit::shared_data("parvagpu/prof_data")?;
    let slo_dir = tessera_testkit::shared_data("parvagpu/slo")?;
    let import = tessera_store::read_profile_dir(&dir, GpuModel::A100_80GB).expect("ParvaGPU's profiles read");
    let models: Vec<String> = import.profiles.iter().map(|p| p.model.clone()).collect();
    let mut scenario_slos = vec![vec![None; 6]; models.len()];
    for scenario in 1..=6 {
        let services = tessera_store::read_slo_scenario(
            &slo_dir.join("SLO_req_rate.csv"),
            &slo_dir.join("SLO_latency.csv"),
            scenario,
            &models,
        )
        .expect("ParvaGPU's SLOs read");
        for service in services {
            let index = models.iter().position(|m| *m == service.model).expect("a profiled model");
            scenario_slos[index][scenario - 1] = Some(service.latency_slo_ms);
        }
    }
    let mut configs = Vec::new();
    for (index, profile) in import.profiles.iter().enumerate() {
        let points: Vec<_> = profile.points().iter().map(|p| p.point).collect();
        let mut slos_ms: Vec<f64> = scenario_slos[index].iter().flatten().copied().collect();
        slos_ms.sort_by(f64::total_cmp);
        slos_ms.dedup();
        for point in &points {
            let config = point.config;
            let mut latencies: Vec<(u32, f64)> = points
                .iter()
                .filter(|p| {
                    p.config.size_gpcs == config.size_gpcs
                        && p.config.procs == config.procs
                        && p.config.batch <= config.batch
                })
                .map(|p| (p.config.batch, p.latency_ms))
                .collect();
            latencies.sort_by_key(|&(batch, _)| batch);
            let (shape, padded) = match SegmentShape::new(config.procs, latencies.clone()) {
                Ok(shape) => (shape, false),
                Err(_) => {
                    let mut fastest = f64::INFINITY;
                    for entry in latencies.iter_mut().rev() {
                        fastest = fastest.min(entry.1);
                        entry.1 = fastest;
                    }
                    (SegmentShape::new(config.procs, latencies).expect("padded latencies never fall"), true)
                }
            };
            configs.push(Config {
                model: profile.model.clone(),
                size_gpcs: config.size_gpcs,
                procs: config.procs,
                batch: config.batch,
                shape,
                slos_ms: slos_ms.clone(),
                scenario_slos_ms: scenario_slos[index].clone(),
                padded,
            });
        }
    }
    Some(configs)
}
