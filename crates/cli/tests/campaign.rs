//! `scripts/gpu_campaign.sh` on this machine, without a GPU: stand-ins for
//! `nvidia-smi`, the MPS control command and the Python with torch
//! (`fixtures/campaign/`) answer in the real ones' shapes, so the test
//! checks what the script runs, in which order, with which arguments, and
//! that the real `tessera` reads what each step writes: the profiles it
//! plans on, the plan whose busiest segment is served at its capacity, the
//! runs `simulate measured` compares. The numbers are the stand-ins'. NVML
//! is not here, so `simulate run` refuses every schedule (as it should on a
//! machine without a GPU). A lent GPU runs the script for real.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

use crate::util::stderr;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the campaign into `dir/out` with the stand-ins first on `PATH`,
/// GPU 0's MIG mode `mig_mode`; the stand-ins log every call to
/// `dir/calls.log`.
fn campaign(dir: &TempDir, mig_mode: &str) -> Output {
    campaign_within(dir, mig_mode, 540)
}

/// [`campaign`] with a budget of `budget_s` seconds.
fn campaign_within(dir: &TempDir, mig_mode: &str, budget_s: u32) -> Output {
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["python", "nvidia-smi", "nvidia-cuda-mps-control"] {
        let to = bin.join(name);
        std::fs::copy(repo().join("crates/cli/tests/fixtures/campaign").join(name), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    Command::new("bash")
        .arg(repo().join("scripts/gpu_campaign.sh"))
        .arg(dir.path().join("out"))
        .arg(env!("CARGO_BIN_EXE_tessera"))
        .env("PATH", path)
        .env("TESSERA_CAMPAIGN_PYTHON", bin.join("python"))
        .env("FAKE_LOG", dir.path().join("calls.log"))
        .env("FAKE_MIG_MODE", mig_mode)
        .env("TESSERA_CAMPAIGN_BUDGET_S", budget_s.to_string())
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .expect("bash runs the campaign")
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn calls(dir: &TempDir) -> Vec<String> {
    std::fs::read_to_string(dir.path().join("calls.log")).unwrap().lines().map(str::to_string).collect()
}

/// Every `nvidia-smi` call of the campaign only reads: no MIG mode, reset,
/// clocks or instances changed.
fn assert_only_reads(calls: &[String]) {
    for call in calls.iter().filter(|call| call.starts_with("nvidia-smi")) {
        let lists = [" -lgi", " -lgip", " -lgipp"].iter().any(|list| call.ends_with(list));
        let reads = call.starts_with("nvidia-smi --query-gpu=") || call == "nvidia-smi -L" || lists;
        assert!(reads, "the campaign changed the GPU: {call}");
    }
}

#[test]
fn the_gpu_campaign_plans_on_what_it_profiled_and_serves_the_plans_capacity() {
    let dir = TempDir::new().unwrap();
    let output = campaign(&dir, "Disabled");
    assert!(output.status.success(), "{}", stderr(&output));
    let out = dir.path().join("out");
    let index = read_json(&out.join("campaign.json"));
    assert_eq!(index["nvidia_smi"]["name"], "NVIDIA H200");
    assert_eq!(index["nvidia_smi"]["mig_mode"], "Disabled");
    assert_eq!(index["gpu_model"], "h200-141gb");
    let status = |step: &str| {
        let steps = index["steps"].as_array().unwrap();
        let found = steps.iter().find(|s| s["step"] == step).unwrap_or_else(|| panic!("no step {step}: {index}"));
        found["status"].as_str().unwrap().to_string()
    };
    let served = ["profile-p1", "profile-p2", "profile-p3", "plan", "planned", "procs-p2", "procs-p3", "shared"];
    for step in std::iter::once("mps-start").chain(served) {
        assert_eq!(status(step), "0", "{step}");
    }
    for step in ["measured", "measured-table", "trace"] {
        assert_eq!(status(step), "0", "{step}");
    }
    // No NVML here: every schedule is refused, none is compared.
    for scheduler in ["fifo", "greedy", "ga"] {
        for prefetch in ["none", "lookahead"] {
            assert_eq!(status(&format!("run-{scheduler}-{prefetch}")), "1");
        }
    }
    let log = std::fs::read_to_string(out.join("steps.log")).unwrap();
    assert!(log.contains("error: no GPU to run the schedule on"), "{log}");
    assert!(!out.join("runs.json").exists() && !out.join("run-ga-none.json").exists());

    // Profiles of 1, 2 and 3 processes, 16 batch sizes each, as Tessera rows.
    let profiles = std::fs::read_to_string(out.join("profiles.csv")).unwrap();
    assert_eq!(profiles.lines().count(), 1 + 3 * 16, "{profiles}");
    assert!(profiles.lines().nth(1).unwrap().starts_with("h200-141gb,resnet50,7,1,1,"), "{profiles}");
    // The plan's busiest segment, served at the capacity the plan gives it.
    let plan = read_json(&out.join("plan.json"));
    let busiest = plan["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|gpu| gpu["instances"].as_array().unwrap())
        .max_by(|a, b| a["capacity_rps"].as_f64().unwrap().total_cmp(&b["capacity_rps"].as_f64().unwrap()))
        .unwrap()
        .clone();
    let planned = read_json(&out.join("planned.json"));
    assert_eq!(planned["planned_capacity_rps"], busiest["capacity_rps"]);
    assert_eq!((&planned["max_batch"], &planned["procs"]), (&busiest["batch"], &busiest["procs"]));
    let slo = std::fs::read_to_string(out.join("services.csv")).unwrap();
    let slo_ms: f64 = slo.lines().nth(1).unwrap().split(',').nth(3).unwrap().parse().unwrap();
    assert_eq!(planned["levels"][0]["slo_ms"].as_f64(), Some(slo_ms));
    // simulate measured read the four served runs: three segments and a
    // shared instance of four members.
    let measured = read_json(&out.join("measured.json"));
    let runs = measured.as_array().unwrap();
    let procs: Vec<u64> = runs[..3].iter().map(|run| run["procs"].as_u64().unwrap()).collect();
    assert_eq!(procs, [busiest["procs"].as_u64().unwrap(), 2, 3]);
    assert_eq!(runs[3]["members"].as_array().unwrap().len(), 4, "{}", runs[3]);
    assert!(std::fs::read_to_string(out.join("measured.txt")).unwrap().contains("kept"));
    assert_eq!(read_json(&out.join("mig.json"))["status"], "skipped");

    let calls = calls(&dir);
    assert_only_reads(&calls);
    let mps: Vec<&String> = calls.iter().filter(|call| call.starts_with("mps")).collect();
    assert_eq!(mps.len(), 2, "{calls:?}");
    assert!(mps[0].starts_with("mps -d ") && mps[0].ends_with("/out/mps/pipe") && mps[1] == "mps quit", "{mps:?}");
}

#[test]
fn with_mig_on_and_instances_there_the_campaign_changes_nothing() {
    let dir = TempDir::new().unwrap();
    let output = campaign(&dir, "Enabled");
    assert!(output.status.success(), "{}", stderr(&output));
    let out = dir.path().join("out");
    let mig = read_json(&out.join("mig.json"));
    assert_eq!((&mig["mig_mode"], &mig["status"]), (&"Enabled".into(), &"skipped".into()));
    assert!(mig["note"].as_str().unwrap().contains("already has GPU instances"), "{mig}");
    // The profiles and placements as the driver lists them, kept.
    for list in ["mig-lgip.txt", "mig-lgipp.txt"] {
        let text = std::fs::read_to_string(out.join(list)).unwrap();
        assert_eq!(text, "(stand-in) GPU instance profiles\n", "{list}");
    }
    // No MIG device listed to run on: nothing served, no MPS daemon.
    let log = std::fs::read_to_string(out.join("steps.log")).unwrap();
    assert!(log.contains("serving: skipped, MIG is enabled and GPU 0 has no MIG device"), "{log}");
    let calls = calls(&dir);
    assert_only_reads(&calls);
    assert!(!calls.iter().any(|call| call.starts_with("mps") || call.contains("torch_serve.py")), "{calls:?}");
}

#[test]
fn past_its_budget_the_campaign_starts_no_step_and_says_so() {
    let dir = TempDir::new().unwrap();
    let output = campaign_within(&dir, "Disabled", 0);
    assert!(output.status.success(), "{}", stderr(&output));
    let index = read_json(&dir.path().join("out/campaign.json"));
    let steps = index["steps"].as_array().unwrap();
    assert!(!steps.is_empty() && steps.iter().all(|step| step["status"] == "skipped"), "{index}");
    assert!(!calls(&dir).iter().any(|call| call.contains("torch_serve.py") || call.starts_with("mps")));
}
