//! The crate's one error type.

use tessera_core::CoreError;
use tessera_plan::PlanError;
use tessera_serving::ServingError;

/// What can go wrong in describing traffic, configuring the controller or
/// simulating a day.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AutopilotError {
    /// Traffic that cannot be used (a point, or a curve for other
    /// services than those planned).
    #[error(transparent)]
    Traffic(#[from] CoreError),
    /// An option out of its range, named by its field.
    #[error("{field}: {message}")]
    Invalid {
        /// The option, e.g. `interval_s`.
        field: &'static str,
        /// What is wrong, with the value.
        message: String,
    },
    /// Planning failed (a simulated day needs its plans; the controller
    /// holds instead and says why).
    #[error("planning {what}: {cause}")]
    Plan {
        /// What was planned, e.g. `for the day's peak`.
        what: String,
        /// The planner's error (its text is in the message, not a source;
        /// boxed to keep the error small).
        cause: Box<PlanError>,
    },
    /// The serving model refused a system or a simulation.
    #[error("serving model: {0}")]
    Serving(ServingError),
}

impl From<ServingError> for AutopilotError {
    fn from(cause: ServingError) -> AutopilotError {
        AutopilotError::Serving(cause)
    }
}

impl AutopilotError {
    /// An invalid option `field` with `message`.
    pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> AutopilotError {
        AutopilotError::Invalid { field, message: message.into() }
    }
}
