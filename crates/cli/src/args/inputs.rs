//! What `tessera plan` and `tessera verify` read: the profiles (the store,
//! a file or the built-in example) on a fleet of GPU models, the SLOs, and
//! the process limit.

use std::path::PathBuf;

use clap::Args;
use tessera_core::{GpuModel, GpuOffer};
use tessera_plan::DEFAULT_MAX_PROCS;

/// What `plan` and `verify` read: profiles, SLOs and the process limit.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// Use the built-in example (synthetic profiles and six services); no
    /// files and no GPU needed. `--slo` may replace the example services.
    #[arg(long, conflicts_with = "profiles")]
    pub demo: bool,

    #[command(flatten)]
    pub profiles: ProfileSource,

    #[command(flatten)]
    pub slos: SloSource,

    /// Most MPS processes per segment.
    #[arg(long, default_value_t = DEFAULT_MAX_PROCS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_procs: u32,
}

/// Where profiles come from.
#[derive(Debug, Clone, Args)]
pub struct ProfileSource {
    /// Profiles to use instead of the store: a ParvaGPU folder (one
    /// `<model>.csv` per model, measured on the first --gpu) or a Tessera
    /// profile CSV file.
    #[arg(long, value_name = "DIR|FILE")]
    pub profiles: Option<PathBuf>,

    /// A GPU model of the fleet, with an optional cost per GPU and count
    /// limit; repeat for a mixed fleet (the objective becomes total cost):
    /// `--gpu a100-80gb:cost=1.0 --gpu h100-80gb:cost=1.6,count=16`. GPU
    /// models without profiles of a model get estimated ones (said in the
    /// output).
    #[arg(long = "gpu", value_name = "MODEL[:cost=C][,count=N]", default_value = "a100-80gb", value_parser = parse_offer)]
    pub gpus: Vec<GpuOffer>,
}

impl ProfileSource {
    /// The first GPU model named.
    pub fn first_gpu(&self) -> GpuModel {
        self.gpus.first().map_or(GpuModel::A100_80GB, |offer| offer.model)
    }
}

/// Where SLOs come from.
#[derive(Debug, Clone, Args)]
pub struct SloSource {
    /// SLO CSV with the header `service,model,rate_rps,latency_ms`
    /// (`model` optional: the service name is then the model; optional
    /// `percentile`, the share of requests within the SLO, default 99).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["slo_rates", "slo_latency", "scenario"])]
    pub slo: Option<PathBuf>,

    /// ParvaGPU request-rate file (headerless, one scenario per row).
    #[arg(long, value_name = "FILE", requires_all = ["slo_latency", "scenario"])]
    pub slo_rates: Option<PathBuf>,

    /// ParvaGPU latency-SLO file (headerless, one scenario per row).
    #[arg(long, value_name = "FILE", requires_all = ["slo_rates", "scenario"])]
    pub slo_latency: Option<PathBuf>,

    /// Scenario (1-based row) of the ParvaGPU SLO files.
    #[arg(long, value_name = "K", requires = "slo_rates")]
    pub scenario: Option<usize>,

    /// The share of every service's requests (%) that must finish within
    /// its latency SLO, overriding the SLO file's `percentile` column
    /// (default 99).
    #[arg(long, value_name = "P", value_parser = parse_percentile)]
    pub slo_percentile: Option<f64>,
}

fn parse_offer(value: &str) -> Result<GpuOffer, String> {
    value.parse().map_err(|error: tessera_core::CoreError| error.to_string())
}

fn parse_percentile(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(percentile) if percentile > 0.0 && percentile < 100.0 => Ok(percentile),
        _ => Err(format!("expected a share above 0 and below 100 (%), got '{value}'")),
    }
}
