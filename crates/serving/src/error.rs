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
    /// A simulation stopped because a segment's queues held more requests
    /// than memory should: the segment cannot keep up with its traffic.
    #[error(
        "segment '{segment}' of service '{service}': the service's queues held more than {limit} requests at \
         {at_s:.1} s of the run (the segment's offered load: {offered_load:.2} of its throughput); the run stopped \
         rather than exhaust memory: shorten it or give the service more throughput"
    )]
    QueueLimit {
        /// The segment's label.
        segment: String,
        /// The service it serves.
        service: String,
        /// The rate routed to it over its throughput with full batches.
        offered_load: f64,
        /// When, in the run, the limit was passed (seconds).
        at_s: f64,
        /// The limit: requests waiting in all the service's queues.
        limit: usize,
    },
}

impl ServingError {
    /// An invalid `field` with `message`.
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> ServingError {
        ServingError::Invalid { field: field.into(), message: message.into() }
    }
}
