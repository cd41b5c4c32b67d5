//! The error type of `tessera-core`.

/// Everything that can be wrong with domain data handed to this crate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoreError {
    /// A GPU model name that is not in the built-in table.
    #[error("unknown GPU model '{given}' (known: {known})")]
    UnknownGpu {
        /// The name given.
        given: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A MIG profile name that the GPU model does not have.
    #[error("GPU model {gpu} has no MIG profile '{given}' (it has: {known})")]
    UnknownProfile {
        /// The GPU model.
        gpu: String,
        /// The name given.
        given: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A MIG instance size (in GPCs) that the GPU model does not offer.
    #[error("GPU model {gpu} has no {size}g MIG instance (sizes: {known})")]
    UnknownSize {
        /// The GPU model.
        gpu: String,
        /// The instance size, in compute slices.
        size: u8,
        /// The known names, comma-separated.
        known: String,
    },
    /// A number outside its allowed range, e.g. a negative rate.
    #[error("{field} must be {expected}, got {value}")]
    InvalidValue {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// The value given.
        value: String,
    },
    /// A MIG layout that the hardware would reject.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A traffic point that cannot be used: `index` is its position among
    /// the points given (so a reader of a file can name its line), `None`
    /// when the problem is the curve as a whole (a service without points).
    #[error("{field}: {message}")]
    Traffic {
        /// The point's position among those given, when one is at fault.
        index: Option<usize>,
        /// The field at fault: `time_s`, `service` or `rate_rps`.
        field: &'static str,
        /// What is wrong, with the value.
        message: String,
    },
}

impl CoreError {
    /// Shorthand for [`CoreError::InvalidValue`].
    pub fn invalid(field: &'static str, expected: &'static str, value: impl ToString) -> Self {
        CoreError::InvalidValue { field, expected, value: value.to_string() }
    }
}

/// Why a layout is not physically valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// An instance starts at a memory slice its profile does not allow.
    #[error("{profile} cannot start at memory slice {start} on {gpu} (valid starts: {valid:?})")]
    InvalidStart {
        /// The GPU model's name.
        gpu: &'static str,
        /// The MIG profile.
        profile: &'static str,
        /// The start memory slice.
        start: u8,
        /// The start slices the profile allows.
        valid: &'static [u8],
    },
    /// Two instances share a memory slice.
    #[error("{first} and {second} share memory slices on {gpu}")]
    Overlap {
        /// The GPU model's name.
        gpu: &'static str,
        /// One instance, `PROFILE@START`.
        first: String,
        /// The other instance.
        second: String,
    },
    /// More instances of a profile than the GPU allows.
    #[error("{count} instances of {profile} on {gpu}, at most {max} allowed")]
    TooMany {
        /// The GPU model's name.
        gpu: &'static str,
        /// The MIG profile.
        profile: &'static str,
        /// How many instances of it the layout has.
        count: usize,
        /// The most allowed.
        max: u8,
    },
    /// A profile that belongs to another GPU model.
    #[error("profile {profile} does not belong to {gpu}")]
    ForeignProfile {
        /// The GPU model's name.
        gpu: &'static str,
        /// The MIG profile.
        profile: &'static str,
    },
}
