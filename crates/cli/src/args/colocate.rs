//! `tessera colocate …`: colocation measurements, models and their
//! evaluation, recommendations and suggestions.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use tessera_colocate::{ModelKind, Protocol, Risk};

use super::ListFormat;

/// `tessera colocate …`.
#[derive(Debug, Subcommand)]
pub enum ColocateCommand {
    /// Score every model and baseline with KACE's protocols: P3 (train on
    /// each split's training rows, choose among its test rows), LOWO (leave
    /// each workload's model family and task out of training) or LOFO
    /// (leave each whole model family out). Nested: every choice a model
    /// makes (configuration, fallback rule, intervals) is made on each
    /// fold's training rows alone.
    Evaluate {
        /// Protocol.
        #[arg(long, value_enum)]
        protocol: Protocol,
        /// For p3: a folder of splits, each a subfolder with
        /// `training_set.csv` and `testing_set.csv` (KACE's colocation form).
        #[arg(long, value_name = "DIR", required_if_eq("protocol", "p3"))]
        splits: Option<PathBuf>,
        /// For lowo and lofo: every measured colocation (KACE's form, any K).
        #[arg(long, value_name = "FILE", required_if_eq_any([("protocol", "lowo"), ("protocol", "lofo")]))]
        data: Option<PathBuf>,
        /// Group sizes to score; default: the sizes measured in the data.
        /// A measured size chooses among the groups measured together; a
        /// larger size than the pairs chooses among groups built from the
        /// measured pairs (each member's delays beside each partner added:
        /// an assumption, said so).
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(2..=6))]
        group_sizes: Option<Vec<u64>>,
        /// Also report the slowdown model the old way: its configuration
        /// chosen on the test rows themselves (optimistic, labelled so).
        #[arg(long)]
        tuned_on_test: bool,
        /// Seed of the inner row folds.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Import KACE colocation measurements (any K) and, optionally, the
    /// per-workload tables into the store (one transaction each).
    Import {
        /// Colocations in KACE's CSV form.
        data: PathBuf,
        /// KACE's `system_metrics.csv` (with --kernel-metrics).
        #[arg(long, value_name = "FILE", requires = "kernel_metrics")]
        system_metrics: Option<PathBuf>,
        /// KACE's folder of `output_<workload>_ncu_total.csv` files.
        #[arg(long, value_name = "DIR", requires = "system_metrics")]
        kernel_metrics: Option<PathBuf>,
    },
    /// List the colocations in the store, with their ids and sources.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Remove colocations from the store: by id (see `colocate list`), or
    /// every one imported from a source.
    Remove {
        /// Ids of the colocations to remove.
        #[arg(value_name = "ID", required_unless_present = "source", conflicts_with = "source")]
        ids: Vec<i64>,
        /// Remove every colocation imported from this source (as `colocate
        /// list` shows it, or the file's path).
        #[arg(long, value_name = "SOURCE")]
        source: Option<String>,
    },
    /// Train a model and write it as a versioned JSON file: its
    /// configuration, fallback rule and intervals chosen on inner
    /// leave-one-model-family-out folds of the data.
    Train {
        /// Which model.
        #[arg(long, value_enum, default_value_t = ModelKind::Slowdown)]
        model: ModelKind,
        /// Training colocations (KACE's form); default: the store's.
        #[arg(long, value_name = "FILE")]
        data: Option<PathBuf>,
        /// Seed of the model's training.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Where to write the model (atomically).
        #[arg(long, short, value_name = "FILE")]
        output: PathBuf,
    },
    /// Rank partners for a workload by predicted throughput together.
    Recommend {
        /// The workload to find partners for.
        #[arg(long)]
        target: String,
        /// Partners to consider (comma-separated); default: every workload.
        #[arg(long, value_delimiter = ',')]
        candidates: Option<Vec<String>>,
        /// Workloads per group, the target included. Up to 100000 candidate
        /// groups are all scored; beyond that a beam search ranks them
        /// (partners added one at a time, the 256 best partial groups
        /// kept), which is not exhaustive and says so.
        #[arg(long, default_value_t = 2, value_parser = parse_group_size)]
        group_size: u64,
        #[command(flatten)]
        source: ColocationSource,
        /// GPU memory for the footprint check, GB (KACE measured on a V100-32GB).
        #[arg(long, value_name = "GB", default_value_t = 32.0, value_parser = parse_gigabytes)]
        gpu_memory_gb: f64,
        /// Groups to show.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
        top: u64,
        /// Rank by the predicted total (mean) or by the lower end of its 90%
        /// interval (lower: give up a little expected throughput for less
        /// risk).
        #[arg(long, value_enum, default_value_t = Risk::Mean)]
        risk: Risk,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Suggest the colocations to measure next: the unmeasured groups whose
    /// intervals reach furthest above the best known choice of their
    /// workloads.
    Suggest {
        /// Measurements to suggest.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        budget: u64,
        /// Workloads per group (every unmeasured group that fits is
        /// considered, up to 100000 of them).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..=8))]
        group_size: u64,
        #[command(flatten)]
        source: ColocationSource,
        /// GPU memory, GB: groups whose footprints exceed it are not suggested.
        #[arg(long, value_name = "GB", default_value_t = 32.0, value_parser = parse_gigabytes)]
        gpu_memory_gb: f64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
}

/// The model and the data `colocate recommend` and `suggest` work from.
#[derive(Debug, Clone, Args)]
pub struct ColocationSource {
    /// A trained model file; default: train the slowdown model on the data.
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// Colocations and workloads (KACE's form); default: the store's.
    #[arg(long, value_name = "FILE")]
    pub data: Option<PathBuf>,
}

fn parse_gigabytes(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(gb) if gb.is_finite() && gb > 0.0 => Ok(gb),
        _ => Err(format!("expected a positive number of GB, got '{value}'")),
    }
}

/// A group size: a whole number of workloads, at least 2 (the target and
/// one partner).
fn parse_group_size(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(size) if size >= 2 => Ok(size),
        Ok(size) => Err(format!(
            "{}: a group holds the target and at least one partner (2 or more)",
            tessera_core::text::count(usize::try_from(size).unwrap_or(usize::MAX), "workload")
        )),
        Err(_) => Err(format!("'{text}' is not a whole number of workloads")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_size_below_two_says_why() {
        assert_eq!(parse_group_size("3"), Ok(3));
        assert!(parse_group_size("1")
            .unwrap_err()
            .starts_with("1 workload: a group holds the target and at least one partner"));
        assert!(parse_group_size("two").unwrap_err().contains("'two' is not a whole number"));
    }
}
