//! Nsight Compute reports aggregated into KACE's six kernel metrics.
//!
//! `ncu --csv --metrics <NCU_METRICS joined by ','> <app>` prints one row per
//! (kernel launch, metric) with quoted columns, among them `"ID"` (the
//! launch), `"Kernel Name"`, `"Metric Name"`, `"Metric Unit"` and
//! `"Metric Value"` (numbers may carry thousands separators: `"1,024"`).
//! Lines ncu prints around the table (`==PROF== …`, the application's own
//! output before the header) are skipped.
//!
//! Per launch: threads = grid × block, registers = threads × registers per
//! thread, static shared memory = grid × static bytes per block, and the
//! three throughputs in % of peak. Each metric is averaged over launches
//! weighted by the launch's duration, as KACE's
//! `output_<workload>_ncu_total.csv` files are; the result is in
//! [`KERNEL_METRIC_NAMES`](tessera_core::colocation::KERNEL_METRIC_NAMES) order.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::error::GpuError;
use crate::runner::shell_word;
use crate::workload::{DeviceTarget, WorkloadOutput, WorkloadRunner};

/// The metrics to pass to `ncu --metrics` (comma-separated), all of which
/// [`aggregate_report`] needs for every kernel launch:
///
/// - `gpu__time_duration.sum`: the launch's duration, its weight;
/// - `sm__throughput.avg.pct_of_peak_sustained_elapsed`: SM throughput %;
/// - `gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed`: DRAM
///   throughput %;
/// - `gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed`:
///   memory throughput %;
/// - `launch__grid_size`: blocks per grid;
/// - `launch__block_size`: threads per block;
/// - `launch__registers_per_thread`;
/// - `launch__shared_mem_per_block_static`: static shared memory, bytes
///   per block.
pub const NCU_METRICS: [&str; 8] =
    [DURATION, SM_PCT, DRAM_PCT, MEMORY_PCT, GRID_SIZE, BLOCK_SIZE, REGISTERS_PER_THREAD, SHARED_PER_BLOCK];

const DURATION: &str = "gpu__time_duration.sum";
const SM_PCT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
const DRAM_PCT: &str = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed";
const MEMORY_PCT: &str = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
const GRID_SIZE: &str = "launch__grid_size";
const BLOCK_SIZE: &str = "launch__block_size";
const REGISTERS_PER_THREAD: &str = "launch__registers_per_thread";
const SHARED_PER_BLOCK: &str = "launch__shared_mem_per_block_static";

/// How a metric's unit is read.
#[derive(Clone, Copy)]
enum Kind {
    /// A time, converted to nanoseconds.
    Duration,
    /// A percentage of peak.
    Percent,
    /// A count or a number of bytes, possibly with a decimal prefix
    /// (`Kbyte` = 1000 bytes, as ncu prints them).
    Amount,
}

fn kind_of(metric: &str) -> Kind {
    match metric {
        DURATION => Kind::Duration,
        SM_PCT | DRAM_PCT | MEMORY_PCT => Kind::Percent,
        _ => Kind::Amount,
    }
}

/// The factor that turns a value in `unit` into the metric's base unit, or
/// `None` for a unit this reader does not understand.
fn unit_factor(kind: Kind, unit: &str) -> Option<f64> {
    let unit = unit.trim();
    match kind {
        Kind::Duration => match unit {
            "" | "ns" | "nsecond" => Some(1.0),
            "us" | "usecond" => Some(1e3),
            "ms" | "msecond" => Some(1e6),
            "s" | "second" => Some(1e9),
            _ => None,
        },
        Kind::Percent => matches!(unit, "" | "%").then_some(1.0),
        Kind::Amount => {
            let base = unit.split('/').next().unwrap_or("");
            let mut chars = base.chars();
            let factor = match chars.next() {
                None => return Some(1.0),
                Some('K') => 1e3,
                Some('M') => 1e6,
                Some('G') => 1e9,
                Some('T') => 1e12,
                Some(c) if c.is_ascii_lowercase() => {
                    return base.chars().all(|c| c.is_ascii_lowercase()).then_some(1.0)
                }
                Some(_) => return None,
            };
            let rest = chars.as_str();
            (!rest.is_empty() && rest.chars().all(|c| c.is_ascii_lowercase())).then_some(factor)
        }
    }
}

/// One kernel launch: its first line, its name, and its metrics in base
/// units with the line each came from.
struct Launch {
    id: String,
    name: String,
    line: usize,
    metrics: HashMap<&'static str, (f64, usize)>,
}

/// Aggregates an `ncu --csv --metrics` report (see [`NCU_METRICS`]) into
/// KACE's six kernel metrics, in [`KERNEL_METRIC_NAMES`](tessera_core::colocation::KERNEL_METRIC_NAMES) order: each
/// launch's threads, SM %, DRAM %, memory %, registers and static shared
/// memory, averaged over launches weighted by duration. `source` names the
/// report in errors (a path, or the command that produced it).
pub fn aggregate_report(text: &str, source: &str) -> Result<[f64; 6], GpuError> {
    let error = |line: usize, field: &str, message: String| GpuError::NcuReport {
        report: source.to_string(),
        line,
        field: field.to_string(),
        message,
    };
    let mut lines = text.lines().enumerate().map(|(i, line)| (i + 1, line.trim_end_matches('\r')));
    let is_noise = |line: &str| line.trim().is_empty() || line.starts_with("==");

    // The header: the first line (not ncu's own `==…` lines) that parses
    // as CSV and names the launch ID and the metric name.
    let (header_line, header) = loop {
        let Some((number, line)) = lines.next() else {
            return Err(error(
                text.lines().count().max(1),
                "header",
                "no Nsight Compute CSV header (a line with \"ID\" and \"Metric Name\" columns); was ncu run with --csv?"
                    .to_string(),
            ));
        };
        if is_noise(line) {
            continue;
        }
        if let Some(fields) = parse_line(line) {
            if fields.iter().any(|f| f == "ID") && fields.iter().any(|f| f == "Metric Name") {
                break (number, fields);
            }
        }
    };
    let column = |name: &str| header.iter().position(|h| h == name);
    let require = |name: &str| column(name).ok_or_else(|| error(header_line, name, "missing column".to_string()));
    let id_column = require("ID")?;
    let metric_column = require("Metric Name")?;
    let value_column = require("Metric Value")?;
    let unit_column = column("Metric Unit");
    let name_column = column("Kernel Name");

    let mut launches: Vec<Launch> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (number, line) in lines {
        if is_noise(line) {
            continue;
        }
        let fields = parse_line(line).ok_or_else(|| error(number, "row", "not a CSV line".to_string()))?;
        if fields.len() != header.len() {
            return Err(error(
                number,
                "row",
                format!(
                    "{} where the header (line {header_line}) has {}",
                    tessera_core::text::count(fields.len(), "field"),
                    header.len()
                ),
            ));
        }
        let Some(&metric) = NCU_METRICS.iter().find(|m| **m == fields[metric_column]) else {
            continue; // A metric this aggregation does not use.
        };
        let id = &fields[id_column];
        let position = *index.entry(id.clone()).or_insert_with(|| {
            launches.push(Launch {
                id: id.clone(),
                name: name_column.map_or_else(String::new, |c| fields[c].clone()),
                line: number,
                metrics: HashMap::new(),
            });
            launches.len() - 1
        });
        let raw = &fields[value_column];
        let value = parse_number(raw).ok_or_else(|| {
            error(number, metric, format!("value '{raw}' of kernel launch {id} is not a non-negative number"))
        })?;
        let unit = unit_column.map_or("", |c| fields[c].as_str());
        let factor = unit_factor(kind_of(metric), unit)
            .ok_or_else(|| error(number, metric, format!("unit '{unit}' of kernel launch {id} is not understood")))?;
        if let Some((_, first)) = launches[position].metrics.insert(metric, (value * factor, number)) {
            return Err(error(number, metric, format!("kernel launch {id} already has this metric on line {first}")));
        }
    }

    if launches.is_empty() {
        return Err(error(
            header_line,
            "ID",
            format!("no kernel launches with the metrics tessera needs ({})", NCU_METRICS.join(",")),
        ));
    }
    let mut total_weight = 0.0;
    let mut sums = [0.0; 6];
    for launch in &launches {
        let get = |metric: &str| {
            launch.metrics.get(metric).map(|(value, _)| *value).ok_or_else(|| {
                let name = if launch.name.is_empty() { String::new() } else { format!(" ({})", launch.name) };
                error(launch.line, metric, format!("kernel launch {}{name} has no value for this metric", launch.id))
            })
        };
        let duration = get(DURATION)?;
        let grid = get(GRID_SIZE)?;
        let threads = grid * get(BLOCK_SIZE)?;
        let values = [
            threads,
            get(SM_PCT)?,
            get(DRAM_PCT)?,
            get(MEMORY_PCT)?,
            threads * get(REGISTERS_PER_THREAD)?,
            grid * get(SHARED_PER_BLOCK)?,
        ];
        total_weight += duration;
        for (sum, value) in sums.iter_mut().zip(values) {
            *sum += duration * value;
        }
    }
    if total_weight <= 0.0 {
        let line = launches[0].metrics.get(DURATION).map_or(launches[0].line, |(_, line)| *line);
        return Err(error(line, DURATION, "every kernel launch lasted 0; nothing to weight by".to_string()));
    }
    Ok(sums.map(|sum| sum / total_weight))
}

/// One CSV line's fields, or `None` if it is not one CSV record.
fn parse_line(line: &str) -> Option<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(line.as_bytes());
    let mut records = reader.records();
    let record = records.next()?.ok()?;
    if records.next().is_some() {
        return None;
    }
    Some(record.iter().map(|f| f.trim().to_string()).collect())
}

/// A finite, non-negative number, thousands separators allowed.
fn parse_number(raw: &str) -> Option<f64> {
    let value: f64 = raw.replace(',', "").trim().parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some(value)
}

/// How a workload is run under Nsight Compute for [`profile_live`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcuRun {
    /// The `ncu` program: a name on `PATH` or a path.
    pub program: String,
    /// Kernel launches left unprofiled first (warm-up, autotuning).
    pub launch_skip: u32,
    /// Kernel launches profiled, after which ncu terminates the workload.
    pub launch_count: u32,
    /// How long the profiled run may take before it is stopped.
    pub timeout: Duration,
}

impl NcuRun {
    /// The shell command that profiles `workload_command`: the metrics of
    /// [`NCU_METRICS`] for `launch_count` launches after `launch_skip`, in
    /// every process the workload starts, with the GPU's clocks left alone
    /// (`--clock-control none`: nothing on the node is changed), then the
    /// workload terminated (`--kill yes`) and the CSV printed.
    pub fn command(&self, workload_command: &str) -> String {
        format!(
            "exec {} --csv --metrics {} --launch-skip {} --launch-count {} --kill yes --target-processes all \
             --clock-control none sh -c {}",
            shell_word(&self.program),
            NCU_METRICS.join(","),
            self.launch_skip,
            self.launch_count,
            shell_word(workload_command)
        )
    }
}

/// Runs `workload_command` on `device` under Nsight Compute (see
/// [`NcuRun::command`]) and aggregates its report with
/// [`aggregate_report`]. A run still going after `run.timeout` is stopped.
pub fn profile_live(
    launcher: &mut dyn WorkloadRunner,
    device: &DeviceTarget,
    workload_command: &str,
    run: &NcuRun,
) -> Result<[f64; 6], GpuError> {
    let command = run.command(workload_command);
    let mut running = launcher.start(&command, &device.cuda_env())?;
    let started = Instant::now();
    while running.is_running() {
        if started.elapsed() >= run.timeout {
            running.stop()?;
            return Err(GpuError::Workload {
                command: workload_command.to_string(),
                message: format!(
                    "ncu had not profiled {} kernel launches after skipping {} within {} s; \
                     raise --timeout or lower --launch-skip/--launch-count",
                    run.launch_count,
                    run.launch_skip,
                    run.timeout.as_secs_f64()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = running.stop()?;
    if output.status == Some(127) {
        return Err(GpuError::NcuMissing { program: run.program.clone() });
    }
    let source = format!("output of `{command}`");
    match aggregate_report(&output.stdout, &source) {
        Ok(metrics) => Ok(metrics),
        // ncu's own failure (or the workload's) says more than a missing table.
        Err(_) if !output.ok() || output.stdout.contains("==ERROR==") => Err(GpuError::Workload {
            command: workload_command.to_string(),
            message: format!(
                "ncu exited with status {} and no report: {}",
                output.status.map_or_else(|| "?".to_string(), |s| s.to_string()),
                ncu_error_line(&output)
            ),
        }),
        Err(error) => Err(error),
    }
}

/// ncu's first `==ERROR==` line, else the last line of standard error.
fn ncu_error_line(output: &WorkloadOutput) -> String {
    output
        .stdout
        .lines()
        .chain(output.stderr.lines())
        .find(|line| line.starts_with("==ERROR=="))
        .map_or_else(|| output.last_error_line(), |line| line.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{FakeWorkloadRunner, ShellWorkloadRunner};

    const HEADER: &str = "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";

    /// One launch with every metric; `skip` leaves one out.
    fn launch(id: u32, skip: Option<&str>) -> String {
        let values = [
            (DURATION, "nsecond", "1,000"),
            (SM_PCT, "%", "50"),
            (DRAM_PCT, "%", "20"),
            (MEMORY_PCT, "%", "30"),
            (GRID_SIZE, "", "10"),
            (BLOCK_SIZE, "", "128"),
            (REGISTERS_PER_THREAD, "register/thread", "32"),
            (SHARED_PER_BLOCK, "byte/block", "0"),
        ];
        values
            .iter()
            .filter(|(m, _, _)| Some(*m) != skip)
            .map(|(m, u, v)| format!("\"{id}\",\"k{id}\",\"{m}\",\"{u}\",\"{v}\"\n"))
            .collect()
    }

    fn message(text: &str) -> String {
        aggregate_report(text, "r.csv").unwrap_err().to_string()
    }

    fn assert_names(message: &str, needles: &[&str]) {
        assert_eq!(message.lines().count(), 1, "one line: {message}");
        for needle in needles {
            assert!(message.contains(needle), "{needle:?} not in: {message}");
        }
    }

    #[test]
    fn one_launch_gives_its_own_metrics() {
        let metrics = aggregate_report(&format!("{HEADER}{}", launch(0, None)), "r.csv").unwrap();
        assert_eq!(metrics, [1280.0, 50.0, 20.0, 30.0, 40960.0, 0.0]);
    }

    #[test]
    fn units_are_converted_to_base_units() {
        let text = format!(
            "{HEADER}{}\"1\",\"k\",\"{DURATION}\",\"usecond\",\"3\"\n{}",
            launch(0, None),
            launch(1, Some(DURATION))
                .replace("\"byte/block\",\"0\"", "\"Kbyte/block\",\"1.5\"")
                .replace(&format!("\"{GRID_SIZE}\",\"\",\"10\""), &format!("\"{GRID_SIZE}\",\"Kblock\",\"2\""))
        );
        // Launch 0 weighs 1000 ns, launch 1 3000 ns (3 µs) with a grid of
        // 2000 blocks and 1500 bytes per block.
        let metrics = aggregate_report(&text, "r.csv").unwrap();
        let threads = (1280.0 + 3.0 * 2000.0 * 128.0) / 4.0;
        assert_eq!(metrics[0], threads);
        assert_eq!(metrics[5], 3.0 * 2000.0 * 1500.0 / 4.0);
        assert!(unit_factor(Kind::Percent, "byte").is_none());
        assert!(unit_factor(Kind::Duration, "cycle").is_none());
        assert!(unit_factor(Kind::Amount, "Xbyte").is_none());
    }

    #[test]
    fn bad_reports_give_one_line_errors() {
        assert_names(&message("==PROF== Disconnected\n"), &["r.csv:1:", "header", "--csv"]);
        let no_value = "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\"\n\"0\",\"k\",\"a\",\"\"\n";
        assert_names(&message(no_value), &["r.csv:1:", "Metric Value", "missing column"]);
        assert_names(&message(HEADER), &["r.csv:1:", "no kernel launches"]);
        let bad = launch(0, None).replace("\"1,000\"", "\"n/a\"");
        assert_names(&message(&format!("{HEADER}{bad}")), &["r.csv:2:", DURATION, "'n/a'", "launch 0"]);
        let negative = launch(0, None).replace("\"50\"", "\"-5\"");
        assert_names(&message(&format!("{HEADER}{negative}")), &["r.csv:3:", SM_PCT, "'-5'"]);
        let text = format!("{HEADER}{}{}", launch(0, None), launch(1, Some(REGISTERS_PER_THREAD)));
        assert_names(&message(&text), &["r.csv:10:", REGISTERS_PER_THREAD, "launch 1 (k1)", "no value"]);
        let text = format!("{HEADER}{}{}", launch(0, None), launch(0, None));
        assert_names(&message(&text), &["r.csv:10:", DURATION, "already", "line 2"]);
        let text = format!("{HEADER}{}", launch(0, None).replace("\"%\",\"20\"", "\"cycle\",\"20\""));
        assert_names(&message(&text), &["r.csv:4:", DRAM_PCT, "unit 'cycle'"]);
        let text = format!("{HEADER}{}\"1\",\"k\"\n", launch(0, None));
        assert_names(&message(&text), &["r.csv:10:", "row", "2 fields"]);
        let zero = launch(0, None).replace("\"1,000\"", "\"0\"");
        assert_names(&message(&format!("{HEADER}{zero}")), &["r.csv:2:", DURATION, "lasted 0"]);
    }

    fn ncu_run(program: &str, timeout_ms: u64) -> NcuRun {
        NcuRun {
            program: program.to_string(),
            launch_skip: 5,
            launch_count: 7,
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    #[test]
    fn live_profiling_runs_the_workload_under_ncu_on_the_device() {
        let report = format!("==PROF== Connected to process 4242\nwarming up\n{HEADER}{}", launch(0, None));
        let output = WorkloadOutput { status: Some(0), stdout: report, stderr: String::new() };
        let mut launcher = FakeWorkloadRunner::new([output]);
        let device = DeviceTarget::Mig("MIG-abc".to_string());
        let metrics = profile_live(&mut launcher, &device, "python bench.py --batch 8", &ncu_run("ncu", 5000)).unwrap();
        assert_eq!(metrics, [1280.0, 50.0, 20.0, 30.0, 40960.0, 0.0]);
        let (command, env) = &launcher.started[0];
        assert!(command.starts_with("exec ncu --csv --metrics gpu__time_duration.sum,"), "{command}");
        assert!(command.contains("--launch-skip 5 --launch-count 7 --kill yes"), "{command}");
        assert!(command.ends_with("sh -c 'python bench.py --batch 8'"), "{command}");
        assert!(env.contains(&("CUDA_VISIBLE_DEVICES".to_string(), "MIG-abc".to_string())));
    }

    #[test]
    fn live_profiling_failures_are_one_line_errors() {
        let device = DeviceTarget::Gpu(0);
        let output = |status, stdout: &str| WorkloadOutput { status, stdout: stdout.into(), stderr: String::new() };

        let mut launcher = FakeWorkloadRunner::new([output(Some(127), "")]);
        let missing = profile_live(&mut launcher, &device, "w", &ncu_run("ncu", 5000)).unwrap_err();
        assert!(matches!(missing, GpuError::NcuMissing { .. }), "{missing}");

        let failed = "==PROF== Connected\n==ERROR== The application returned an error code (1).\n";
        let mut launcher = FakeWorkloadRunner::new([output(Some(1), failed)]);
        let message = profile_live(&mut launcher, &device, "w", &ncu_run("ncu", 5000)).unwrap_err().to_string();
        assert_names(&message, &["`w`", "status 1", "==ERROR== The application returned an error code (1)."]);

        // A workload that never gets through its launches is stopped.
        let mut launcher = FakeWorkloadRunner::new([output(None, "")]);
        let message = profile_live(&mut launcher, &device, "w", &ncu_run("ncu", 100)).unwrap_err().to_string();
        assert_names(&message, &["`w`", "within 0.1 s", "--timeout"]);
        assert_eq!(launcher.running(), 0);
    }

    #[test]
    fn live_profiling_through_a_shell_with_a_stand_in_ncu() {
        // A stand-in `ncu` that checks its flags, runs the workload it was
        // given (`sh -c COMMAND`, its last two arguments) and prints a
        // report; the workload's quotes must survive both shells.
        let dir = tempfile::tempdir().unwrap();
        let ncu = dir.path().join("ncu");
        let script = format!(
            "#!/bin/sh\ncase \"$*\" in *'--kill yes'*'--clock-control none'*) ;; *) exit 3;; esac\n\
             for last; do :; done\nsh -c \"$last\" > {out} || exit 4\nprintf '%s' '{HEADER}{launch}'\n",
            out = dir.path().join("workload.out").display(),
            launch = launch(0, None),
        );
        std::fs::write(&ncu, script).unwrap();
        std::fs::set_permissions(&ncu, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let run = ncu_run(&ncu.display().to_string(), 10_000);
        let metrics = profile_live(
            &mut ShellWorkloadRunner::default(),
            &DeviceTarget::Gpu(0),
            "echo \"it's $CUDA_VISIBLE_DEVICES\"",
            &run,
        )
        .unwrap();
        assert_eq!(metrics[0], 1280.0);
        assert_eq!(std::fs::read_to_string(dir.path().join("workload.out")).unwrap(), "it's 0\n");

        let missing = ncu_run(&dir.path().join("no-ncu").display().to_string(), 10_000);
        let error =
            profile_live(&mut ShellWorkloadRunner::default(), &DeviceTarget::Gpu(0), "true", &missing).unwrap_err();
        assert!(matches!(error, GpuError::NcuMissing { .. }), "{error}");
    }
}

/// A report of four launches by a real `ncu --csv` run, aggregated by hand.
#[cfg(test)]
mod fixture_tests {
    use super::*;

    const FIXTURE: &str = include_str!("../tests/fixtures/ncu_report.csv");

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
}
