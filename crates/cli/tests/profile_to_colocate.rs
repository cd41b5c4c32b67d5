//! From measurement to prediction with fakes: workloads measured alone
//! (fake NVML, fake workload runner), profiled under a stand-in Nsight Compute
//! (its report parsed as a live run's) and in pairs under a fake MPS daemon
//! are stored, and the colocation models train and recommend from the
//! store.

use std::time::Duration;

use tessera_colocate::TrainedModel;
use tessera_colocate::{recommend, Query};
use tessera_core::{Colocation, GroupMember, WorkloadMetrics};
use tessera_gpu::{
    measure_alone, measure_group, profile_kernels, AloneOptions, DeviceTarget, FakeNvidiaSmi, FakeSampler,
    FakeWorkloadRunner, GpuSample, GroupOptions, MeasuredCommand, MpsDirs, NcuRun, WorkloadOutput,
};
use tessera_store::Store;

use crate::util::ncu_report;

/// (name, SM %, memory %, GB, throughput alone, kernel SM throughput %).
const WORKLOADS: [(&str, f64, f64, f64, f64, f64); 4] = [
    ("light_batch2-inf", 30.0, 10.0, 2.0, 100.0, 25.0),
    ("mid_batch8-inf", 60.0, 25.0, 4.0, 80.0, 55.0),
    ("heavy_batch16-train", 95.0, 60.0, 12.0, 40.0, 90.0),
    ("other_batch4-inf", 45.0, 20.0, 3.0, 90.0, 40.0),
];

#[test]
fn measured_workloads_and_pairs_train_the_colocation_models() {
    let dir = tempfile::TempDir::new().unwrap();
    let mut store = Store::open(&dir.path().join("store.sqlite")).unwrap();
    let tick = Duration::from_millis(1);

    let mut measured: Vec<WorkloadMetrics> = Vec::new();
    for &(name, sm, mem, gb, rps, kernel_sm) in &WORKLOADS {
        let sample = GpuSample { sm_util_pct: sm, mem_util_pct: mem, memory_used_bytes: (gb * 1e9) as u64 };
        let mut sampler = FakeSampler::new([sample]);
        let mut launcher = FakeWorkloadRunner::new([FakeWorkloadRunner::throughput(rps)]);
        let options = AloneOptions {
            workload: MeasuredCommand { command: name.to_string(), throughput_regex: None },
            duration: tick * 3,
            interval: tick,
        };
        let alone = measure_alone(&mut sampler, &mut launcher, &options, &mut |_, _| {}).unwrap();
        assert_eq!((alone.exclusive_rps, alone.sm_util_pct, alone.peak_memory_gb), (rps, sm, gb));
        let wanted = [1e5 * sm, kernel_sm, mem, mem + 5.0, 1e7 * sm, 1e3 * gb];
        let report = WorkloadOutput { status: Some(0), stdout: ncu_report(&wanted), stderr: String::new() };
        let run = NcuRun { program: "ncu".into(), launch_skip: 0, launch_count: 1, timeout: Duration::from_secs(5) };
        let kernel =
            profile_kernels(&mut FakeWorkloadRunner::new([report]), &DeviceTarget::Gpu(0), name, &run).unwrap();
        for (got, want) in kernel.iter().zip(wanted) {
            assert!((got - want).abs() <= 1e-9 * want.max(1.0), "{kernel:?} vs {wanted:?}");
        }
        measured.push(WorkloadMetrics {
            workload: name.to_string(),
            kernel,
            exclusive_rps: alone.exclusive_rps,
            sm_util_pct: alone.sm_util_pct,
            mem_util_pct: alone.mem_util_pct,
            memory_gb: alone.peak_memory_gb,
        });
    }
    store.import_workloads(&measured, "fake profile run").unwrap();

    // Every pair under a fake MPS daemon; a pair keeps less the busier it is.
    let mut rows = Vec::new();
    for i in 0..measured.len() {
        for j in i..measured.len() {
            let (a, b) = (&measured[i], &measured[j]);
            let load = (a.sm_util_pct + b.sm_util_pct) / 100.0;
            let (ra, rb) = (a.exclusive_rps / load.max(1.0), b.exclusive_rps / load.max(1.0));
            let mut smi = FakeNvidiaSmi::new();
            let mut launcher =
                FakeWorkloadRunner::new([FakeWorkloadRunner::throughput(ra), FakeWorkloadRunner::throughput(rb)]);
            let mps = MpsDirs { pipe_dir: dir.path().join("pipe"), log_dir: dir.path().join("log"), device: None };
            let members =
                [a, b].map(|w| MeasuredCommand { command: w.workload.clone(), throughput_regex: None }).to_vec();
            let options = GroupOptions { members, mps, duration: tick, active_thread_percentage: None };
            let throughputs = measure_group(&mut smi, &mut launcher, &options).unwrap();
            assert!(!smi.daemon_running(), "the MPS daemon is always stopped");
            rows.push(Colocation {
                members: vec![
                    GroupMember { metrics: a.clone(), colocated_rps: throughputs[0] },
                    GroupMember { metrics: b.clone(), colocated_rps: throughputs[1] },
                ],
            });
        }
    }
    store.import_colocations(&rows, "fake profile colocate").unwrap();

    let stored = store.load_colocations().unwrap();
    assert_eq!(stored.len(), 10);
    let pool = store.load_workloads().unwrap();
    let model = TrainedModel::kace(&stored).unwrap();
    let query = Query {
        target: "heavy_batch16-train",
        candidates: None,
        group_size: 2,
        gpu_memory_gb: 32.0,
        top: 10,
        search: None,
    };
    let ranked = recommend(model.as_model(), &pool, &query).unwrap().groups;
    assert_eq!(ranked.len(), 4);
    // The light partner interferes least with the heavy trainer.
    assert_eq!(ranked[0].members[1].workload, "light_batch2-inf", "{ranked:#?}");
}
