//! What `tessera plan`, `tessera verify` and the autopilot read: the
//! profiles (the store, a file or the built-in example) and the SLOs. The
//! fleet they are read for is a planning option (`--gpu`,
//! [`tessera_plan::PlanOptions`]).

use std::path::PathBuf;

use clap::Args;

/// What `plan`, `verify` and the autopilot read: profiles and SLOs.
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
}

/// Where profiles come from.
#[derive(Debug, Clone, Args)]
pub struct ProfileSource {
    /// Profiles to use instead of the store: a ParvaGPU folder (one
    /// `<model>.csv` per model, measured on the first --gpu) or a Tessera
    /// profile CSV file.
    #[arg(long, value_name = "DIR|FILE")]
    pub profiles: Option<PathBuf>,
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

fn parse_percentile(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(percentile) if percentile > 0.0 && percentile < 100.0 => Ok(percentile),
        _ => Err(format!("expected a share above 0 and below 100 (%), got '{value}'")),
    }
}
