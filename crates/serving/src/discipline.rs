//! How requests reach a segment's processes and wait.

use std::fmt;
use std::str::FromStr;

/// Within a segment: which process takes a request, and where it waits.
/// Between segments every discipline routes a service's request to one of
/// its segments at random, in proportion to the plan's routing weights (a
/// Gateway API `HTTPRoute`'s weighted `backendRefs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Discipline {
    /// What Tessera's deployment sets up: each MPS process is a pod with its
    /// own FIFO queue, and a Kubernetes Service in front of the pods of the
    /// segment's configuration (all of the service's segments of the same
    /// GPU model, MIG profile, batch and processes: equal servers) picks a
    /// pod at random, so each of the segment's processes is as likely.
    #[default]
    #[cfg_attr(feature = "clap", value(name = "random"))]
    RandomPerProcess,
    /// Per-process FIFO queues, processes taken in turn.
    RoundRobin,
    /// Per-process FIFO queues; a request joins the process with the fewest
    /// requests waiting or running (ties to the lowest index).
    #[cfg_attr(feature = "clap", value(name = "jsq"))]
    JoinShortestQueue,
    /// One FIFO queue per segment; any free process takes from it.
    #[cfg_attr(feature = "clap", value(name = "shared"))]
    SharedQueue,
}

impl Discipline {
    /// Every discipline.
    pub const ALL: [Discipline; 4] =
        [Discipline::RandomPerProcess, Discipline::RoundRobin, Discipline::JoinShortestQueue, Discipline::SharedQueue];

    /// The name on the command line and in plans.
    pub fn name(self) -> &'static str {
        match self {
            Discipline::RandomPerProcess => "random",
            Discipline::RoundRobin => "round-robin",
            Discipline::JoinShortestQueue => "jsq",
            Discipline::SharedQueue => "shared",
        }
    }
}

impl fmt::Display for Discipline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Discipline {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Discipline::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| {
            let known: Vec<&str> = Discipline::ALL.iter().map(|d| d.name()).collect();
            format!("unknown discipline '{s}' (known: {})", known.join(", "))
        })
    }
}
