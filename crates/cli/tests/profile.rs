//! `tessera profile kernels` end to end, and its file read back by the
//! KACE workload-table reader.

mod common;

use std::path::{Path, PathBuf};

use common::tessera;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../gpu/tests/fixtures/ncu_report.csv")
}

#[test]
fn kernels_import_writes_kaces_table_that_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let kernels = dir.path().join("kernel_metrics");
    std::fs::create_dir(&kernels).unwrap();
    let report = fixture();
    let output = tessera(
        &[
            "profile",
            "kernels",
            "--import",
            report.to_str().unwrap(),
            "--workload",
            "w",
            "--output",
            kernels.to_str().unwrap(),
        ],
        &store,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    for needle in
        ["Threads", "60399.95", "Compute (SM) Throughput", "60.86", "Static Shared Memory", "output_w_ncu_total.csv"]
    {
        assert!(stdout.contains(needle), "{needle:?} not in:\n{stdout}");
    }

    let file = kernels.join("output_w_ncu_total.csv");
    let text = std::fs::read_to_string(&file).unwrap();
    let expected = tessera_gpu::ncu::aggregate_report(&std::fs::read_to_string(&report).unwrap(), "fixture").unwrap();
    assert_eq!(text, tessera_gpu::ncu::kernel_table_csv("w", &expected));

    let system = dir.path().join("system_metrics.csv");
    std::fs::write(&system, "Type,Exclusive100,sm%,mem%,memcap,Exclusive50\nw,120.5,61,40,3.2,60\n").unwrap();
    let workloads = tessera_store::read_workload_tables(&system, &kernels).unwrap();
    assert_eq!(workloads.len(), 1);
    assert_eq!(workloads[0].workload, "w");
    assert_eq!(workloads[0].kernel, expected, "the six metrics round-trip exactly");
    assert_eq!(workloads[0].exclusive_rps, 120.5);
}

#[test]
fn kernels_without_import_or_with_a_bad_report_fail_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let fails = |args: &[&str], needles: &[&str]| {
        let output = tessera(args, &store);
        let message = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!output.status.success());
        assert_eq!(message.trim_end().lines().count(), 1, "one line: {message}");
        for needle in needles {
            assert!(message.contains(needle), "{needle:?} not in: {message}");
        }
    };
    fails(&["profile", "kernels", "--workload", "w"], &["live profiling", "not available yet", "--import"]);

    let bad = dir.path().join("bad.csv");
    let text = std::fs::read_to_string(fixture()).unwrap().replacen("\"45.50\"", "\"n/a\"", 1);
    std::fs::write(&bad, text).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    fails(
        &[
            "profile",
            "kernels",
            "--import",
            bad.to_str().unwrap(),
            "--workload",
            "w",
            "--output",
            out.to_str().unwrap(),
        ],
        &["bad.csv:11:", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "'n/a'"],
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "nothing written on error");
    fails(&["profile", "kernels", "--import", bad.to_str().unwrap(), "--workload", "a/b"], &["--workload", "'a/b'"]);
}
