//! The Nsight Compute fixture aggregates to hand-computed KACE metrics.

use tessera_gpu::ncu::{aggregate_report, kernel_table_csv, NCU_METRICS};

const FIXTURE: &str = include_str!("fixtures/ncu_report.csv");

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0)
}

#[test]
fn fixture_aggregates_to_hand_computed_values() {
    // Four launches (the fill kernel twice), weights in ns: 8192, 40.96 µs
    // = 40960, 4096, 8000; total 61248.
    let weights = [8192.0, 40960.0, 4096.0, 8000.0];
    let total: f64 = weights.iter().sum();
    assert_eq!(total, 61248.0);
    let weighted = |values: [f64; 4]| weights.iter().zip(values).map(|(w, v)| w * v).sum::<f64>() / total;
    // threads = grid × block: 1,024 × 128; 96 × 128; 256 × 1,024; 1,024 × 128.
    let threads = [1024.0 * 128.0, 96.0 * 128.0, 256.0 * 1024.0, 1024.0 * 128.0];
    let registers_per_thread = [16.0, 122.0, 32.0, 16.0];
    let expected = [
        weighted(threads),
        weighted([45.5, 71.3, 20.1, 44.0]),
        weighted([88.2, 35.6, 60.7, 88.2]),
        weighted([88.2, 62.4, 60.7, 88.2]),
        weighted([0, 1, 2, 3].map(|i| threads[i] * registers_per_thread[i])),
        // 16.38 Kbyte/block = 16380 bytes; 64 bytes per block.
        weighted([0.0, 96.0 * 16380.0, 256.0 * 64.0, 0.0]),
    ];
    let metrics = aggregate_report(FIXTURE, "ncu_report.csv").unwrap();
    for (i, (actual, expected)) in metrics.iter().zip(expected).enumerate() {
        assert!(close(*actual, expected), "metric {i}: {actual} vs {expected}");
    }
    // The same numbers, worked out by hand once.
    let by_hand = [60399.94984326019, 60.859352142110765, 51.184326018808775, 69.10700104493208, 2117970.123301985];
    for (actual, expected) in metrics.iter().zip(by_hand) {
        assert!(close(*actual, expected), "{actual} vs {expected}");
    }
    assert!(close(metrics[5], 1052701.9602925808));
}

#[test]
fn every_metric_the_fixture_needs_is_in_ncu_metrics() {
    for metric in NCU_METRICS {
        assert_eq!(FIXTURE.matches(&format!("\"{metric}\"")).count(), 4, "{metric}: one row per launch");
    }
}

#[test]
fn a_launch_without_a_metric_names_it_in_one_line() {
    let broken: String = FIXTURE
        .lines()
        .filter(|line| !(line.starts_with("\"2\"") && line.contains("launch__block_size")))
        .fold(String::new(), |mut text, line| {
            text.push_str(line);
            text.push('\n');
            text
        });
    let message = aggregate_report(&broken, "ncu_report.csv").unwrap_err().to_string();
    assert_eq!(message.lines().count(), 1);
    for needle in ["ncu_report.csv:28:", "launch__block_size", "launch 2", "cunn_SoftMaxForward", "no value"] {
        assert!(message.contains(needle), "{needle:?} not in {message}");
    }
}

#[test]
fn kernel_table_carries_the_aggregate() {
    let metrics = aggregate_report(FIXTURE, "ncu_report.csv").unwrap();
    let table = kernel_table_csv("w", &metrics);
    let row = table.lines().nth(1).unwrap();
    let values: Vec<f64> = row.split(',').take(6).map(|v| v.parse().unwrap()).collect();
    assert_eq!(values, metrics.to_vec(), "values round-trip exactly");
    assert!(row.ends_with(",w"));
}
