//! The planning strategies, and the latency rule each plans under unless
//! another is asked for.

use std::fmt;
use std::str::FromStr;

use crate::error::PlanError;
use crate::latency::LatencyRule;

/// How a plan is searched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Strategy {
    /// Fewest GPUs (or lowest cost for a mixed fleet), with a proven lower
    /// bound: the LP relaxation, rounding, a local search and branch and
    /// bound.
    #[default]
    Optimal,
    /// ParvaGPU's heuristic: its segment configurator and best-fit
    /// allocator, on the real MIG placement lattice.
    Parva,
}

impl Strategy {
    /// Every strategy.
    pub const ALL: [Strategy; 2] = [Strategy::Optimal, Strategy::Parva];

    /// The strategy's name on the command line, in the API and in plans.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Optimal => "optimal",
            Strategy::Parva => "parva",
        }
    }

    /// The latency rule a plan of this strategy is made under when none is
    /// asked for (and, for a replan, none is recorded in the running plan):
    /// ParvaGPU's own rule for its heuristic, [`LatencyRule::DEFAULT`]
    /// otherwise.
    pub fn default_rule(self) -> LatencyRule {
        match self {
            Strategy::Optimal => LatencyRule::DEFAULT,
            Strategy::Parva => LatencyRule::Parva,
        }
    }
}

impl Strategy {
    /// Whether the strategy can plan under `rule`: ParvaGPU's heuristic
    /// implements its own rule only.
    pub fn supports(self, rule: LatencyRule) -> bool {
        match self {
            Strategy::Optimal => true,
            Strategy::Parva => rule == LatencyRule::Parva,
        }
    }

    /// [`Strategy::supports`] as a result: the error names the strategy, the
    /// rule asked for and the rules it implements.
    pub fn check_rule(self, rule: LatencyRule) -> Result<(), PlanError> {
        if self.supports(rule) {
            return Ok(());
        }
        let supported: Vec<&str> = LatencyRule::ALL.iter().filter(|r| self.supports(**r)).map(|r| r.name()).collect();
        Err(PlanError::UnsupportedRule { strategy: self.name(), supported: supported.join(", "), asked: rule.name() })
    }
}

// A strategy travels by its name, in plans, options and the API.
tessera_core::serde_as_text!(Strategy);

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Strategy::ALL.into_iter().find(|strategy| strategy.name() == s).ok_or_else(|| {
            let known: Vec<&str> = Strategy::ALL.iter().map(|strategy| strategy.name()).collect();
            format!("unknown strategy '{s}' (known: {})", known.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_parva_plans_under_its_own_rule() {
        for strategy in Strategy::ALL {
            assert_eq!(strategy.name().parse::<Strategy>().unwrap(), strategy);
        }
        assert_eq!(Strategy::Parva.default_rule(), LatencyRule::Parva);
        assert_eq!(Strategy::Optimal.default_rule(), LatencyRule::DEFAULT);
        let error = "greedy".parse::<Strategy>().unwrap_err();
        assert_eq!(error, "unknown strategy 'greedy' (known: optimal, parva)");
    }
}
