//! The request-level simulation of a plan: `tessera simulate serve`, and
//! what `tessera verify --simulate` adds. The simulation is
//! tessera-serving's; this module reads its inputs (the plan, a trace, the
//! profiles for partial batches) and renders its report.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde::Serialize;
use tessera_core::slo::DEFAULT_PERCENTILE;
use tessera_core::text::{count, number, percent};
use tessera_core::{Plan, ProfileCatalog};
use tessera_plan::{recorded_arrivals, Arrivals, PlanOptions};
use tessera_serving::{simulate, ArrivalModel, ServingReport, ServingSystem, SimulationOptions, SloVerdict};
use tessera_store::read_arrival_trace;

use crate::args::{ListFormat, SimulateServeArgs, TrafficArgs};
use crate::inputs;
use crate::output::{emit, note, out, outln};
use crate::progress::Progress;
use crate::table::TextTable;
use crate::terminal::wrap_words;

/// The simulation options `args` ask for (a `trace=FILE` read here).
pub fn options(args: &TrafficArgs, plan: &Plan) -> Result<SimulationOptions> {
    let arrivals = match &args.arrivals {
        Some(text) => arrival_model(text)?,
        None => recorded_arrivals(plan).context("name the arrivals with --arrivals")?.unwrap_or(ArrivalModel::Poisson),
    };
    let options = SimulationOptions {
        arrivals,
        discipline: args.discipline,
        max_queue_delay_ms: args.max_queue_delay_ms,
        seconds: args.seconds,
        // A warm-up the user did not set never swallows a short run.
        warmup_s: args.warmup.unwrap_or_else(|| SimulationOptions::default().warmup_s.min(args.seconds / 6.0)),
        seed: args.seed,
        replications: args.replications,
        timeline_bucket_s: None,
        window_s: Some(args.window_s),
        slowdown: args.slowdown,
    };
    options.validate()?;
    Ok(options)
}

/// The arrival model `--arrivals` names, a trace read from its file.
pub fn arrival_model(text: &str) -> Result<ArrivalModel> {
    let arrivals: Arrivals =
        text.parse().map_err(|error: String| anyhow!(error)).with_context(|| format!("--arrivals {text}"))?;
    read_arrivals(&arrivals).with_context(|| format!("--arrivals {text}"))
}

/// The arrival model `arrivals` names, a trace read from its file.
pub fn read_arrivals(arrivals: &Arrivals) -> Result<ArrivalModel> {
    match arrivals {
        Arrivals::Model(model) => Ok(model.clone()),
        Arrivals::TraceFile(path) => {
            let trace = read_arrival_trace(path)?;
            if trace.out_of_order > 0 {
                note(format_args!(
                    "{}: {} before the row above {}; the arrivals are taken in time order",
                    path.display(),
                    match trace.out_of_order {
                        1 => "1 timestamp comes".to_string(),
                        n => format!("{n} timestamps come"),
                    },
                    if trace.out_of_order == 1 { "it" } else { "them" }
                ));
            }
            let name =
                path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
            Ok(ArrivalModel::trace(name, trace.times_s)?)
        }
    }
}

/// `options` with arrivals from a trace file read into a model (the
/// planner reads no file).
pub fn with_trace_read(options: &PlanOptions) -> Result<PlanOptions> {
    let mut options = options.clone();
    if let Some(arrivals) = &options.arrivals {
        let model = read_arrivals(arrivals).with_context(|| format!("--arrivals {arrivals}"))?;
        options.arrivals = Some(Arrivals::Model(model));
    }
    Ok(options)
}

/// A simulation of `plan` and what it took.
pub struct Simulated {
    /// What it measured.
    pub report: ServingReport,
    /// How the plan was read into a serving system (partial batches).
    pub notes: Vec<String>,
    /// Wall-clock time of the simulation.
    pub wall: Duration,
}

impl Simulated {
    /// Simulated requests per second of wall-clock time.
    pub fn requests_per_s(&self) -> f64 {
        self.report.requests_simulated as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// The services whose run ended in `verdict`.
    pub fn judged(&self, verdict: SloVerdict) -> Vec<&str> {
        self.report
            .services
            .iter()
            .filter(|service| service.measures.as_ref().is_some_and(|measures| measures.verdict == verdict))
            .map(|service| service.name.as_str())
            .collect()
    }
}

/// Simulates `plan` (partial batches from `catalog`) under `options`.
pub fn simulate_plan(plan: &Plan, catalog: Option<&ProfileCatalog>, options: &SimulationOptions) -> Result<Simulated> {
    let (system, notes) = ServingSystem::from_plan(plan, catalog, DEFAULT_PERCENTILE)?;
    let progress = Progress::spinner(format!(
        "simulating {} of {} for {} s ({} arrivals)",
        count(system.segments().len(), "segment"),
        count(system.services().len(), "service"),
        options.seconds,
        options.arrivals
    ));
    let started = Instant::now();
    let report = simulate(&system, options)?;
    let wall = started.elapsed();
    drop(progress);
    Ok(Simulated { report, notes, wall })
}

/// `tessera simulate serve`.
pub fn run(args: &SimulateServeArgs, store: Option<&Path>) -> Result<()> {
    let plan = inputs::read_sound_plan(&args.plan)?;
    let options = options(&args.traffic, &plan)?;
    let catalog = inputs::partial_batch_profiles(args.profiles.as_deref(), args.demo, args.gpu, store)?;
    let mut options = options;
    if args.picture.is_some() {
        options.timeline_bucket_s = Some((options.seconds / 60.0).max(1.0));
    }
    let simulated = simulate_plan(&plan, catalog.as_ref(), &options)?;
    for line in &simulated.notes {
        note(format_args!("{line}"));
    }
    if let Some(picture) = &args.picture {
        let title = format!("Tessera serving simulation — {}", file_name(&args.plan));
        let page = tessera_report::serving_report_html(&simulated.report, &title, &describe(&options));
        emit(page.as_bytes(), Some(picture))?;
    }
    match args.format {
        ListFormat::Json => {
            let document = SimulationDocument::new(&options, &simulated);
            outln!("{}", serde_json::to_string_pretty(&document)?)?;
        }
        ListFormat::Table => out!("{}", render(&options, &simulated))?,
    }
    Ok(())
}

/// The last component of `path`.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
}

/// The traffic model in words, for headings.
pub fn describe(options: &SimulationOptions) -> String {
    format!(
        "{} arrivals{}, {} routing within segments{}, {} s ({} s warm-up) × {}, seed {}",
        options.arrivals,
        if options.slowdown == 0.0 {
            String::new()
        } else {
            format!(", every batch {} slower than profiled", percent(options.slowdown))
        },
        options.discipline,
        if options.max_queue_delay_ms > 0.0 {
            format!(", batches wait up to {} ms", options.max_queue_delay_ms)
        } else {
            String::new()
        },
        options.seconds,
        options.warmup_s,
        count(options.replications as usize, "replication"),
        options.seed
    )
}

/// The report as a table per service, then the totals.
pub fn render(options: &SimulationOptions, simulated: &Simulated) -> String {
    let report = &simulated.report;
    let mut table = TextTable::new(&[
        "service",
        "reqs",
        "≤SLO % ±95%",
        "p50",
        "p99",
        "p99.9",
        "SLO",
        "goodput",
        "windows",
        "win95",
        "met",
    ]);
    for outcome in &report.services {
        let slo_ms = outcome.latency_slo_ms;
        let counted = outcome.windows.filter(|windows| windows.windows > 0);
        let windows = counted.map_or_else(|| "-".to_string(), |windows| format!("{}/{}", windows.met, windows.windows));
        let win95 = counted
            .and_then(|windows| windows.p5_attainment)
            .map_or_else(|| "-".to_string(), |attainment| format!("{:.2}", 100.0 * attainment));
        let Some(measures) = &outcome.measures else {
            let mut row = vec![outcome.name.clone(), "0".to_string()];
            row.extend(["-"; 4].map(String::from));
            row.extend([format!("{slo_ms}"), "-".to_string(), windows, win95, "-".to_string()]);
            table.row(row);
            continue;
        };
        table.row(vec![
            outcome.name.clone(),
            outcome.requests.to_string(),
            format!(
                "{:.2}{}",
                100.0 * measures.attainment,
                measures.attainment_ci.map_or_else(String::new, |ci| format!("±{:.2}", 50.0 * (ci.high - ci.low)))
            ),
            format!("{:.1}", measures.p50_ms),
            format!("{:.1}", measures.p99_ms),
            format!("{:.1}", measures.p999_ms),
            format!("{slo_ms}"),
            format!("{:.1}", outcome.goodput_rps),
            windows,
            win95,
            measures.verdict.word().to_string(),
        ]);
    }
    let utilisation: Vec<f64> = report.segments.iter().map(|segment| segment.utilisation).collect();
    let (low, high) = utilisation.iter().fold((f64::INFINITY, 0.0f64), |(l, h), &u| (l.min(u), h.max(u)));
    let heading = format!(
        "{}; reqs: requests measured, ≤SLO %: their share within the SLO ± its 95% interval, latencies in ms, \
         goodput in requests/s within SLO, windows of {} s meeting the percentile, win95 = the attainment (%) 95% \
         of them reach",
        describe(options),
        options.window_s.map_or_else(|| "-".to_string(), |window_s| number(window_s, 0))
    );
    let mut text = format!("{}\n{}", wrap_words(&heading, "", ""), table.render());
    let summary = format!(
        "all requests: {} within SLO{}; segments {:.0}–{:.0}% busy",
        report.attainment.map_or_else(|| "none measured".to_string(), |a| format!("{:.2}%", 100.0 * a)),
        report.worst.as_ref().map_or_else(String::new, |worst| format!(
            ", worst service {} {:.2}%",
            worst.name,
            100.0 * worst.attainment
        )),
        100.0 * low.min(high),
        100.0 * high
    );
    let speed = format!(
        "simulated {} requests in {:.2} s: {:.1} M requests/s",
        report.requests_simulated,
        simulated.wall.as_secs_f64(),
        simulated.requests_per_s() / 1e6
    );
    for line in [summary, speed] {
        text.push_str(&wrap_words(&line, "", "  "));
        text.push('\n');
    }
    text
}

/// `tessera simulate serve --format json`.
#[derive(Serialize)]
pub struct SimulationDocument<'a> {
    arrivals: String,
    discipline: String,
    max_queue_delay_ms: f64,
    seconds: f64,
    warmup_s: f64,
    seed: u64,
    replications: u32,
    slowdown: f64,
    simulated_requests_per_s: f64,
    notes: &'a [String],
    #[serde(flatten)]
    report: &'a ServingReport,
}

impl<'a> SimulationDocument<'a> {
    /// The document of `simulated` under `options`.
    pub fn new(options: &SimulationOptions, simulated: &'a Simulated) -> SimulationDocument<'a> {
        SimulationDocument {
            arrivals: options.arrivals.to_string(),
            discipline: options.discipline.to_string(),
            max_queue_delay_ms: options.max_queue_delay_ms,
            seconds: options.seconds,
            warmup_s: options.warmup_s,
            seed: options.seed,
            replications: options.replications,
            slowdown: options.slowdown,
            simulated_requests_per_s: simulated.requests_per_s(),
            notes: &simulated.notes,
            report: &simulated.report,
        }
    }
}
