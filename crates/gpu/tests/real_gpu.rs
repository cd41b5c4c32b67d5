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

use tessera_gpu::launch::{DeviceTarget, ShellLauncher};
use tessera_gpu::measure::{measure_alone, measure_colocation, MpsDirs};
use tessera_gpu::mig::MigDevices;
use tessera_gpu::mps::daemon_answers;
use tessera_gpu::ncu::{profile_live, NcuRun};
use tessera_gpu::nvml::NvmlMigDevices;
use tessera_gpu::runner::{CommandRunner, SystemRunner};
use tessera_gpu::sampler::NvmlSampler;

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
    let metrics = measure_alone(
        &mut sampler,
        &mut ShellLauncher::on(&DeviceTarget::Gpu(0)),
        &workload("mlp", 256),
        None,
        Duration::from_secs(12),
        Duration::from_millis(100),
        &mut |_, _| {},
    )
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
    let metrics = profile_live(&mut ShellLauncher::default(), &DeviceTarget::Gpu(0), &workload("mlp", 64), &run)
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
    let commands = [workload("mlp", 256), workload("conv", 64)];
    let pairs: Vec<(&str, Option<&str>)> = commands.iter().map(|c| (c.as_str(), None)).collect();
    let throughputs = measure_colocation(
        &mut SystemRunner,
        &mut ShellLauncher::on(&DeviceTarget::Gpu(0)),
        &pairs,
        &mps,
        Duration::from_secs(15),
        None,
    )
    .expect("colocated under MPS");
    println!("mlp b256 + conv b64 under MPS on GPU 0: {throughputs:?} samples/s");
    assert!(throughputs.iter().all(|&t| t > 0.0), "{throughputs:?}");
    // The daemon was quit: it no longer answers on its pipe directory.
    assert!(!daemon_answers(&mut SystemRunner, &mps.env()).expect("asked the MPS control program"));
}
