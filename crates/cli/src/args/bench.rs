//! `tessera bench …`: the benchmarks' inputs and sizes.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use tessera_plan::{LatencyRule, DEFAULT_TIME_LIMIT};

use super::parse_seconds;

/// `tessera bench …`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Time both strategies on ParvaGPU's six scenarios and the demo.
    Plan {
        /// ParvaGPU's data folder (with prof_data/ and slo/).
        #[arg(long, default_value = "../shared/data/parvagpu", value_name = "DIR")]
        parvagpu: PathBuf,
        /// Timed repetitions per input and strategy.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
        iterations: u32,
    },
    /// Colocation models: training time and scoring speed on KACE's pairs,
    /// the nested evaluation on every protocol and group size (the pairs,
    /// groups of 3 and 4 built from them, and every file of groups measured
    /// together), a summary table of every file, and the learning curve of
    /// suggested against random measurements.
    Colocate {
        /// KACE's colocation measurements (pairs).
        #[arg(long, default_value = "../shared/data/kace/pairs_mps100.csv", value_name = "FILE")]
        data: PathBuf,
        /// Files of groups measured together (any K, KACE's form), each
        /// evaluated at its own size with LOWO and LOFO; the four-way file
        /// is skipped when absent.
        #[arg(long = "groups", value_name = "FILE", default_value = "../shared/data/kace/four_way_1107.csv")]
        groups: Vec<PathBuf>,
        /// KACE's P3 splits (skipped when absent).
        #[arg(long, default_value = "../shared/data/kace/splits/n_occur_3", value_name = "DIR")]
        splits: PathBuf,
        /// Seeds of the learning curve (0 skips it).
        #[arg(long, default_value_t = 3)]
        curve_seeds: u64,
        /// Write the learning curve as an SVG plot to this file.
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
    },
    /// The oversubscription simulator: makespan / lower bound for each
    /// scheduler × prefetch policy over a sweep of generated traces, the
    /// genetic algorithm's gap to exhaustive search, and speed.
    Simulate {
        /// Traces per sweep cell (seeds 0..N).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
    },
    /// The HTTP service under load, on 127.0.0.1 only: concurrent clients
    /// read, verify and start demo planning jobs (each a bounded number of
    /// requests); then clients hang up mid-request; then the store is
    /// checked. Prints throughput and p50/p99 latency per route.
    Serve {
        /// Concurrent clients for reads and verifications.
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
        clients: u32,
        /// Read requests in all.
        #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
        reads: u32,
        /// Verifications in all.
        #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        verifies: u32,
        /// Demo planning jobs started at once.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        jobs: u32,
        /// Each job's time limit, seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 10.0, value_parser = parse_seconds)]
        time_limit: f64,
        /// Planning jobs the server runs at once.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
        workers: u32,
    },
    /// Profile completion on ParvaGPU's real grid: keep a share of each
    /// model's configurations (random subsets, or the ones `suggest`
    /// picks), predict the rest, and report the prediction error, interval
    /// coverage, GPUs planned for the six scenarios and the SLO violations
    /// of those plans on the full measured profiles.
    Profiles {
        /// ParvaGPU's data folder (with prof_data/ and slo/).
        #[arg(long, default_value = "../shared/data/parvagpu", value_name = "DIR")]
        parvagpu: PathBuf,
        /// Budgets, % of each model's grid.
        #[arg(long, value_delimiter = ',', default_value = "5,10,20,40", value_parser = clap::value_parser!(u32).range(1..=100))]
        budgets: Vec<u32>,
        /// Random subsets per budget (seeds 1..N).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Seconds one profiled configuration takes (for the time saved).
        #[arg(long, value_name = "S", default_value_t = 20.0, value_parser = parse_seconds)]
        seconds_per_point: f64,
    },
    /// Plan catalogues of many services with both strategies, each as a
    /// whole `tessera plan` process: time (load + plan + write), peak
    /// memory, GPUs, lower bound.
    Scale {
        /// Catalogue sizes (services).
        #[arg(long, value_delimiter = ',', default_value = "1100,11000,110000")]
        sizes: Vec<usize>,
        #[command(flatten)]
        catalogue: CatalogueBench,
    },
    /// Plans judged by the traffic they meet: ParvaGPU's strategy, the
    /// optimum under each latency rule and under uniform headroom, each
    /// simulated request by request at the real rates under Poisson,
    /// CV-2 and a production trace's arrivals: GPUs, requests within SLO
    /// (all, worst service), planning time.
    Slo {
        /// ParvaGPU's data folder (with prof_data/ and slo/).
        #[arg(long, default_value = "../shared/data/parvagpu", value_name = "DIR")]
        parvagpu: PathBuf,
        /// An arrival trace (CSV with a TIMESTAMP column).
        #[arg(long, default_value = "../shared/data/traces/azure_llm_conv_2023.csv", value_name = "FILE")]
        trace: PathBuf,
        /// ParvaGPU's scenarios to plan.
        #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6", value_parser = clap::value_parser!(u8).range(1..=6))]
        scenarios: Vec<u8>,
        /// Reference catalogue sizes (services; 0 values: none).
        #[arg(long, value_delimiter = ',', default_value = "1100")]
        sizes: Vec<usize>,
        /// Simulated seconds per scenario (catalogues get a tenth).
        #[arg(long, value_name = "S", default_value_t = 120.0)]
        seconds: f64,
        /// Seed of the catalogues and simulations.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Long-tail catalogues (a few heavy services, many light ones) planned
    /// with dedicated segments only and with shared instances (`--share
    /// serialized`): GPUs, lower bound, services sharing, planning time,
    /// and requests within SLO in a request-level simulation with every
    /// batch 5% slower than profiled.
    LongTail {
        /// ParvaGPU's data folder (with prof_data/ and slo/).
        #[arg(long, default_value = "../shared/data/parvagpu", value_name = "DIR")]
        parvagpu: PathBuf,
        /// Catalogue sizes (services).
        #[arg(long, value_delimiter = ',', default_value = "300,3000,30000",
            value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        sizes: Vec<u64>,
        /// The heaviest service's rate, req/s.
        #[arg(long, value_name = "RPS", default_value_t = 2000.0, value_parser = parse_positive)]
        head: f64,
        /// How fast rates fall: service i (from 0) runs at
        /// max(1, round(HEAD / (i + 1)^EXPONENT)) req/s.
        #[arg(long, default_value_t = 1.1, value_parser = parse_positive)]
        exponent: f64,
        /// Seed of the models drawn and the simulations.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Simulated seconds per plan (a service's share within SLO over
        /// ten minutes still swings by a point at a busy shared instance,
        /// over an hour by a few tenths: its slow requests come in bursts).
        #[arg(long, value_name = "S", default_value_t = 14_400.0, value_parser = parse_seconds)]
        seconds: f64,
    },
    /// Replanning after rates change by ±20%: GPUs, layouts kept, instances
    /// created and destroyed, services changed, against planning from
    /// scratch; and one GPU lost.
    Replan {
        /// Catalogue sizes (services), built as `bench scale` builds them.
        #[arg(long, value_delimiter = ',', default_value = "110,1100")]
        sizes: Vec<usize>,
        /// Draws of new rates per catalogue (seeds 1..N).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
        draws: u64,
        #[command(flatten)]
        catalogue: CatalogueBench,
    },
}

/// A positive finite number (`bench long-tail`'s rates and exponent).
fn parse_positive(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(number) if number.is_finite() && number > 0.0 => Ok(number),
        _ => Err(format!("expected a positive number, got '{value}'")),
    }
}

/// What `bench scale` and `bench replan` share: where ParvaGPU's data is,
/// the catalogues' seed, and how every plan is made.
#[derive(Debug, Clone, Args)]
pub struct CatalogueBench {
    /// ParvaGPU's data folder (with prof_data/ and slo/).
    #[arg(long, default_value = "../shared/data/parvagpu", value_name = "DIR")]
    pub parvagpu: PathBuf,
    /// Seed of the catalogues' rate factors.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Latency rule of every plan.
    #[arg(long, value_enum, default_value_t = LatencyRule::Parva)]
    pub latency_rule: LatencyRule,
    /// Time limit of each optimal planning, seconds (1e20: no limit).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TIME_LIMIT.as_secs_f64(), value_parser = parse_seconds)]
    pub time_limit: f64,
}
