//! `tessera autopilot simulate`: the command line as a day to simulate
//! (tessera-autopilot's `simulate_day`), the comparison rendered.
//! `autopilot run` (the live loop) and `autopilot journal` are in
//! `autopilot/`: `run` turns the flags into tessera-live's parts (a rate
//! source, with `--observe-burstiness` each service's counts, the
//! controller, a deploy target) and runs its loop; `journal` prints what
//! it journaled.

mod journal;
mod run;

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;
use tessera_autopilot::{
    diurnal, observed_arrivals, simulate_day, ControllerConfig, DayProgress, DayReport, DayRequest, DiurnalOptions,
    ForecastAccuracy, JournalEntry, ObservedCv, PlanSettings, Sampling, StrategyDay, Tally,
};
use tessera_core::text::count;
use tessera_core::TrafficCurve;
use tessera_plan::{Arrivals, PlanOptions};
use tessera_report::{autopilot_day_html, DayPicture, StrategySeries, StrategyTotals};
use tessera_serving::ArrivalModel;
use tessera_store::{read_traffic, write_traffic_csv};

use crate::args::{AutopilotCommand, AutopilotSimulateArgs, ListFormat};
use crate::commands::serving;
use crate::inputs;
use crate::output::{emit, note, out, outln};
use crate::progress::Progress;
use crate::table::TextTable;
use crate::terminal::wrap_words;

/// Runs `tessera autopilot …`.
pub fn run(command: AutopilotCommand, store: Option<&Path>) -> Result<()> {
    match command {
        AutopilotCommand::Simulate(args) => simulate(&args, store),
        AutopilotCommand::Run(args) => run::run(&args, store),
        AutopilotCommand::Journal(args) => journal::journal(&args, store),
    }
}

/// `tessera autopilot simulate`.
fn simulate(args: &AutopilotSimulateArgs, store: Option<&Path>) -> Result<()> {
    let inputs = inputs::load(&args.inputs, &args.controller.plan.gpus, store)?;
    let names: Vec<String> = inputs.services().iter().map(|slo| slo.service.clone()).collect();
    let mut cv_by_service = Vec::new();
    let (traffic, described) = match &args.traffic {
        Some(path) => {
            let traffic = read_traffic(path, &names)?;
            cv_by_service = traffic.cv;
            (traffic.curve, format!("the traffic of {}", path.display()))
        }
        None => {
            let options = DiurnalOptions {
                hours: args.hours,
                peak_to_trough: args.generator.peak_to_trough,
                bursts_per_day: args.generator.bursts,
                burst_factor: args.generator.burst_factor,
                burst_minutes: args.generator.burst_minutes,
                seed: args.generator.seed,
                ..DiurnalOptions::default()
            };
            let peaks: Vec<(String, f64)> =
                inputs.services().iter().map(|slo| (slo.service.clone(), slo.rate_rps)).collect();
            let curve = diurnal(&peaks, &options).context("--diurnal")?;
            let words = format!(
                "diurnal traffic (each service peaking at its SLO rate, {}× its trough, {} bursts a day of up to \
                 ×{}, seed {})",
                options.peak_to_trough, options.bursts_per_day, options.burst_factor, options.seed
            );
            (curve, words)
        }
    };
    if let Some(path) = &args.write_traffic {
        let mut bytes = Vec::new();
        write_traffic_csv(&mut bytes, &traffic, &cv_by_service)?;
        emit(&bytes, Some(path))?;
    }
    let mut options = serving::with_trace_read(&args.controller.plan)?;
    let arrivals_by_service = observed_burstiness(&mut options, &names, &cv_by_service);
    let request = DayRequest {
        inputs: &inputs,
        settings: PlanSettings { options, target: None },
        controller: args.controller.config(),
        traffic: &traffic,
        hours: args.hours,
        interval_s: args.interval_min * 60.0,
        sampling: Sampling {
            window_s: args.window_s,
            warmup_s: args.warmup_s,
            max_requests: args.window_requests,
            seed: args.sample_seed,
            slowdown: args.slowdown,
            model_steady: !args.simulate_all,
        },
        arrivals_by_service,
    };
    let report = run_day(&request)?;
    if let Some(path) = &args.html {
        let title = format!("Autopilot: a simulated day of {}", count(names.len(), "service"));
        // The hours' chart marks the strictest percentile of the services.
        let percentile = inputs.services().iter().map(|slo| slo.percentile).fold(0.0, f64::max);
        let words = heading(&report, &traffic, &described);
        let page = autopilot_day_html(&day_picture(&report, &traffic), &title, &words, percentile);
        tessera_store::write_atomic(path, page.as_bytes())?;
    }
    match args.format {
        ListFormat::Json => outln!("{}", serde_json::to_string_pretty(&DayDocument::new(&report))?),
        ListFormat::Table => out!("{}", render(&report, &traffic, &described)),
    }
}

/// Each service's arrivals in the measurement from the traffic file's `cv`
/// column (a renewal process of that coefficient of variation; `None`
/// where it gives none), and, unless `--arrivals` chose a model, the plans'
/// model set as the live loop sets it from what it observes (the
/// burstiest service's, [`observed_arrivals`]), said in a note.
fn observed_burstiness(options: &mut PlanOptions, names: &[String], cv: &[Option<f64>]) -> Vec<Option<ArrivalModel>> {
    if cv.iter().all(Option::is_none) {
        return Vec::new();
    }
    let observed: Vec<ObservedCv> = names
        .iter()
        .zip(cv)
        .filter_map(|(service, cv)| cv.map(|cv| ObservedCv { service: service.clone(), cv }))
        .collect();
    match &options.arrivals {
        Some(asked) => note(format_args!(
            "plans are made under {asked} arrivals, as --arrivals asks; the traffic file's cv column sets how each \
             service's requests arrive in the simulation"
        )),
        None => {
            if let Some(change) = observed_arrivals(&ArrivalModel::Poisson, &observed) {
                note(format_args!("{} (the traffic file's cv column)", change.words));
                options.arrivals = Some(Arrivals::Model(change.model));
            }
        }
    }
    cv.iter().map(|cv| cv.map(|cv| ArrivalModel::Renewal { cv })).collect()
}

/// Simulates the day with a progress bar per phase.
fn run_day(request: &DayRequest<'_>) -> Result<DayReport> {
    let mut bar: Option<(bool, Progress)> = None;
    let mut measuring_from = None;
    let mut decided = DecisionTimes::new();
    let report = simulate_day(request, &mut |progress| {
        let (measuring, done, total) = match progress {
            DayProgress::Deciding { autopilot, scratch, each } => {
                decided.heard(autopilot, scratch);
                (false, autopilot + scratch, 2 * each)
            }
            DayProgress::Measuring { done, total } => (true, done, total),
        };
        if measuring && measuring_from.is_none() {
            measuring_from = Some(Instant::now());
        }
        if bar.as_ref().is_none_or(|(phase, _)| *phase != measuring) {
            let (unit, message) = if measuring {
                ("pieces", "simulating requests, piece by piece of the day")
            } else {
                ("decisions", "deciding: the autopilot and the scratch baseline, side by side")
            };
            bar = Some((measuring, Progress::bar(total as u64, unit, message.to_string())));
        }
        if let Some((_, bar)) = &bar {
            bar.set_position(done as u64);
        }
    });
    drop(bar);
    let report = report?;
    if let Some(measuring) = measuring_from {
        note(format_args!(
            "{}; then measured in {:.1} s (the three days at once)",
            decided.words(),
            measuring.elapsed().as_secs_f64()
        ));
    }
    Ok(report)
}

/// How long the day's decisions took: each of the autopilot's, and the
/// scratch baseline's in all (the two decide at once, on two threads).
struct DecisionTimes {
    started: Instant,
    autopilot_s: Vec<f64>,
    /// When the autopilot last decided.
    autopilot_at: Instant,
    /// Decisions the scratch baseline made.
    scratch: usize,
    /// Seconds from the start to the scratch baseline's last decision.
    scratch_s: f64,
}

impl DecisionTimes {
    fn new() -> Self {
        let now = Instant::now();
        DecisionTimes { started: now, autopilot_s: Vec::new(), autopilot_at: now, scratch: 0, scratch_s: 0.0 }
    }

    /// Hears that the autopilot has made `autopilot` decisions and the
    /// scratch baseline `scratch`.
    fn heard(&mut self, autopilot: usize, scratch: usize) {
        if autopilot > self.autopilot_s.len() {
            self.autopilot_s.push(self.autopilot_at.elapsed().as_secs_f64());
            self.autopilot_at = Instant::now();
        }
        if scratch > self.scratch {
            self.scratch = scratch;
            self.scratch_s = self.started.elapsed().as_secs_f64();
        }
    }

    /// `decided in 4.1 s (the autopilot's 60 decisions: 3.2 s in all,
    /// median 0.01 s, the slowest 1.20 s; the scratch baseline's 2.9 s)`.
    fn words(&self) -> String {
        let mut sorted = self.autopilot_s.clone();
        sorted.sort_by(f64::total_cmp);
        let autopilot: f64 = sorted.iter().sum();
        let (Some(&slowest), Some(&median)) = (sorted.last(), sorted.get(sorted.len() / 2)) else {
            return "nothing decided".to_string();
        };
        format!(
            "decided in {:.1} s (the autopilot's {}: {autopilot:.1} s in all, median {median:.2} s, the slowest \
             {slowest:.2} s; the scratch baseline's {:.1} s, beside them)",
            autopilot.max(self.scratch_s),
            count(sorted.len(), "decision"),
            self.scratch_s
        )
    }
}

/// What was simulated and how it was measured, in words.
fn heading(report: &DayReport, traffic: &TrafficCurve, described: &str) -> String {
    let steady = match report.sampling.model_steady {
        true => format!(
            "a steady service (Poisson arrivals, every segment below {:.0}% of its throughput) from the \
             serving model's share (to within {} points; {} evaluations of the model), any other ",
            100.0 * tessera_autopilot::MODEL_BELOW_LOAD,
            100.0 * tessera_serving::analytic::ATTAINMENT_TOLERANCE,
            report.model_evaluations
        ),
        false => "every service ".to_string(),
    };
    format!(
        "{} over {} h of {described}; a decision every {} min; each piece of the day (constant plan and rates) \
         weighted by its requests and measured per service: {steady}on {} s of simulated requests after {} s of \
         warm-up (both shortened for a busy service to about {} measured requests, at least {} of its slowest \
         batches, unless a segment of it runs at {:.0}% of its throughput or more), a service as it was last \
         measured where nothing of it changed since, and a service's backlog past its throughput carried into \
         the pieces after, its requests late while it exceeds what the SLO leaves ({} pieces, {} services of \
         them from the model, {} as last measured, {} with requests late by a backlog, {} requests simulated)",
        count(traffic.services().len(), "service"),
        report.hours,
        report.interval_s / 60.0,
        report.sampling.window_s,
        report.sampling.warmup_s,
        report.sampling.max_requests,
        tessera_autopilot::MIN_WINDOW_BATCHES,
        100.0 * tessera_autopilot::FULL_WINDOW_LOAD,
        report.pieces_simulated,
        report.services_modelled,
        report.services_reused,
        report.services_backlogged,
        report.requests_simulated
    )
}

/// The day's series for its picture: the demand (all services) at every
/// change of the traffic, and each strategy's GPUs, worst service per hour
/// and totals.
fn day_picture(report: &DayReport, traffic: &TrafficCurve) -> DayPicture {
    let end_s = report.hours * 3600.0;
    let demand_rps = std::iter::once(0.0)
        .chain(traffic.change_times(0.0, end_s))
        .map(|time_s| (time_s, traffic.rates_rps(time_s).iter().sum()))
        .collect();
    let series = |name: &str, day: &StrategyDay| StrategySeries {
        name: name.to_string(),
        gpus: day.gpus_over_time.iter().map(|step| (step.time_s, step.gpus)).collect(),
        worst_by_hour: day.hours.iter().map(|row| row.tally.worst_service_attainment).collect(),
        totals: StrategyTotals {
            gpu_hours: day.totals.gpu_hours,
            attainment: day.totals.attainment,
            worst_service: day.totals.worst_service.clone().zip(day.totals.worst_service_attainment),
            gpus_reconfigured: day.totals.gpus_reconfigured,
            processes_started: day.totals.processes_started,
            requests_lost: day.totals.requests_lost,
        },
    };
    DayPicture {
        hours: report.hours,
        demand_rps,
        strategies: vec![
            series("autopilot", &report.autopilot),
            series("static peak", &report.static_peak),
            series("scratch", &report.scratch),
        ],
        reference: 1,
    }
}

/// The day as tables: the comparison, then hour by hour, then the goals.
fn render(report: &DayReport, traffic: &TrafficCurve, described: &str) -> String {
    let mut text = format!("{}\n\n", wrap_words(&heading(report, traffic, described), "", ""));
    let days = [&report.autopilot, &report.static_peak, &report.scratch];
    let static_gpu_hours = report.static_peak.totals.gpu_hours;
    let mut table = TextTable::new(&["", "autopilot", "static peak", "scratch"]);
    let figures: [(&str, Figure); 10] = [
        ("GPU-hours", |t, _| format!("{:.1}", t.gpu_hours)),
        ("vs static peak", |t, fixed| format!("{:+.1}%", 100.0 * (t.gpu_hours / fixed - 1.0))),
        ("most GPUs held", |t, _| t.gpus_max.to_string()),
        ("requests within SLO %", |t, _| percent(t.attainment)),
        ("worst service %", |t, _| percent(t.worst_service_attainment)),
        ("worst service", |t, _| t.worst_service.clone().unwrap_or_else(|| "-".to_string())),
        ("reconfigurations", |t, _| t.reconfigurations.to_string()),
        ("GPUs reconfigured", |t, _| t.gpus_reconfigured.to_string()),
        ("processes started", |t, _| t.processes_started.to_string()),
        ("requests lost", |t, _| format!("{:.0}", t.requests_lost)),
    ];
    for (name, figure) in figures {
        let mut row = vec![name.to_string()];
        row.extend(days.iter().map(|day| figure(&day.totals, static_gpu_hours)));
        table.row(row);
    }
    text.push_str(&table.render());
    text.push('\n');
    let mut hours = TextTable::new(&[
        "hour",
        "demand req/s",
        "autopilot GPU-h",
        "≤SLO %",
        "worst %",
        "GPUs reconf.",
        "static GPU-h",
        "scratch GPU-h",
        "scratch ≤SLO %",
    ]);
    for (index, row) in report.autopilot.hours.iter().enumerate() {
        let tally = &row.tally;
        let (fixed, scratch) = (&report.static_peak.hours[index].tally, &report.scratch.hours[index].tally);
        hours.row(vec![
            row.hour.to_string(),
            format!("{:.0}", report.demand_rps[index]),
            format!("{:.2}", tally.gpu_hours),
            percent(tally.attainment),
            percent(tally.worst_service_attainment),
            tally.gpus_reconfigured.to_string(),
            format!("{:.2}", fixed.gpu_hours),
            format!("{:.2}", scratch.gpu_hours),
            percent(scratch.attainment),
        ]);
    }
    text.push_str(&hours.render());
    text.push('\n');
    for line in goals(report) {
        text.push_str(&wrap_words(&line, "", "  "));
        text.push('\n');
    }
    text.push_str(&wrap_words(&forecast_words(&report.forecast), "", "  "));
    text.push('\n');
    text
}

/// One figure of a strategy's day in words, from its totals and the static
/// baseline's GPU-hours.
type Figure = fn(&Tally, f64) -> String;

/// The goals, each with its verdict.
fn goals(report: &DayReport) -> Vec<String> {
    let (autopilot, fixed, scratch) = (&report.autopilot.totals, &report.static_peak.totals, &report.scratch.totals);
    let saving = 1.0 - autopilot.gpu_hours / fixed.gpu_hours;
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    let worst = autopilot.worst_service_attainment.unwrap_or(0.0);
    vec![
        format!(
            "GPU-hours {:.1}% below static provisioning at the peak (goal: 25%): {}",
            100.0 * saving,
            verdict(saving >= 0.25)
        ),
        format!(
            "every service's requests within its SLO: worst {} {:.2}% (goal: 99%): {}",
            autopilot.worst_service.as_deref().unwrap_or("-"),
            100.0 * worst,
            verdict(worst >= 0.99)
        ),
        format!(
            "requests lost in transitions: {:.0} (goal: none): {}",
            autopilot.requests_lost,
            verdict(autopilot.requests_lost == 0.0)
        ),
        format!(
            "GPUs reconfigured: {} against {} replanning from scratch: {}",
            autopilot.gpus_reconfigured,
            scratch.gpus_reconfigured,
            verdict(autopilot.gpus_reconfigured < scratch.gpus_reconfigured)
        ),
    ]
}

/// The forecast's accuracy in words.
fn forecast_words(accuracy: &ForecastAccuracy) -> String {
    format!(
        "forecasts: {} checked against the rate then observed, off by {:.1}% on average, {:.0}% of them short, the \
         worst by {:.0}%",
        accuracy.checked,
        100.0 * accuracy.mean_abs_relative_error,
        100.0 * accuracy.under_share,
        100.0 * accuracy.worst_under
    )
}

/// A share as a percentage with two decimals, `-` when there is none.
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_string(), |share| format!("{:.2}", 100.0 * share))
}

/// `tessera autopilot simulate --format json`: the figures at the
/// top, then every strategy's day, hour by hour, and the journal.
#[derive(Serialize)]
struct DayDocument<'a> {
    gpu_hours: f64,
    static_peak_gpu_hours: f64,
    scratch_gpu_hours: f64,
    attainment: Option<f64>,
    worst_service_attainment: Option<f64>,
    worst_service: Option<&'a str>,
    gpus_reconfigured: usize,
    scratch_gpus_reconfigured: usize,
    requests_lost: f64,
    processes_started: u64,
    hours: Vec<HourDocument<'a>>,
    autopilot: &'a StrategyDay,
    static_peak: &'a StrategyDay,
    scratch: &'a StrategyDay,
    journal: &'a [JournalEntry],
    forecast: &'a ForecastAccuracy,
    simulated_hours: f64,
    interval_s: f64,
    sampling: &'a Sampling,
    controller: &'a ControllerConfig,
    pieces_simulated: usize,
    requests_simulated: u64,
    services_modelled: u64,
    model_evaluations: u64,
    services_reused: u64,
    services_backlogged: u64,
}

/// One hour of every strategy.
#[derive(Serialize)]
struct HourDocument<'a> {
    hour: usize,
    demand_rps: f64,
    autopilot: &'a Tally,
    static_peak: &'a Tally,
    scratch: &'a Tally,
}

impl<'a> DayDocument<'a> {
    fn new(report: &'a DayReport) -> DayDocument<'a> {
        let totals = &report.autopilot.totals;
        let hours = (0..report.autopilot.hours.len())
            .map(|hour| HourDocument {
                hour,
                demand_rps: report.demand_rps[hour],
                autopilot: &report.autopilot.hours[hour].tally,
                static_peak: &report.static_peak.hours[hour].tally,
                scratch: &report.scratch.hours[hour].tally,
            })
            .collect();
        DayDocument {
            gpu_hours: totals.gpu_hours,
            static_peak_gpu_hours: report.static_peak.totals.gpu_hours,
            scratch_gpu_hours: report.scratch.totals.gpu_hours,
            attainment: totals.attainment,
            worst_service_attainment: totals.worst_service_attainment,
            worst_service: totals.worst_service.as_deref(),
            gpus_reconfigured: totals.gpus_reconfigured,
            scratch_gpus_reconfigured: report.scratch.totals.gpus_reconfigured,
            requests_lost: totals.requests_lost,
            processes_started: totals.processes_started,
            hours,
            autopilot: &report.autopilot,
            static_peak: &report.static_peak,
            scratch: &report.scratch,
            journal: &report.journal,
            forecast: &report.forecast,
            simulated_hours: report.hours,
            interval_s: report.interval_s,
            sampling: &report.sampling,
            controller: &report.controller,
            pieces_simulated: report.pieces_simulated,
            requests_simulated: report.requests_simulated,
            services_modelled: report.services_modelled,
            model_evaluations: report.model_evaluations,
            services_reused: report.services_reused,
            services_backlogged: report.services_backlogged,
        }
    }
}
