//! The `optimal` strategy's objective, compared lexicographically:
//! cost (GPUs, or Σ GPUs × cost per GPU for a fleet of several models),
//! then provisioned slack (Σ over services of provisioned / rate − 1), then
//! segments.

/// Slack differences below this count as ties.
pub(crate) const SLACK_EPSILON: f64 = 1e-9;

/// Relative cost differences below this count as ties.
const COST_EPSILON: f64 = 1e-9;

/// The value of a plan, or a lower bound on the values below a search node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Objective {
    /// GPUs, or total cost; plus a large penalty per GPU over a fleet limit.
    pub cost: f64,
    /// Σ provisioned / rate − 1.
    pub slack: f64,
    /// Number of segments.
    pub segments: u64,
}

impl Objective {
    /// Lexicographically smaller, ignoring floating-point noise.
    pub fn better_than(&self, other: &Objective) -> bool {
        let tolerance = COST_EPSILON * self.cost.abs().max(other.cost.abs()).max(1.0);
        if (self.cost - other.cost).abs() > tolerance {
            return self.cost < other.cost;
        }
        if (self.slack - other.slack).abs() > SLACK_EPSILON {
            return self.slack < other.slack;
        }
        self.segments < other.segments
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_cost_then_slack_then_segments() {
        let base = Objective { cost: 3.0, slack: 0.5, segments: 9 };
        assert!(Objective { cost: 2.0, slack: 9.0, segments: 99 }.better_than(&base));
        assert!(Objective { cost: 3.0, slack: 0.4, segments: 99 }.better_than(&base));
        assert!(Objective { cost: 3.0 + 1e-12, slack: 0.5 + 1e-12, segments: 8 }.better_than(&base));
        assert!(!base.better_than(&base));
    }
}
