//! One-line rules that choose partners without learning anything.

use tessera_core::{Colocation, WorkloadMetrics};

/// A rule that scores a group from its members' metrics alone (the
/// highest score is chosen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// The lowest summed memory footprint.
    LowestMemory,
    /// The lowest mean memory utilisation.
    LowestMemoryUtilisation,
    /// The highest mean SM utilisation.
    HighestSmUtilisation,
    /// The highest summed SM throughput (kernel metric).
    HighestSmThroughput,
}

impl Rule {
    /// Every rule.
    pub const ALL: [Rule; 4] =
        [Rule::LowestMemory, Rule::LowestMemoryUtilisation, Rule::HighestSmUtilisation, Rule::HighestSmThroughput];

    /// The rule's name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Rule::LowestMemory => "lowest memory footprint",
            Rule::LowestMemoryUtilisation => "lowest memory utilisation",
            Rule::HighestSmUtilisation => "highest SM utilisation",
            Rule::HighestSmThroughput => "highest summed SM throughput",
        }
    }

    /// The rule's score of `group`: higher is chosen.
    pub fn score(self, group: &Colocation) -> f64 {
        let sum = |f: fn(&WorkloadMetrics) -> f64| group.members.iter().map(|m| f(&m.metrics)).sum::<f64>();
        let mean = |f: fn(&WorkloadMetrics) -> f64| sum(f) / group.members.len() as f64;
        match self {
            Rule::LowestMemory => -sum(|m| m.memory_gb),
            Rule::LowestMemoryUtilisation => -mean(|m| m.mem_util_pct),
            Rule::HighestSmUtilisation => mean(|m| m.sm_util_pct),
            Rule::HighestSmThroughput => sum(|m| m.kernel[1]),
        }
    }
}
