//! `tessera autopilot`: the controller's options, its day's traffic and
//! the reconfiguration times of `autopilot simulate`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use tessera_plan::{LatencyRule, DEFAULT_MAX_GPUS, DEFAULT_TIME_LIMIT, MAX_GPUS_LIMIT};

use super::{parse_seconds, InputArgs, ListFormat};

/// `tessera autopilot …`.
#[derive(Debug, Subcommand)]
pub enum AutopilotCommand {
    /// Simulate a day of traffic: the autopilot (keep the plan while the
    /// serving model predicts every SLO met at the forecast, replan from
    /// the running plan early when not, scale down late) against static
    /// provisioning at the peak and replanning from scratch at every
    /// interval, each measured with the request-level simulator: GPU-hours,
    /// requests within SLO, GPUs reconfigured, processes started and
    /// requests lost in transitions, per hour and in total.
    Simulate(Box<AutopilotSimulateArgs>),
}

/// `tessera autopilot simulate`.
#[derive(Debug, Args)]
pub struct AutopilotSimulateArgs {
    #[command(flatten)]
    pub inputs: InputArgs,

    /// Latency rule every plan must meet (default: percentile).
    #[arg(long, value_enum)]
    pub latency_rule: Option<LatencyRule>,

    /// Seconds one planning may search.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TIME_LIMIT.as_secs_f64(), value_parser = parse_seconds)]
    pub time_limit: f64,

    /// Most GPUs a plan may use.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_GPUS, value_parser = clap::value_parser!(u64).range(1..=MAX_GPUS_LIMIT))]
    pub max_gpus: u64,

    /// The traffic: a CSV with the header `time_s,service,rate_rps`, each
    /// row a service's rate from that time on (every service from 0 s).
    #[arg(long, value_name = "FILE", conflicts_with = "diurnal", required_unless_present = "diurnal")]
    pub traffic: Option<PathBuf>,

    /// Generate the traffic: a daily cycle per service peaking at its SLO
    /// rate around 14:00 (each service's own phase), ±5% noise and bursts
    /// on top.
    #[arg(long)]
    pub diurnal: bool,

    #[command(flatten)]
    pub generator: DiurnalArgs,

    /// Also write the traffic simulated to FILE (as --traffic reads it).
    #[arg(long, value_name = "FILE")]
    pub write_traffic: Option<PathBuf>,

    /// Hours to simulate.
    #[arg(long, value_name = "H", default_value_t = tessera_autopilot::DEFAULT_HOURS, value_parser = parse_positive)]
    pub hours: f64,

    /// Minutes between the autopilot's decisions (and the scratch
    /// baseline's replans).
    #[arg(long, value_name = "MIN", default_value_t = tessera_autopilot::DEFAULT_INTERVAL_S / 60.0, value_parser = parse_positive)]
    pub interval_min: f64,

    /// Plans are made for the forecast plus this share (0.15: +15%).
    #[arg(long, value_name = "SHARE", default_value_t = tessera_autopilot::DEFAULT_PLAN_HEADROOM, value_parser = parse_non_negative)]
    pub plan_headroom: f64,

    /// The plan is kept while predicted to meet every SLO at the forecast
    /// plus this share.
    #[arg(long, value_name = "SHARE", default_value_t = tessera_autopilot::DEFAULT_KEEP_HEADROOM, value_parser = parse_non_negative)]
    pub keep_headroom: f64,

    /// A scale-down must release at least this many GPUs.
    #[arg(long, value_name = "K", default_value_t = tessera_autopilot::DEFAULT_SCALE_DOWN_MIN_GPUS, value_parser = clap::value_parser!(u64).range(1..))]
    pub scale_down_gpus: u64,

    /// A scale-down must have been possible for this many minutes (at every
    /// decision) before it is taken.
    #[arg(long, value_name = "MIN", default_value_t = tessera_autopilot::DEFAULT_SCALE_DOWN_HOLD_S / 60.0, value_parser = parse_non_negative)]
    pub scale_down_after_min: f64,

    /// Most reconfigurations started in any hour.
    #[arg(long, value_name = "N", default_value_t = tessera_autopilot::DEFAULT_MAX_RECONFIGURATIONS_PER_HOUR as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_reconfigurations_per_hour: u64,

    /// GPUs a replan may keep to avoid a dip (a service below its forecast
    /// while a step runs): a scale-up may keep every running GPU and add
    /// this many; a scale-down tries draining each of the this-many-plus-one
    /// least used GPUs, then releasing up to this many fewer.
    #[arg(long, value_name = "N", default_value_t = tessera_autopilot::DEFAULT_DIP_EXTRA_GPUS)]
    pub dip_extra_gpus: u64,

    /// Seconds to stop a GPU's segments.
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_STOP_S, value_parser = parse_non_negative)]
    pub stop_s: f64,

    /// Seconds to destroy one MIG instance.
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_DESTROY_S, value_parser = parse_non_negative)]
    pub destroy_s: f64,

    /// Seconds to create one MIG instance.
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_CREATE_S, value_parser = parse_non_negative)]
    pub create_s: f64,

    /// Seconds from starting a GPU's new segments to their serving (pod
    /// scheduled, container started, model loaded).
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_START_S, value_parser = parse_non_negative)]
    pub start_s: f64,

    /// Measured seconds of traffic simulated for each piece of the day
    /// (each piece weighted by its requests).
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_WINDOW_S, value_parser = parse_positive)]
    pub window_s: f64,

    /// Unmeasured seconds before each window.
    #[arg(long, value_name = "S", default_value_t = tessera_autopilot::DEFAULT_WARMUP_S, value_parser = parse_non_negative)]
    pub warmup_s: f64,

    /// A busy service's window (and warm-up) is shortened to hold about
    /// this many measured requests, never below 50 of its slowest batches,
    /// and not at all while a segment of it runs at 90% of its throughput
    /// or more.
    #[arg(long, value_name = "N", default_value_t = tessera_autopilot::DEFAULT_MAX_REQUESTS, value_parser = clap::value_parser!(u64).range(1..))]
    pub window_requests: u64,

    /// Seed of the simulated requests.
    #[arg(long, value_name = "SEED", default_value_t = 0)]
    pub sample_seed: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,

    /// Also write the day's picture to FILE: a self-contained HTML page
    /// with the GPUs each strategy held against the demand, the worst
    /// service hour by hour, and the totals.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// The diurnal generator's options (with `--diurnal`; refused with `--traffic`).
#[derive(Debug, Clone, Args)]
pub struct DiurnalArgs {
    /// A service's peak rate over its trough rate.
    #[arg(long, value_name = "R", default_value_t = tessera_autopilot::DEFAULT_PEAK_TO_TROUGH, conflicts_with = "traffic", value_parser = parse_positive)]
    pub peak_to_trough: f64,

    /// Bursts per service per day.
    #[arg(long, value_name = "N", default_value_t = tessera_autopilot::DEFAULT_BURSTS_PER_DAY, conflicts_with = "traffic", value_parser = parse_non_negative)]
    pub bursts: f64,

    /// The largest burst factor (a burst multiplies the rate by between
    /// halfway to it and it).
    #[arg(long, value_name = "F", default_value_t = tessera_autopilot::DEFAULT_BURST_FACTOR, conflicts_with = "traffic", value_parser = parse_positive)]
    pub burst_factor: f64,

    /// Mean burst length, minutes.
    #[arg(long, value_name = "MIN", default_value_t = tessera_autopilot::DEFAULT_BURST_MINUTES, conflicts_with = "traffic", value_parser = parse_positive)]
    pub burst_minutes: f64,

    /// Seed of the traffic.
    #[arg(long, default_value_t = 0, conflicts_with = "traffic")]
    pub seed: u64,
}

/// A finite number above 0.
fn parse_positive(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(number) if number.is_finite() && number > 0.0 => Ok(number),
        _ => Err(format!("expected a positive number, got '{value}'")),
    }
}

/// A finite number of 0 or more.
fn parse_non_negative(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(number) if number.is_finite() && number >= 0.0 => Ok(number),
        _ => Err(format!("expected a number of 0 or more, got '{value}'")),
    }
}
