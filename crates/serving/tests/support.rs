//! Systems the tests share.

use tessera_serving::{SegmentShape, ServedSegment, ServedService, ServingSystem};

/// One service served by one segment of `shape`.
pub fn single(shape: SegmentShape, rate_rps: f64, latency_slo_ms: f64) -> ServingSystem {
    let service = ServedService { name: "svc".into(), rate_rps, latency_slo_ms, percentile: 99.0 };
    let segment = ServedSegment { service: 0, shape, weight: 1.0, label: "seg".into() };
    ServingSystem::new(vec![service], vec![segment]).unwrap()
}

/// A ParvaGPU-scale system: 12 services, each on two to four segments (36
/// in all) of one to three processes with batches of 8 to 32 (latency
/// growing with the batch, partial batches profiled), weighted by
/// throughput; each service's rate is `load` times its segments'
/// throughput (thousands of req/s).
pub fn parva_scale(load: f64) -> ServingSystem {
    let mut services = Vec::new();
    let mut segments = Vec::new();
    for s in 0..12u32 {
        let mut throughput_rps = 0.0;
        for k in 0..2 + s % 3 {
            let procs = 1 + (s + k) % 3;
            let max_batch = 8 << ((s + k) % 3);
            let base_ms = 2.0 + f64::from(k);
            let points = [1, 2, 4, 8, 16, 32]
                .into_iter()
                .filter(|&b| b <= max_batch)
                .map(|b| (b, base_ms * (1.0 + 0.15 * f64::from(b))))
                .collect();
            let shape = SegmentShape::new(procs, points).unwrap();
            throughput_rps += shape.throughput_rps();
            let weight = shape.throughput_rps();
            segments.push(ServedSegment { service: s as usize, shape, weight, label: format!("s{s}-{k}") });
        }
        services.push(ServedService {
            name: format!("service-{s}"),
            rate_rps: load * throughput_rps,
            latency_slo_ms: 30.0,
            percentile: 99.0,
        });
    }
    ServingSystem::new(services, segments).unwrap()
}
