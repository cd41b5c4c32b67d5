//! `tessera deploy` end to end on a machine without nvidia-smi (the
//! deployment logic itself is tested against the fake in tessera-gpu).

mod common;

use std::process::Output;

use tempfile::TempDir;

/// Runs tessera with an empty PATH, so nvidia-smi is never found.
fn tessera(args: &[&str], dir: &TempDir) -> Output {
    let store = dir.path().join("store.sqlite");
    common::run_with_env(args, &[("PATH", dir.path()), ("TESSERA_STORE", &store)])
}

fn demo_plan(dir: &TempDir) -> String {
    let plan = dir.path().join("plan.json");
    let plan = plan.to_str().unwrap().to_string();
    let output = tessera(&["plan", "--demo", "--format", "json", "-o", &plan], dir);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    plan
}

#[test]
fn dry_run_prints_commands_and_apply_needs_nvidia_smi() {
    let dir = TempDir::new().unwrap();
    let plan = demo_plan(&dir);
    let output = tessera(&["deploy", &plan, "--node", "0"], &dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("nvidia-smi mig -i 0 -cgi "), "{stdout}");
    assert!(stdout.contains("-cci") && stdout.contains("nvidia-cuda-mps-control -d"), "{stdout}");

    for args in [vec!["deploy", &plan, "--node", "0", "--apply"], vec!["deploy", "status", &plan, "--node", "0"]] {
        let output = tessera(&args, &dir);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1));
        assert_eq!(stderr.trim(), "error: nvidia-smi not found: install the NVIDIA driver or use --dry-run");
    }

    let output = tessera(&["deploy", &plan, "--node", "99"], &dir);
    assert!(String::from_utf8_lossy(&output.stderr).contains("no GPU on node 99"));
    let output = tessera(&["deploy", &plan], &dir);
    assert_eq!(output.status.code(), Some(2));
}
