//! How a service's requests arrive.

use std::fmt;
use std::sync::Arc;

/// An arrival process, scaled to each service's mean rate.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrivalModel {
    /// Independent exponential inter-arrival times.
    Poisson,
    /// A renewal process whose inter-arrival times have coefficient of
    /// variation `cv` (1 is Poisson; above 1 burstier).
    Renewal {
        /// Standard deviation over mean of the inter-arrival times.
        cv: f64,
    },
    /// A two-state Markov-modulated Poisson process: "on" periods at
    /// `burst` times the mean rate, "off" periods at the rate that keeps
    /// the mean; period lengths exponential with the given means.
    OnOff {
        /// The on-rate over the mean rate (> 1).
        burst: f64,
        /// Mean length of an on period, seconds.
        mean_on_s: f64,
        /// Mean length of an off period, seconds.
        mean_off_s: f64,
    },
    /// A replayed trace: arrival instants in seconds, sorted, time-scaled
    /// so that its mean rate is the service's.
    Trace {
        /// A name for reports (e.g. the file's name).
        name: String,
        /// The arrival instants, seconds from the trace's start.
        times_s: Arc<[f64]>,
    },
}

impl fmt::Display for ArrivalModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArrivalModel::Poisson => f.write_str("poisson"),
            ArrivalModel::Renewal { cv } => write!(f, "cv={cv}"),
            ArrivalModel::OnOff { burst, mean_on_s, mean_off_s } => {
                write!(f, "onoff=burst:{burst},on:{mean_on_s},off:{mean_off_s}")
            }
            ArrivalModel::Trace { name, .. } => write!(f, "trace={name}"),
        }
    }
}
