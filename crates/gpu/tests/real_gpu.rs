//! Real hardware, run by hand on a GPU node with
//! `cargo test -p tessera-gpu --test real_gpu -- --ignored --nocapture`.
//! They only read the GPU's state and run small PyTorch workloads
//! (`examples/workloads/torch_infer.py`, which needs `python3` with torch):
//! they never change MIG mode, clocks or any other setting, and every MPS
//! daemon they start is private (own pipe directory) and quit.
//!
//! `TESSERA_REPO` names the repository root when the test binary runs away
//! from the tree it was built in.

use std::path::PathBuf;
use std::time::Duration;

use tessera_gpu::{
    daemon_answers, measure_alone, measure_group, profile_kernels, AloneOptions, CommandRunner, DeviceTarget,
    GroupOptions, MeasuredCommand, MigDevices, MpsDirs, NcuRun, NvmlMigDevices, NvmlSampler, ShellWorkloadRunner,
    SystemRunner,
};

fn workload(model: &str, batch: u32) -> String {
    let root = std::env::var_os("TESSERA_REPO")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."), PathBuf::from);
    let script = root.join("examples/workloads/torch_infer.py");
    format!("python3 {} --model {model} --batch {batch}", script.display())
}

#[test]
#[ignore = "needs an NVIDIA GPU and driver"]
fn nvml_lists_the_mig_devices_of_gpu_0() {
    let devices = NvmlMigDevices::open().expect("NVML").mig_devices(0).expect("MIG devices of GPU 0");
    println!("GPU 0 has {} MIG device(s): {devices:?}", devices.len());
    assert!(devices.iter().all(|d| d.uuid.starts_with("MIG-")), "{devices:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU and driver"]
fn nvidia_smi_answers_the_queries_tessera_makes() {
    let mut runner = SystemRunner;
    for args in [
        vec!["--query-gpu=name,memory.total,mig.mode.current", "--format=csv,noheader,nounits", "-i", "0"],
        vec!["--query-compute-apps=pid", "--format=csv,noheader", "-i", "0"],
        vec!["-L"],
        vec!["mig", "-i", "0", "-lgi"],
    ] {
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        let output = runner.run("nvidia-smi", &args).expect("nvidia-smi runs");
        println!("$ nvidia-smi {}\nstatus {}\n{}{}", args.join(" "), output.status, output.stdout, output.stderr);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU, its driver, and python3 with torch"]
fn a_real_workload_alone_has_throughput_and_utilisation() {
    let mut sampler = NvmlSampler::open(0).expect("NVML on a GPU node");
    let options = AloneOptions {
        workload: MeasuredCommand { command: workload("mlp", 256), throughput_regex: None },
        duration: Duration::from_secs(12),
        interval: Duration::from_millis(100),
    };
    let metrics =
        measure_alone(&mut sampler, &mut ShellWorkloadRunner::on(&DeviceTarget::Gpu(0)), &options, &mut |_, _| {})
            .expect("measured alone");
    println!("mlp batch 256 alone on GPU 0: {metrics:?}");
    assert!(metrics.exclusive_rps > 0.0 && metrics.samples >= 50, "{metrics:?}");
    assert!(metrics.sm_util_pct > 0.0 && metrics.peak_memory_gb > 0.0, "{metrics:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU, its driver, Nsight Compute and python3 with torch"]
fn ncu_profiles_a_real_workload() {
    let run = NcuRun {
        program: std::env::var("TESSERA_NCU").unwrap_or_else(|_| "ncu".to_string()),
        launch_skip: 50,
        launch_count: 30,
        timeout: Duration::from_secs(240),
    };
    let metrics =
        profile_kernels(&mut ShellWorkloadRunner::default(), &DeviceTarget::Gpu(0), &workload("mlp", 64), &run)
            .expect("profiled");
    println!("mlp batch 64 kernel metrics (threads, SM %, DRAM %, memory %, registers, static shared): {metrics:?}");
    assert!(metrics[0] > 0.0 && metrics[4] > 0.0, "{metrics:?}");
    for pct in &metrics[1..4] {
        assert!((0.0..=100.0).contains(pct) && *pct > 0.0, "{metrics:?}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU, its driver, MPS and python3 with torch"]
fn two_real_workloads_colocated_under_a_private_mps_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let mps = MpsDirs {
        pipe_dir: dir.path().join("pipe"),
        log_dir: dir.path().join("log"),
        device: Some(DeviceTarget::Gpu(0)),
    };
    let members = [workload("mlp", 256), workload("conv", 64)]
        .map(|command| MeasuredCommand { command, throughput_regex: None })
        .to_vec();
    let options =
        GroupOptions { members, mps: mps.clone(), duration: Duration::from_secs(15), active_thread_percentage: None };
    let throughputs = measure_group(&mut SystemRunner, &mut ShellWorkloadRunner::on(&DeviceTarget::Gpu(0)), &options)
        .expect("colocated under MPS");
    println!("mlp b256 + conv b64 under MPS on GPU 0: {throughputs:?} samples/s");
    assert!(throughputs.iter().all(|&t| t > 0.0), "{throughputs:?}");
    // The daemon was quit: it no longer answers on its pipe directory.
    assert!(!daemon_answers(&mut SystemRunner, &mps.env()).expect("asked the MPS control program"));
}
