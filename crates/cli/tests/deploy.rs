//! `tessera deploy` end to end, with an empty PATH (no nvidia-smi) or with
//! a fake `nvidia-smi` script there that reports one GPU without MIG
//! instances and logs its arguments. Applying a layout and starting MPS
//! services is tested against the faithful fakes in tessera-gpu.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::{stderr, stdout};
use tempfile::TempDir;

/// Runs tessera with `dir` as its whole PATH.
/// Runs the binary with the stand-ins of `dir` first on `PATH`, printing
/// whole lines (`--wide`) so commands can be compared as they run.
fn tessera(args: &[&str], dir: &TempDir) -> Output {
    let store = dir.path().join("store.sqlite");
    let args = [args, &["--wide"]].concat();
    crate::util::run_with_env(&args, &[("PATH", dir.path()), ("TESSERA_STORE", &store)])
}

fn demo_plan(dir: &TempDir) -> String {
    let plan = dir.path().join("plan.json");
    let plan = plan.to_str().unwrap().to_string();
    let output = tessera(&["plan", "--demo", "--format", "json", "-o", &plan], dir);
    assert!(output.status.success(), "{}", stderr(&output));
    plan
}

/// A plan for GPU 0 of node 0, an A100-80GB with `3g.40gb@4` (bert-base,
/// batch 8, two processes) and `1g.10gb@0` (gpt2, batch 1, one process).
fn small_plan(dir: &TempDir) -> String {
    let instance = |profile: &str, size: u8, start: u8, model: &str, batch: u32, procs: u32| {
        serde_json::json!({"profile": profile, "size": size, "start": start, "service": model, "model": model,
            "batch": batch, "procs": procs, "throughput_rps": 100.0, "latency_ms": 10.0})
    };
    let plan = serde_json::json!({
        "gpu_count": 1, "strategy": "test", "latency_rule": "parva", "gpus_per_node": 8, "services": [],
        "gpus": [{"node": 0, "index": 0, "gpu_model": "a100-80gb", "instances": [
            instance("3g.40gb", 3, 4, "bert-base", 8, 2), instance("1g.10gb", 1, 0, "gpt2", 1, 1)]}]
    });
    let path = dir.path().join("small.json");
    std::fs::write(&path, plan.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

/// Puts a fake `nvidia-smi` into `dir` whose GPUs are all `name` with
/// `memory_mib`, in MIG mode without instances; it logs every call's
/// arguments to the returned file and refuses anything it does not know
/// (so a MIG change fails). It uses shell built-ins only, as PATH holds
/// nothing else.
fn fake_nvidia_smi(dir: &TempDir, name: &str, memory_mib: u64) -> PathBuf {
    fake_nvidia_smi_with(dir, &format!("{name}, {memory_mib}, Enabled"), "No GPU instances found: Not Found\"; exit 6")
}

/// The fake of [`fake_nvidia_smi`] answering the GPU query with `query`
/// and `mig -lgi` with `lgi` (a shell string's inside).
fn fake_nvidia_smi_with(dir: &TempDir, query: &str, lgi: &str) -> PathBuf {
    let log = dir.path().join("nvidia-smi.log");
    let script = format!(
        r#"#!/bin/sh
echo "$*" >> '{log}'
case "$*" in
  "--query-gpu=name,memory.total,mig.mode.current --format=csv,noheader,nounits -i "*) echo "{query}" ;;
  "mig -i "*" -lgi") echo "{lgi} ;;
  "mig -i "*" -lci") echo "No compute instances found: Not Found"; exit 6 ;;
  *) echo "ERROR: Invalid combination of input arguments."; exit 2 ;;
esac
"#,
        log = log.display(),
    );
    let path = dir.path().join("nvidia-smi");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    log
}

fn calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

fn register(dir: &TempDir, name: &str, family: &str, batch: &str) {
    let args = ["workload", "add", name, "--family", family, "--task", "inference", "--batch", batch];
    let output = tessera(&[&args[..], &["--command", "python serve.py --batch {batch}"]].concat(), dir);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn dry_run_prints_commands_and_apply_needs_nvidia_smi() {
    let dir = TempDir::new().unwrap();
    let plan = demo_plan(&dir);
    let output = tessera(&["deploy", &plan, "--node", "0"], &dir);
    let stdout = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout.contains("nvidia-smi mig -i 0 -cgi "), "{stdout}");
    assert!(stdout.contains("-cci") && stdout.contains("nvidia-cuda-mps-control -d"), "{stdout}");
    // The demo's workloads are not registered: placeholders and how to register them.
    assert!(stdout.contains("# no registered workload for model bert-base batch 4: `tessera workload add NAME --family bert-base --task inference --batch 4 --command '…'`"), "{stdout}");
    assert!(stdout.contains("sh -c '<command of a workload for bert-base batch 4>' >>"), "{stdout}");

    // Fitted to 80 columns, the same commands with ` \` continuations.
    let store = dir.path().join("store.sqlite");
    let fitted = crate::util::run_with_env(&["deploy", &plan, "--node", "0"], &[("TESSERA_STORE", &store)]);
    let fitted = crate::util::stdout(&fitted);
    assert!(fitted.lines().all(|line| line.chars().count() <= 80), "{fitted}");
    let joined = fitted.replace(" \\\n    ", " ").replace("\n#   ", " ");
    assert_eq!(joined, stdout, "wrapping only breaks lines");

    for args in [vec!["deploy", &plan, "--node", "0", "--apply"], vec!["deploy", "status", &plan, "--node", "0"]] {
        let output = tessera(&args, &dir);
        assert_eq!(output.status.code(), Some(1));
        assert_eq!(stderr(&output).trim(), "error: nvidia-smi not found: install the NVIDIA driver (a deploy without one can still print its commands with --dry-run)");
    }

    let output = tessera(&["deploy", &plan, "--node", "99"], &dir);
    assert!(stderr(&output).contains("no GPU on node 99"));
    let output = tessera(&["deploy", &plan], &dir);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_plan_for_another_gpu_model_is_refused_in_one_line() {
    let dir = TempDir::new().unwrap();
    let plan = demo_plan(&dir);
    let log = fake_nvidia_smi(&dir, "NVIDIA H100 80GB HBM3", 81559);
    let error = "error: GPU 0 is an NVIDIA H100 80GB HBM3 (h100-80gb) but the plan wants a100-80gb";
    assert_refused_after_the_query(&dir, &plan, &log, error);
}

/// Dry run, apply and status of `plan` all fail with `error` alone, and
/// the driver was asked nothing but the GPU query.
fn assert_refused_after_the_query(dir: &TempDir, plan: &str, log: &Path, error: &str) {
    for args in [
        vec!["deploy", plan, "--node", "0"],
        vec!["deploy", plan, "--node", "0", "--apply"],
        vec!["deploy", "status", plan, "--node", "0"],
    ] {
        let output = tessera(&args, dir);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&output).trim(), error);
    }
    assert!(calls(log).iter().all(|call| call.starts_with("--query-gpu=")), "{:?}", calls(log));
}

#[test]
fn a_gpu_without_mig_mode_is_refused_in_one_line() {
    // As a lent H200 node answered: MIG off, and `mig -lgi` says so with status 0.
    let dir = TempDir::new().unwrap();
    let plan = small_plan(&dir);
    let h200 = std::fs::read_to_string(&plan).unwrap().replace("a100-80gb", "h200-141gb");
    std::fs::write(&plan, h200.replace("3g.40gb", "3g.71gb").replace("1g.10gb", "1g.18gb")).unwrap();
    let log = fake_nvidia_smi_with(&dir, "NVIDIA H200, 143771, Disabled", "No MIG-enabled devices found.\"");
    let error = "error: GPU 0 (NVIDIA H200) is not in MIG mode: enable it first (`nvidia-smi -i 0 -mig 1` as root, \
                 on an idle GPU); Tessera never changes MIG mode";
    assert_refused_after_the_query(&dir, &plan, &log, error);
}

#[test]
fn apply_without_a_registered_workload_changes_nothing() {
    let dir = TempDir::new().unwrap();
    let plan = small_plan(&dir);
    let log = fake_nvidia_smi(&dir, "NVIDIA A100-SXM4-80GB", 81920);
    register(&dir, "bert-inf", "bert-base", "8");
    let output = tessera(&["deploy", &plan, "--node", "0", "--apply"], &dir);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim(),
        "error: no registered workload for model gpt2 batch 1; nothing was changed; register one with \
         `tessera workload add NAME --family gpt2 --task inference --batch 1 --command '…'`"
    );
    assert!(calls(&log).iter().all(|call| !call.contains("-cgi")), "{:?}", calls(&log));
    let store = tessera_store::Store::open(&dir.path().join("store.sqlite")).unwrap();
    assert!(store.journal_entries().unwrap().is_empty());
}

#[test]
fn dry_run_and_status_with_the_driver_show_the_registered_workloads() {
    let dir = TempDir::new().unwrap();
    let plan = small_plan(&dir);
    let log = fake_nvidia_smi(&dir, "NVIDIA A100-SXM4-80GB", 81920);
    register(&dir, "bert-inf", "bert-base", "8");
    register(&dir, "gpt2-inf", "gpt2", "1");
    let mps = dir.path().join("mps");
    let mps = mps.to_str().unwrap();

    let output = tessera(&["deploy", &plan, "--node", "0", "--mps-dir", mps], &dir);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: Vec<String> = stdout(&output).lines().map(str::to_string).collect();
    let bert = format!("{mps}/gpu0-3g.40gb-4");
    let env = format!(
        "CUDA_MPS_PIPE_DIRECTORY={bert}/pipe CUDA_MPS_LOG_DIRECTORY={bert}/log CUDA_VISIBLE_DEVICES='<MIG-UUID of GPU 0 3g.40gb@4>'"
    );
    assert_eq!(
        lines[..7],
        [
            "# GPU 0 (a100-80gb): live no instances".to_string(),
            "nvidia-smi mig -i 0 -cgi 3g.40gb:4".to_string(),
            "nvidia-smi mig -i 0 -gi <gi:3g.40gb@4> -cci".to_string(),
            "nvidia-smi mig -i 0 -cgi 1g.10gb:0".to_string(),
            "nvidia-smi mig -i 0 -gi <gi:1g.10gb@0> -cci".to_string(),
            format!("mkdir -p {bert}/pipe {bert}/log"),
            format!("{env} nvidia-cuda-mps-control -d"),
        ]
    );
    assert_eq!(lines[7], format!("{env} sh -c 'python serve.py --batch 8' >>{bert}/proc0.log 2>&1 &"));
    assert_eq!(lines.len(), 1 + 4 + 4 + 3, "{lines:#?}");
    assert!(lines[11].contains("sh -c 'python serve.py --batch 1' >>"), "{}", lines[11]);

    let output = tessera(&["deploy", "status", &plan, "--node", "0", "--mps-dir", mps], &dir);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stdout(&output),
        "GPU 0 (NVIDIA A100-SXM4-80GB): differs: missing [1g.10gb@0, 3g.40gb@4], extra [], without compute instance []\n\
         \x20 3g.40gb@4 (bert-base batch 8): MPS daemon not running, 0 of 2 processes running\n\
         \x20 1g.10gb@0 (gpt2 batch 1): MPS daemon not running, 0 of 1 process running\n"
    );
    assert_eq!(
        stderr(&output).trim(),
        format!("error: on node 0, 1 GPU differs from {plan} and 2 instances do not run as planned")
    );
    assert!(calls(&log).iter().all(|call| call.starts_with("--query-gpu=") || call.contains(" -l")));
}

#[test]
fn a_driver_that_does_not_answer_is_reported_with_nvidia_smis_words() {
    // As nvidia-smi answers when the kernel module is not loaded: status 9.
    let dir = TempDir::new().unwrap();
    let plan = small_plan(&dir);
    let line = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \
                Make sure that the latest NVIDIA driver is installed and running.";
    let path = dir.path().join("nvidia-smi");
    std::fs::write(&path, format!("#!/bin/sh\necho \"{line}\"\nexit 9\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let query = "nvidia-smi --query-gpu=name,memory.total,mig.mode.current --format=csv,noheader,nounits -i 0";
    let error = format!("error: the NVIDIA driver does not answer: `{query}` failed (exit status 9): {line}");
    for args in [
        vec!["deploy", plan.as_str(), "--node", "0"],
        vec!["deploy", plan.as_str(), "--node", "0", "--apply"],
        vec!["deploy", "status", plan.as_str(), "--node", "0"],
    ] {
        let output = tessera(&args, &dir);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&output).trim(), error, "{args:?}");
    }
}

/// [`small_plan`] with `1g.10gb@1` shared by two light services (a
/// serialized executor).
fn shared_plan(dir: &TempDir) -> String {
    let path = small_plan(dir);
    let mut plan: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let member = |service: &str| {
        serde_json::json!({"service": service, "model": "resnet50", "batch": 1, "latency_ms": 5.0,
            "throughput_rps": 200.0, "capacity_rps": 4.0, "memory_gb": 2.0})
    };
    let shared = serde_json::json!({"profile": "1g.10gb", "size": 1, "start": 1, "sharing": "serialized",
        "members": [member("light-a"), member("light-b")]});
    plan["gpus"][0]["instances"].as_array_mut().unwrap().push(shared);
    std::fs::write(&path, plan.to_string()).unwrap();
    path
}

#[test]
fn a_shared_instance_runs_the_multi_model_server_it_is_given() {
    let dir = TempDir::new().unwrap();
    let plan = shared_plan(&dir);
    let log = fake_nvidia_smi(&dir, "NVIDIA A100-SXM4-80GB", 81920);
    register(&dir, "bert-inf", "bert-base", "8");
    register(&dir, "gpt2-inf", "gpt2", "1");
    let mps = dir.path().join("mps");
    let mps = mps.to_str().unwrap();

    // Without a server an apply changes nothing and says what to give.
    let output = tessera(&["deploy", &plan, "--node", "0", "--mps-dir", mps, "--apply"], &dir);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim(),
        "error: GPU 0 1g.10gb@1 is shared by several services and no multi-model server command was given to run \
         it; nothing was changed (give one with --shared-command)"
    );
    assert!(calls(&log).iter().all(|call| !call.contains("-cgi")), "{:?}", calls(&log));

    let server = ["--shared-command", "python serve_many.py"];
    let output = tessera(&[&["deploy", &plan, "--node", "0", "--mps-dir", mps], &server[..]].concat(), &dir);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = stdout(&output);
    let executor: Vec<&str> = lines.lines().filter(|line| line.contains("gpu0-1g.10gb-1/proc")).collect();
    assert_eq!(executor.len(), 1, "one process for the shared instance: {lines}");
    assert!(
        executor[0].contains(r#"sh -c 'TESSERA_SHARING=serialized TESSERA_MEMBERS='\''[{"batch":1,"model":"resnet50","service":"light-a"},"#)
            && executor[0].contains(r#"]'\'' python serve_many.py' >>"#),
        "{}",
        executor[0]
    );

    let output = tessera(&[&["deploy", "status", &plan, "--node", "0", "--mps-dir", mps], &server[..]].concat(), &dir);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains(
            "  1g.10gb@1 (a serialized executor of light-a, light-b): MPS daemon not running, 0 of 1 process running\n"
        ),
        "{}",
        stdout(&output)
    );
}
