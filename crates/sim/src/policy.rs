//! The policies a simulation runs under: which resident buffer to evict,
//! when to fetch data ahead of need, and what happens to a buffer after
//! its last use.

use serde::{Deserialize, Serialize};

/// Which resident buffer leaves first when memory is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Eviction {
    /// Least recently used: the buffer whose last use (compute start) or
    /// arrival is oldest.
    Lru,
    /// Belady's rule: the buffer whose next use in the schedule is
    /// furthest away (never used again counts as furthest).
    Belady,
}

impl Eviction {
    /// Sort key: smaller leaves first. `tick` orders uses and arrivals;
    /// `next_use` is the next schedule position that needs the buffer.
    pub(crate) fn key(self, tick: u64, next_use: Option<usize>) -> u64 {
        match self {
            Eviction::Lru => tick,
            Eviction::Belady => u64::MAX - next_use.map_or(u64::MAX, |p| p as u64),
        }
    }
}

/// When data is copied to the GPU ahead of the operation that needs it.
/// Every policy also fetches on demand: when the compute engine is idle
/// and the next operation's data is missing, that data is fetched,
/// evicting by the eviction policy as needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Prefetch {
    /// Demand fetching only.
    None,
    /// Fetch the next operation (in schedule order) whose data is missing
    /// once all of its missing bytes fit in free memory; never evicts.
    Passive,
    /// Stream the next missing data (in schedule order) into whatever
    /// memory is free, in chunks as memory frees up; never evicts.
    Active,
    /// Fetch whole buffers of the next `k` operations after the running
    /// one, evicting only buffers whose next use comes after the operation
    /// being fetched for (do no harm).
    Lookahead(usize),
}

impl std::str::FromStr for Prefetch {
    type Err = String;

    /// `none`, `passive`, `active` or `lookahead:K` (K ≥ 1); the error names
    /// the text and the choices.
    fn from_str(value: &str) -> Result<Prefetch, String> {
        match value {
            "none" => Ok(Prefetch::None),
            "passive" => Ok(Prefetch::Passive),
            "active" => Ok(Prefetch::Active),
            _ => match value.strip_prefix("lookahead:").map(str::parse::<usize>) {
                Some(Ok(k)) if k > 0 => Ok(Prefetch::Lookahead(k)),
                _ => Err(format!("unknown prefetch policy '{value}' (none, passive, active, lookahead:K with K ≥ 1)")),
            },
        }
    }
}

impl std::fmt::Display for Prefetch {
    /// As [`Prefetch`]'s `from_str` reads it: `none`, `passive`, `active`,
    /// `lookahead:K`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Prefetch::None => write!(f, "none"),
            Prefetch::Passive => write!(f, "passive"),
            Prefetch::Active => write!(f, "active"),
            Prefetch::Lookahead(k) => write!(f, "lookahead:{k}"),
        }
    }
}

/// What happens to a buffer after the last operation in the schedule that
/// uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Retention {
    /// Freed by its client when the compute of its last operation ends (a
    /// dirty buffer is first copied back to the host).
    #[cfg_attr(feature = "clap", value(name = "release"))]
    ReleaseAfterLastUse,
    /// Stays resident, like any cached buffer, until evicted: the memory
    /// manager is never told the data is dead.
    #[cfg_attr(feature = "clap", value(name = "keep"))]
    KeepUntilEvicted,
}

/// The three policies of one simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policies {
    /// Victim choice.
    pub eviction: Eviction,
    /// Fetch-ahead rule.
    pub prefetch: Prefetch,
    /// Fate of dead buffers.
    pub retention: Retention,
}

impl Default for Policies {
    /// The policies every front end defaults to: Belady's victim (the
    /// schedule is known, so the furthest next use is too), fetching the
    /// next operation's buffers ahead (`lookahead:1`), and a finished
    /// client's data released.
    fn default() -> Policies {
        Policies {
            eviction: Eviction::Belady,
            prefetch: Prefetch::Lookahead(1),
            retention: Retention::ReleaseAfterLastUse,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_policies_read_back_as_written() {
        for prefetch in [Prefetch::None, Prefetch::Passive, Prefetch::Active, Prefetch::Lookahead(3)] {
            assert_eq!(prefetch.to_string().parse::<Prefetch>(), Ok(prefetch));
        }
        assert_eq!(Policies::default().prefetch.to_string(), "lookahead:1");
    }
}
