//! The crate's one error type.

/// What can go wrong when describing or serving traffic.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ServingError {
    /// A value out of its range, named by its field.
    #[error("{field}: {message}")]
    Invalid {
        /// The field or option, e.g. `cv` or `batch_latencies`.
        field: String,
        /// What is wrong, with the value.
        message: String,
    },
}

impl ServingError {
    /// An invalid `field` with `message`.
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> ServingError {
        ServingError::Invalid { field: field.into(), message: message.into() }
    }
}
