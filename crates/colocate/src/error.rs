//! The error type of `tessera-colocate`.

use tessera_core::text::count;

/// What can go wrong when using colocation models.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ColocateError {
    /// A model file written by another version of the format.
    #[error("model file version {found} is not supported (this build reads version {supported})")]
    ModelVersion {
        /// The file's version.
        found: u64,
        /// The version this build reads.
        supported: u32,
    },
    /// A model file that is not valid JSON of the expected shape.
    #[error("not a Tessera colocation model file: {0}")]
    ModelFormat(String),
    /// Too little data to train.
    #[error("training needs at least {needed} measured colocations, got {found}")]
    NotEnoughData {
        /// The fewest colocations training needs.
        needed: usize,
        /// How many there were.
        found: usize,
    },
    /// Colocations with no pair among them (the slowdown model learns from
    /// pairs).
    #[error("the slowdown model learns from measured pairs, and there are none (only larger groups)")]
    NoPairs,
    /// Ranking by the interval's lower end with a model whose intervals
    /// could not be calibrated.
    #[error("ranking by the lower end needs intervals, and this model has none (calibrated on {samples} held-out colocations: too few); rank by the mean or train on more colocations")]
    NoIntervals {
        /// Held-out colocations the calibration had.
        samples: usize,
    },
    /// A workload name that is not among the known workloads.
    #[error("unknown workload '{given}' (known: {known})")]
    UnknownWorkload {
        /// The name asked for.
        given: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A group size below two.
    #[error("a colocation group has at least 2 workloads, asked for {0}")]
    GroupSize(usize),
    /// More partners asked for than there are candidates.
    #[error("group size {group_size} needs {} besides the target, but there are only {} (the target may be its own partner once)", count(group_size - 1, "partner"), count(*candidates, "candidate workload"))]
    GroupTooLarge {
        /// Workloads per group, the target included.
        group_size: usize,
        /// Distinct candidate partners.
        candidates: usize,
    },
    /// A suggestion asked for no measurements.
    #[error("the number of measurements to suggest must be at least 1")]
    Budget,
    /// Too many candidate groups to consider.
    #[error("more than {limit} unmeasured candidate groups: suggest works on fewer (a smaller group size or fewer workloads)")]
    TooManyGroups {
        /// The most groups considered.
        limit: u128,
    },
    /// A recommendation asked for no groups.
    #[error("the number of groups to show must be at least 1")]
    Top,
}
