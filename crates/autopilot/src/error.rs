//! The crate's one error type.

use tessera_plan::PlanError;
use tessera_serving::ServingError;

/// What can go wrong in describing traffic, configuring the controller or
/// simulating a day.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AutopilotError {
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
