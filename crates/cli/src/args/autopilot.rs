//! `tessera autopilot`: the commands, and the day's traffic and its
//! measurement of `autopilot simulate` (the controller's options are
//! `autopilot_run`'s `ControllerArgs`, which `autopilot run` shares).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::autopilot_run::{parse_non_negative, parse_positive, ControllerArgs};
use super::{InputArgs, ListFormat};

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
    /// Keep a running fleet at its SLOs: every --interval-s, read each
    /// service's request rate (Prometheus, or a traffic file for tests),
    /// forecast it, and keep, scale up or scale down the running plan by
    /// the controller's rules; act on the cluster (make before break) or a
    /// plan file, or with --dry-run only print. Holds, and says why, on
    /// missing or stale rates; every decision is journaled in the store.
    Run(Box<super::AutopilotRunArgs>),
    /// The decisions `autopilot run` journaled in the store, oldest first.
    Journal(super::AutopilotJournalArgs),
}

/// `tessera autopilot simulate`.
#[derive(Debug, Args)]
pub struct AutopilotSimulateArgs {
    #[command(flatten)]
    pub inputs: InputArgs,

    #[command(flatten)]
    pub controller: ControllerArgs,

    /// The traffic: a CSV with the header `time_s,service,rate_rps`, each
    /// row a service's rate from that time on (every service from 0 s), and
    /// an optional `cv` column: a service's inter-arrival coefficient of
    /// variation (its requests then arrive so in the simulation, and plans
    /// are made under the burstiest service's unless --arrivals says).
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

    /// Simulate every service of every piece request by request. By
    /// default a steady service (Poisson arrivals, every segment below 97%
    /// of its full-batch throughput) takes the serving model's share within
    /// its SLO (to within 0.001 points) instead of a simulated window.
    #[arg(long)]
    pub simulate_all: bool,

    /// Serve the day on GPUs slower than profiled: every batch this share
    /// slower (0.05: 5% slower). The autopilot still decides with the
    /// profiles; default: the profiled speed.
    #[arg(long, value_name = "SHARE", default_value_t = tessera_autopilot::Sampling::default().slowdown, allow_negative_numbers = true)]
    pub slowdown: f64,

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
