//! `tessera simulate` and `tessera simulate generate`.

use std::path::Path;

use anyhow::{Context, Result};
use tessera_core::text::count;
use tessera_gpu::{check_device, execute_schedule, DeviceTarget, ExecuteOptions, ProgramDevice};
use tessera_sim::gantt_svg;
use tessera_sim::{compare_runs, execution_plan, MeasuredRun, Schedule};
use tessera_sim::{generate, GenerateParams};
use tessera_sim::{johnson, lower_bound_ns, memory_lower_bound_ns, simulate, Policies, SimResult, Trace};
use tessera_sim::{plan_schedule, GeneticParams, SchedulerKind};

use crate::args::{ListFormat, SchedulerName, SimulateArgs, SimulateCommand};
use crate::output::{emit, note};
use crate::output::{out, outln};
use crate::progress::Progress;
use crate::table::TextTable;
use crate::terminal::wrap_words;

const NS_PER_MS: f64 = 1e6;

pub fn run(args: SimulateArgs) -> Result<()> {
    if let Some(SimulateCommand::Runs { runs, format }) = &args.command {
        return compare(runs, *format);
    }
    if let Some(SimulateCommand::Run {
        trace,
        schedule,
        scheduler,
        prefetch,
        eviction,
        retention,
        gpu,
        program,
        format,
    }) = args.command
    {
        let policies = Policies { eviction, prefetch, retention };
        return execute(&trace, schedule.as_deref(), scheduler, policies, gpu, program, format);
    }
    if let Some(SimulateCommand::Generate { clients, operations, oversubscription, transfer_ratio, link, seed }) =
        args.command
    {
        let params =
            GenerateParams { clients, operations_per_client: operations, oversubscription, transfer_ratio, link, seed };
        let trace = generate(&params)?;
        let achieved = trace.oversubscription();
        if (achieved - oversubscription).abs() > 1e-6 * oversubscription {
            note(format_args!(
                "{oversubscription}× cannot be reached with {}: memory must hold the largest working set, so the trace has {achieved:.2}×",
                count(clients, "client")
            ));
        }
        let mut json = serde_json::to_vec_pretty(&trace)?;
        json.push(b'\n');
        return emit(&json, None);
    }
    let path = args.trace.as_deref().context("--trace FILE is required")?;
    let trace = read_trace(path)?;
    let policies = Policies { eviction: args.eviction, prefetch: args.prefetch, retention: args.retention };
    let params = GeneticParams {
        population: args.population,
        generations: args.generations,
        seed: args.seed,
        ..GeneticParams::default()
    };
    let kind = scheduler_kind(args.scheduler, params);
    let bounds = Bounds { plain_ns: lower_bound_ns(&trace)?, memory_ns: memory_lower_bound_ns(&trace, policies)? };
    let schedule = match &kind {
        SchedulerKind::Genetic(params) => {
            // A bar over generations with the best makespan so far (drawn
            // only on a terminal).
            let bar = Progress::bar(params.generations as u64, "generations", String::new());
            let planned = plan_schedule(&trace, policies, &kind, &mut |generation, best_ns| {
                bar.set_position(generation as u64);
                bar.set_message(format!("best {:.1} ms, bound {:.1} ms", ms(best_ns), ms(bounds.memory_ns)));
            });
            drop(bar);
            planned?
        }
        _ => {
            let spinner = Progress::spinner(format!("scheduling {}", count(trace.clients.len(), "client")));
            let planned = plan_schedule(&trace, policies, &kind, &mut |_, _| {});
            drop(spinner);
            planned?
        }
    };
    let result = simulate(&trace, &schedule, policies)?;
    // Johnson's rule is optimal with unlimited memory on one-pass traces.
    let johnson_unlimited_ns = johnson(&trace).ok().map(|plan| plan.makespan_ns);
    if let Some(gantt) = &args.gantt {
        let title = format!("{} — {}", path.display(), kind.name());
        tessera_store::write_atomic(gantt, gantt_svg(&result, &title).as_bytes())?;
    }
    let order: Vec<&str> = schedule.steps().iter().map(|&(client, _)| trace.clients[client].name.as_str()).collect();
    match args.format {
        ListFormat::Json => {
            let mut json = report(&trace, &result, bounds, &order);
            if let Some(ns) = johnson_unlimited_ns {
                json["johnson_unlimited_memory_ms"] = serde_json::json!(ms(ns));
            }
            outln!("{}", serde_json::to_string_pretty(&json)?)?
        }
        ListFormat::Table => out!("{}", table(&trace, &result, bounds, &order))?,
    }
    Ok(())
}

fn scheduler_kind(name: SchedulerName, params: GeneticParams) -> SchedulerKind {
    match name {
        SchedulerName::Fifo => SchedulerKind::Fifo,
        SchedulerName::Johnson => SchedulerKind::Johnson,
        SchedulerName::Greedy => SchedulerKind::Greedy,
        SchedulerName::Ga => SchedulerKind::Genetic(params),
        SchedulerName::Exhaustive => SchedulerKind::Exhaustive,
    }
}

/// `tessera simulate run`: the schedule simulated, then run on the GPU by
/// the executor program, measured vs simulated.
fn execute(
    trace_path: &Path,
    schedule_path: Option<&Path>,
    scheduler: SchedulerName,
    policies: Policies,
    gpu: u32,
    program: String,
    format: ListFormat,
) -> Result<()> {
    let trace = read_trace(trace_path)?;
    let schedule = match schedule_path {
        Some(path) => read_schedule(path, &trace)?,
        None => plan_schedule(&trace, policies, &scheduler_kind(scheduler, GeneticParams::default()), &mut |_, _| {})?,
    };
    let result = simulate(&trace, &schedule, policies)?;
    let plan = execution_plan(&trace, &result);
    let device = DeviceTarget::Gpu(gpu);
    check_device(&device).map_err(|error| anyhow::anyhow!("no GPU to run the schedule on ({error})"))?;
    let spinner = Progress::spinner(format!("running {} commands on GPU {gpu}", plan.commands.len()));
    let report = execute_schedule(&mut ProgramDevice { program, device }, &ExecuteOptions { plan });
    drop(spinner);
    let report = report?;
    match format {
        ListFormat::Json => {
            let scheduler = match schedule_path {
                Some(_) => "given".to_string(),
                None => clap::ValueEnum::to_possible_value(&scheduler)
                    .map_or_else(String::new, |value| value.get_name().to_string()),
            };
            let run = MeasuredRun {
                scheduler,
                prefetch: policies.prefetch.to_string(),
                measured: report.measured,
                simulated: report.simulated,
            };
            outln!("{}", serde_json::to_string_pretty(&run)?)?
        }
        ListFormat::Table => {
            let mut table = TextTable::new(&["", "measured ms", "simulated ms", "error"]);
            let (m, s) = (report.measured, report.simulated);
            for (name, measured, simulated) in [
                ("makespan", m.makespan_ms, s.makespan_ms),
                ("compute", m.compute_ms, s.compute_ms),
                ("host to device", m.h2d_ms, s.h2d_ms),
                ("device to host", m.d2h_ms, s.d2h_ms),
            ] {
                let error = 100.0 * (measured / simulated.max(f64::MIN_POSITIVE) - 1.0);
                table.row(vec![
                    name.into(),
                    format!("{measured:.1}"),
                    format!("{simulated:.1}"),
                    format!("{error:+.1}%"),
                ]);
            }
            out!("{}", table.render())?
        }
    }
    Ok(())
}

/// `tessera simulate runs`: schedules run on a GPU beside their
/// simulations, and the gains of prefetching and the genetic algorithm.
fn compare(paths: &[std::path::PathBuf], format: ListFormat) -> Result<()> {
    let mut runs = Vec::with_capacity(paths.len());
    for path in paths {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let run: MeasuredRun = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a `simulate run --format json` run", path.display()))?;
        runs.push(run);
    }
    let compared = compare_runs(&runs)?;
    if format == ListFormat::Json {
        return outln!("{}", serde_json::to_string_pretty(&compared)?);
    }
    let mut table = TextTable::new(&["scheduler", "prefetch", "measured ms", "simulated ms", "error"]);
    for run in &compared.runs {
        table.row(vec![
            run.scheduler.clone(),
            run.prefetch.clone(),
            format!("{:.1}", run.measured_makespan_ms),
            format!("{:.1}", run.simulated_makespan_ms),
            format!("{:+.1}%", 100.0 * run.error),
        ]);
    }
    out!("{}", table.render())?;
    outln!("worst makespan error: {:.1}%", 100.0 * compared.worst_error())?;
    if compared.gains.is_empty() {
        return Ok(());
    }
    let mut gains = TextTable::new(&["gain", "simulated", "measured", "agrees"]);
    for gain in &compared.gains {
        gains.row(vec![
            gain.what.clone(),
            format!("{:+.1}%", 100.0 * gain.simulated),
            format!("{:+.1}%", 100.0 * gain.measured),
            if gain.agrees() { "yes" } else { "no" }.to_string(),
        ]);
    }
    out!("{}", gains.render())
}

/// A schedule file: a JSON list of client names, or a `simulate --format
/// json` report (its `schedule`).
fn read_schedule(path: &Path, trace: &Trace) -> Result<Schedule> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let names = value.get("schedule").unwrap_or(&value).as_array().with_context(|| {
        format!("{}: expected a list of client names or a `simulate --format json` report", path.display())
    })?;
    let mut ids = Vec::with_capacity(names.len());
    for (position, name) in names.iter().enumerate() {
        let name = name.as_str().unwrap_or_default();
        let id =
            trace.clients.iter().position(|c| c.name == name).with_context(|| {
                format!("{}: entry {position}: '{name}' is not a client of the trace", path.display())
            })?;
        ids.push(id);
    }
    Schedule::new(trace, &ids).with_context(|| path.display().to_string())
}

fn read_trace(path: &Path) -> Result<Trace> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Trace::from_json(&text).with_context(|| path.display().to_string())
}

fn ms(ns: u64) -> f64 {
    ns as f64 / NS_PER_MS
}

/// The two lower bounds every run reports.
#[derive(Clone, Copy)]
struct Bounds {
    /// `lower_bound_ns`: copies and compute, memory ignored.
    plain_ns: u64,
    /// `memory_lower_bound_ns`: also the waits memory forces.
    memory_ns: u64,
}

/// Makespan over a bound, minus 1.
fn gap(makespan_ns: u64, bound_ns: u64) -> f64 {
    makespan_ns as f64 / bound_ns.max(1) as f64 - 1.0
}

fn report(trace: &Trace, result: &SimResult, bounds: Bounds, order: &[&str]) -> serde_json::Value {
    let clients: Vec<serde_json::Value> = trace
        .clients
        .iter()
        .zip(&result.client_completion_ns)
        .map(|(client, &done)| serde_json::json!({ "client": client.name, "completion_ms": ms(done) }))
        .collect();
    serde_json::json!({
        "oversubscription": trace.oversubscription(),
        "makespan_ms": ms(result.makespan_ns),
        "lower_bound_ms": ms(bounds.plain_ns),
        "gap": gap(result.makespan_ns, bounds.plain_ns),
        "memory_lower_bound_ms": ms(bounds.memory_ns),
        "memory_gap": gap(result.makespan_ns, bounds.memory_ns),
        "compute_busy_ms": ms(result.compute_busy_ns),
        "stall_ms": ms(result.stall_ns),
        "h2d_bytes": result.h2d_bytes,
        "d2h_bytes": result.d2h_bytes,
        "clients": clients,
        "schedule": order,
    })
}

/// Schedule entries shown in the table (the JSON has them all).
const SHOWN_STEPS: usize = 24;

fn shortened(order: &[&str]) -> String {
    if order.len() <= SHOWN_STEPS {
        return order.join(" ");
    }
    format!("{} … ({} steps in all)", order[..SHOWN_STEPS].join(" "), order.len())
}

fn table(trace: &Trace, result: &SimResult, bounds: Bounds, order: &[&str]) -> String {
    let lines = [
        format!(
            "oversubscription {:.2}× (persistent data / memory beside the largest scratch)",
            trace.oversubscription()
        ),
        format!(
            "makespan {:.1} ms, lower bound {:.1} ms (gap {:.1}%), memory-aware bound {:.1} ms (gap {:.1}%)",
            ms(result.makespan_ns),
            ms(bounds.plain_ns),
            100.0 * gap(result.makespan_ns, bounds.plain_ns),
            ms(bounds.memory_ns),
            100.0 * gap(result.makespan_ns, bounds.memory_ns),
        ),
        format!("compute busy {:.1} ms, stalled {:.1} ms", ms(result.compute_busy_ns), ms(result.stall_ns)),
        format!(
            "moved {:.2} GB to the GPU and {:.2} GB back",
            result.h2d_bytes as f64 / 1e9,
            result.d2h_bytes as f64 / 1e9
        ),
        format!("schedule: {}", shortened(order)),
    ];
    let mut out: String = lines.iter().map(|line| wrap_words(line, "", "  ") + "\n").collect();
    out.push('\n');
    let mut clients = TextTable::new(&["client", "operations", "completion ms"]);
    for (client, &done) in trace.clients.iter().zip(&result.client_completion_ns) {
        clients.row(vec![client.name.clone(), client.operations.len().to_string(), format!("{:.1}", ms(done))]);
    }
    out.push_str(&clients.render());
    out
}
