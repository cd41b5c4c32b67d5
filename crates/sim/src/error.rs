//! The error type of `tessera-sim`.

/// What can go wrong when reading a trace, checking a schedule or
/// simulating. Every message is one line and names the client, operation
/// or field at fault.
// Variant fields are named after, and shown in, each variant's message.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The text is not JSON of the trace's shape (serde's message, one line).
    #[error("not a Tessera simulator trace: {0}")]
    Format(String),
    /// A trace without clients.
    #[error("the trace has no clients")]
    NoClients,
    /// A client without operations.
    #[error("client '{client}' has no operations")]
    EmptyClient { client: String },
    /// Two clients with the same name.
    #[error("client name '{client}' is used twice")]
    DuplicateClient { client: String },
    /// Two buffers with the same name in one operation.
    #[error("client '{client}' operation {operation}: buffer '{buffer}' is listed twice")]
    DuplicateBuffer { client: String, operation: usize, buffer: String },
    /// One buffer name used with different sizes by one client.
    #[error("client '{client}' operation {operation}: buffer '{buffer}' has {bytes} bytes here but {first_bytes} bytes earlier")]
    BufferSize { client: String, operation: usize, buffer: String, bytes: u64, first_bytes: u64 },
    /// An operation whose buffers and ephemeral bytes cannot fit on the GPU.
    #[error("client '{client}' operation {operation}: working set of {working_set_bytes} bytes exceeds GPU memory of {memory_bytes} bytes")]
    WorkingSet { client: String, operation: usize, working_set_bytes: u64, memory_bytes: u64 },
    /// A bandwidth that is zero, negative or not a number.
    #[error("gpu.{field} must be a positive number of bytes per second, got {value}")]
    Bandwidth { field: &'static str, value: f64 },
    /// A compute time that is negative or not a number.
    #[error("client '{client}' operation {operation}: compute_ms must be a non-negative number, got {value}")]
    ComputeTime { client: String, operation: usize, value: f64 },
    /// A schedule entry that names no client of the trace.
    #[error("schedule entry {position} names client {client}, but the trace has {clients} clients")]
    UnknownClient { position: usize, client: usize, clients: usize },
    /// A schedule that does not run a client's operations exactly once each.
    #[error("client '{client}' appears {found} times in the schedule but has {expected} operations")]
    ScheduleCount { client: String, expected: usize, found: usize },
    /// A bound that needs every client to have exactly one operation.
    #[error("client '{client}' has {operations} operations; a one-pass trace has exactly one per client")]
    NotOnePass { client: String, operations: usize },
    /// Exhaustive search asked for a trace with too many operations.
    #[error("exhaustive search accepts at most {max} operations, the trace has {operations}")]
    TooManyOperations { operations: usize, max: usize },
    /// A genetic-search parameter out of its range.
    #[error("genetic parameter {name} must be {rule}, got {value}")]
    GeneticParams { name: &'static str, rule: &'static str, value: String },
    /// A bad parameter of the trace generator ([`crate::generate::generate`]).
    #[error("generator parameter {parameter} must be {requirement}, got {value}")]
    Parameter { parameter: &'static str, requirement: &'static str, value: f64 },
}
