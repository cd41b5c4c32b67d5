//! Running a simulated schedule for real: [`execute_schedule`] hands an
//! [`ExecutionPlan`] (every copy, write-back, compute and free of a
//! simulated run, in order, with the commands each must wait for) to a
//! [`ScheduleDevice`] and puts what it measured beside what the simulator
//! predicted.
//!
//! [`ProgramDevice`] is the real one: it runs a program (by default
//! `examples/executor/run_schedule.py`, PyTorch) with `sh -c` on the chosen
//! device, writes the plan as JSON on its standard input, and reads the one
//! line `tessera:execution=<JSON totals>` it prints last. The program keeps
//! device memory under the plan's `memory_bytes`, copies between pinned
//! host buffers and the device on one stream each way, runs a calibrated
//! kernel per compute on a third stream, and makes each command wait for
//! the ends the plan lists. `FakeScheduleDevice` (feature `fake`) replays
//! the plan with given bandwidths and compute speed and refuses what a real
//! run would fail on (device memory above the cap, a command before what it
//! waits for).

use serde::{Deserialize, Serialize};
use tessera_sim::{ExecutionPlan, Totals};

use crate::error::GpuError;
use crate::runner::{CommandRunner, SystemRunner};
use crate::workload::DeviceTarget;

/// The line an executor program prints (last) with its measured totals.
pub const EXECUTION_PREFIX: &str = "tessera:execution=";

/// The program [`ProgramDevice`] runs unless told otherwise (from the
/// repository root).
pub const DEFAULT_EXECUTOR: &str = "python3 examples/executor/run_schedule.py";

/// Something that runs an execution plan and measures it.
pub trait ScheduleDevice {
    /// Runs every command of `plan` and returns the measured totals.
    fn run(&mut self, plan: &ExecutionPlan) -> Result<Totals, GpuError>;
}

/// What [`execute_schedule`] needs.
#[derive(Debug, Clone)]
pub struct ExecuteOptions {
    /// The plan (from `tessera_sim::execution_plan`).
    pub plan: ExecutionPlan,
}

/// Measured and simulated totals of one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ExecutionReport {
    /// What the device measured.
    pub measured: Totals,
    /// What the simulator predicted.
    pub simulated: Totals,
}

impl ExecutionReport {
    /// Measured over simulated makespan, minus 1.
    pub fn makespan_error(&self) -> f64 {
        self.measured.makespan_ms / self.simulated.makespan_ms.max(f64::MIN_POSITIVE) - 1.0
    }
}

/// Runs `options.plan` on `device`.
pub fn execute_schedule(
    device: &mut dyn ScheduleDevice,
    options: &ExecuteOptions,
) -> Result<ExecutionReport, GpuError> {
    let measured = device.run(&options.plan)?;
    Ok(ExecutionReport { measured, simulated: options.plan.simulated })
}

/// Runs the executor program on one device (see the module documentation).
#[derive(Debug, Clone)]
pub struct ProgramDevice {
    /// A shell command line; the plan arrives on its standard input.
    pub program: String,
    /// The device it sees (`CUDA_VISIBLE_DEVICES`).
    pub device: DeviceTarget,
}

impl ScheduleDevice for ProgramDevice {
    fn run(&mut self, plan: &ExecutionPlan) -> Result<Totals, GpuError> {
        let json = serde_json::to_string(plan).map_err(|e| GpuError::Workload {
            command: self.program.clone(),
            message: format!("cannot write the plan: {e}"),
        })?;
        let args = ["-c".to_string(), self.program.clone()];
        let output = SystemRunner.run_with("sh", &args, &self.device.cuda_env(), Some(&json))?;
        let error = |message: String| GpuError::Workload { command: self.program.clone(), message };
        if !output.success() {
            let last = output.stderr.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("no error output");
            return Err(error(format!("exit status {}: {last}", output.status)));
        }
        parse_totals(&output.stdout).map_err(error)
    }
}

/// The totals on the last `tessera:execution=` line of `stdout`.
fn parse_totals(stdout: &str) -> Result<Totals, String> {
    let line = stdout
        .lines()
        .rev()
        .find_map(|line| line.trim().strip_prefix(EXECUTION_PREFIX))
        .ok_or_else(|| format!("no line `{EXECUTION_PREFIX}<JSON>` in its output"))?;
    let totals: Totals = serde_json::from_str(line).map_err(|e| format!("its `{EXECUTION_PREFIX}` line: {e}"))?;
    let values = [totals.makespan_ms, totals.compute_ms, totals.h2d_ms, totals.d2h_ms];
    if values.iter().all(|v| v.is_finite() && *v >= 0.0) {
        Ok(totals)
    } else {
        Err(format!("its `{EXECUTION_PREFIX}` line has a negative or non-finite time"))
    }
}

#[cfg(any(test, feature = "fake"))]
pub use fake::FakeScheduleDevice;

#[cfg(any(test, feature = "fake"))]
mod fake {
    use std::collections::HashMap;

    use tessera_sim::{CommandKind, ExecutionPlan, Totals};

    use super::ScheduleDevice;
    use crate::error::GpuError;

    /// Replays a plan on a modelled GPU: copies at the given bandwidths plus
    /// a latency each, computes at `compute_scale` × their time, each
    /// stream in plan order, each command after the ends it waits for.
    /// Device memory is taken when a copy or compute starts and given back
    /// when a write-back or compute ends or a free happens; going above the
    /// plan's `memory_bytes` fails as a real run would (out of memory).
    #[derive(Debug, Clone)]
    pub struct FakeScheduleDevice {
        /// Host-to-device bandwidth.
        pub h2d_bytes_per_s: f64,
        /// Device-to-host bandwidth.
        pub d2h_bytes_per_s: f64,
        /// Cost of every copy.
        pub copy_latency_ns: u64,
        /// Measured kernel time over the plan's.
        pub compute_scale: f64,
        /// Plans run so far.
        pub runs: usize,
    }

    impl ScheduleDevice for FakeScheduleDevice {
        fn run(&mut self, plan: &ExecutionPlan) -> Result<Totals, GpuError> {
            self.runs += 1;
            let fail = |message: String| GpuError::Workload { command: "fake executor".to_string(), message };
            let copy_ns =
                |bytes: u64, bytes_per_s: f64| self.copy_latency_ns + (bytes as f64 * 1e9 / bytes_per_s).ceil() as u64;
            // Per stream (h2d, d2h, compute): end times in order.
            let mut ends: [Vec<u64>; 3] = [vec![], vec![], vec![]];
            let mut busy = [0u64; 3];
            // (time, change): memory taken (+) or given back (−).
            let mut memory: Vec<(u64, i128)> = Vec::new();
            let mut resident: HashMap<&str, u64> = HashMap::new();
            let mut makespan = 0u64;
            for (index, command) in plan.commands.iter().enumerate() {
                let mut start = 0u64;
                for (stream, count) in [(0, command.after.h2d), (1, command.after.d2h), (2, command.after.compute)] {
                    if count > ends[stream].len() {
                        return Err(fail(format!("command {index} waits for a command that has not run")));
                    }
                    if let Some(&end) = count.checked_sub(1).map(|i| &ends[stream][i]) {
                        start = start.max(end);
                    }
                }
                let stream = match command.kind {
                    CommandKind::H2d => 0,
                    CommandKind::D2h => 1,
                    CommandKind::Compute => 2,
                    CommandKind::Free => {
                        let bytes = resident.remove(command.label.as_str()).unwrap_or(0);
                        memory.push((start, -i128::from(bytes)));
                        continue;
                    }
                };
                start = start.max(ends[stream].last().copied().unwrap_or(0));
                let duration = match command.kind {
                    CommandKind::H2d => copy_ns(command.bytes, self.h2d_bytes_per_s),
                    CommandKind::D2h => copy_ns(command.bytes, self.d2h_bytes_per_s),
                    _ => (command.compute_ms * 1e6 * self.compute_scale).round() as u64,
                };
                let end = start + duration;
                match command.kind {
                    CommandKind::H2d => {
                        memory.push((start, i128::from(command.bytes)));
                        *resident.entry(command.label.as_str()).or_default() += command.bytes;
                    }
                    CommandKind::D2h => {
                        let bytes = resident.remove(command.label.as_str()).unwrap_or(0);
                        memory.push((end, -i128::from(bytes)));
                    }
                    _ => {
                        memory.push((start, i128::from(command.bytes)));
                        memory.push((end, -i128::from(command.bytes)));
                    }
                }
                ends[stream].push(end);
                busy[stream] += duration;
                makespan = makespan.max(end);
            }
            // Memory given back at an instant is free for what starts then.
            memory.sort_by_key(|&(time, change)| (time, change > 0));
            let mut used: i128 = 0;
            for (time, change) in memory {
                used += change;
                if used > i128::from(plan.memory_bytes) {
                    return Err(fail(format!(
                        "out of memory at {:.3} ms: {used} bytes above the cap of {} bytes",
                        time as f64 / 1e6,
                        plan.memory_bytes
                    )));
                }
            }
            let ms = |ns: u64| ns as f64 / 1e6;
            Ok(Totals { makespan_ms: ms(makespan), h2d_ms: ms(busy[0]), d2h_ms: ms(busy[1]), compute_ms: ms(busy[2]) })
        }
    }
}

#[cfg(test)]
mod tests {
    use tessera_sim::{
        execution_plan, generate, plan_schedule, simulate, CommandKind, Eviction, GenerateParams, Link, Policies,
        Prefetch, Retention, SchedulerKind, Trace,
    };

    use super::*;

    fn plans() -> Vec<(Trace, ExecutionPlan)> {
        let mut all = Vec::new();
        for (seed, oversubscription) in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0)] {
            let params = GenerateParams {
                clients: 12,
                operations_per_client: 3,
                oversubscription,
                transfer_ratio: 1.0,
                link: Link::PcieGen4,
                seed,
            };
            let trace = generate(&params).unwrap();
            for prefetch in [Prefetch::None, Prefetch::Passive, Prefetch::Active, Prefetch::Lookahead(2)] {
                for retention in [Retention::ReleaseAfterLastUse, Retention::KeepUntilEvicted] {
                    let policies = Policies { eviction: Eviction::Belady, prefetch, retention };
                    let schedule = plan_schedule(&trace, policies, &SchedulerKind::Greedy, &mut |_, _| {}).unwrap();
                    let result = simulate(&trace, &schedule, policies).unwrap();
                    all.push((trace.clone(), execution_plan(&trace, &result)));
                }
            }
        }
        all
    }

    fn faithful(trace: &Trace) -> FakeScheduleDevice {
        FakeScheduleDevice {
            h2d_bytes_per_s: trace.gpu.h2d_bytes_per_s,
            d2h_bytes_per_s: trace.gpu.d2h_bytes_per_s,
            copy_latency_ns: trace.gpu.copy_latency_ns,
            compute_scale: 1.0,
            runs: 0,
        }
    }

    #[test]
    fn a_device_like_the_model_measures_what_the_simulator_predicts() {
        for (trace, plan) in plans() {
            let report = execute_schedule(&mut faithful(&trace), &ExecuteOptions { plan: plan.clone() }).unwrap();
            let (m, s) = (report.measured, report.simulated);
            // Compute times are rounded to the nanosecond on each side.
            let close = |a: f64, b: f64| (a - b).abs() < 1e-3;
            assert!(close(m.makespan_ms, s.makespan_ms), "{m:?} vs {s:?}");
            assert!(close(m.compute_ms, s.compute_ms) && close(m.h2d_ms, s.h2d_ms) && close(m.d2h_ms, s.d2h_ms));
            assert!(report.makespan_error().abs() < 1e-6);
        }
    }

    #[test]
    fn a_slower_device_is_measured_slower_and_the_plan_round_trips() {
        let (trace, plan) = plans().swap_remove(10);
        let mut slow = FakeScheduleDevice { compute_scale: 1.25, ..faithful(&trace) };
        let report = execute_schedule(&mut slow, &ExecuteOptions { plan: plan.clone() }).unwrap();
        assert!(report.measured.makespan_ms > report.simulated.makespan_ms);
        assert!((report.measured.compute_ms - 1.25 * report.simulated.compute_ms).abs() < 1e-3);
        let json = serde_json::to_string(&plan).unwrap();
        assert_eq!(serde_json::from_str::<ExecutionPlan>(&json).unwrap(), plan);
    }

    #[test]
    fn a_plan_that_frees_nothing_or_waits_for_nothing_fails_as_a_gpu_would() {
        let frees = |plan: &ExecutionPlan| plan.commands.iter().filter(|c| c.kind == CommandKind::Free).count();
        let (trace, plan) = plans().into_iter().max_by_key(|(_, plan)| frees(plan)).unwrap();
        assert!(frees(&plan) > 10, "{}", frees(&plan));
        let mut leaky = plan.clone();
        leaky.commands.retain(|c| c.kind != CommandKind::Free);
        let message = faithful(&trace).run(&leaky).unwrap_err().to_string();
        assert!(message.contains("out of memory") && !message.contains('\n'), "{message}");
        let mut broken = plan;
        broken.commands[0].after.compute = 5;
        let message = faithful(&trace).run(&broken).unwrap_err().to_string();
        assert!(message.contains("command 0 waits for a command that has not run"), "{message}");
    }

    /// The executor program itself, with `examples/executor/fake_torch`
    /// standing in for PyTorch: it counts device memory by the lifetime of
    /// the program's tensors against the cap the program sets.
    fn fake_torch_executor() -> ProgramDevice {
        let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/executor");
        let program = format!(
            "PYTHONPATH={examples}/fake_torch TESSERA_EXECUTOR_HEADROOM_MB=0 python3 {examples}/run_schedule.py"
        );
        ProgramDevice { program, device: DeviceTarget::Gpu(0) }
    }

    #[test]
    fn the_executor_program_holds_no_more_memory_than_the_plan_at_any_command() {
        // The campaign's trace (scripts/gpu_campaign.sh) in every order it
        // runs, then the plans above. On the H200 on 2026-11-30 five of its
        // six orders ran out of memory under the cap: the program kept the
        // last buffer it had copied or written back alive in a variable.
        let params = GenerateParams {
            clients: 4,
            operations_per_client: 3,
            oversubscription: 2.0,
            transfer_ratio: 1.0,
            link: Link::PcieGen5,
            seed: 1,
        };
        let trace = generate(&params).unwrap();
        let mut all = Vec::new();
        for scheduler in [SchedulerKind::Fifo, SchedulerKind::Greedy, SchedulerKind::Genetic(Default::default())] {
            for prefetch in [Prefetch::None, Prefetch::Lookahead(1)] {
                let policies = Policies { prefetch, ..Policies::default() };
                let schedule = plan_schedule(&trace, policies, &scheduler, &mut |_, _| {}).unwrap();
                all.push((trace.clone(), execution_plan(&trace, &simulate(&trace, &schedule, policies).unwrap())));
            }
        }
        all.extend(plans());
        for (index, (_, plan)) in all.iter().enumerate() {
            let report = execute_schedule(&mut fake_torch_executor(), &ExecuteOptions { plan: plan.clone() });
            let report = report.unwrap_or_else(|error| panic!("plan {index}: {error}"));
            // The stand-in's clock runs only in kernels: compute time is the plan's.
            assert!((report.measured.compute_ms - report.simulated.compute_ms).abs() < 1e-3, "plan {index}");
        }
    }

    #[test]
    fn the_executor_program_fails_in_one_line_when_the_plan_does_not_fit_its_cap() {
        let (_, mut plan) = plans().swap_remove(0);
        plan.memory_bytes /= 4;
        let error = fake_torch_executor().run(&plan).unwrap_err().to_string();
        assert!(error.contains("CUDA out of memory under the cap") && !error.contains('\n'), "{error}");
    }

    #[test]
    fn the_program_gets_the_plan_on_stdin_and_the_device_in_its_environment() {
        let dir = tempfile::tempdir().unwrap();
        let (_, plan) = plans().swap_remove(3);
        let saved = dir.path().join("plan.json");
        let program = format!(
            "cat > {}; echo noise; echo \"{EXECUTION_PREFIX}{{\\\"makespan_ms\\\": 12.5, \\\"compute_ms\\\": 10, \\\"h2d_ms\\\": 3, \\\"d2h_ms\\\": 1}}\"; echo device=$CUDA_VISIBLE_DEVICES >&2",
            saved.display()
        );
        let mut device = ProgramDevice { program, device: DeviceTarget::Gpu(3) };
        let report = execute_schedule(&mut device, &ExecuteOptions { plan: plan.clone() }).unwrap();
        assert_eq!(report.measured, Totals { makespan_ms: 12.5, compute_ms: 10.0, h2d_ms: 3.0, d2h_ms: 1.0 });
        let received: ExecutionPlan = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
        assert_eq!(received, plan);
        let fails = |program: &str| {
            let mut device = ProgramDevice { program: program.to_string(), device: DeviceTarget::Gpu(0) };
            device.run(&plan).unwrap_err().to_string()
        };
        let message = fails("cat >/dev/null; echo 'torch.OutOfMemoryError: CUDA out of memory' >&2; exit 1");
        assert!(message.contains("exit status 1: torch.OutOfMemoryError") && !message.contains('\n'), "{message}");
        assert!(fails("cat >/dev/null; echo done").contains("no line `tessera:execution=<JSON>`"));
        let message = fails(&format!("cat >/dev/null; echo '{EXECUTION_PREFIX}{{\"makespan_ms\": -1, \"compute_ms\": 0, \"h2d_ms\": 0, \"d2h_ms\": 0}}'"));
        assert!(message.contains("negative"), "{message}");
    }
}
