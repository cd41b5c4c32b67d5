//! The error type of `tessera-sim`.

use tessera_core::text::count;

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
    #[error("client '{client}' operation {operation}: buffer '{buffer}' has {} here but {} earlier", count(*bytes, "byte"), count(*first_bytes, "byte"))]
    BufferSize { client: String, operation: usize, buffer: String, bytes: u64, first_bytes: u64 },
    /// An operation whose buffers and ephemeral bytes cannot fit on the GPU.
    #[error("client '{client}' operation {operation}: working set of {} exceeds GPU memory of {}", count(*working_set_bytes, "byte"), count(*memory_bytes, "byte"))]
    WorkingSet { client: String, operation: usize, working_set_bytes: u128, memory_bytes: u64 },
    /// A bandwidth that is zero, negative or not a number.
    #[error("gpu.{field} must be a positive number of bytes per second, got {value}")]
    Bandwidth { field: &'static str, value: f64 },
    /// A compute time that is negative, not a number, or too long for the
    /// simulator's clock (`u64` nanoseconds).
    #[error("client '{client}' operation {operation}: compute_ms must be a non-negative number below 2^64 ns (about 1.84e13 ms, 584 years), got {value}")]
    ComputeTime { client: String, operation: usize, value: f64 },
    /// A buffer whose copy time does not fit the simulator's clock.
    #[error("client '{client}' operation {operation}: buffer '{buffer}' of {} takes 2^64 ns (about 584 years) or more to copy at gpu.{field} = {bytes_per_s} plus gpu.copy_latency_ns = {latency_ns}", count(*bytes, "byte"))]
    CopyTime {
        client: String,
        operation: usize,
        buffer: String,
        bytes: u64,
        field: &'static str,
        bytes_per_s: f64,
        latency_ns: u64,
    },
    /// A trace whose total time does not fit the simulator's clock.
    #[error("client '{client}' operation {operation}: the trace's total time so far (every compute plus one copy each way of each buffer) reaches 2^64 ns (about 584 years)")]
    TraceTime { client: String, operation: usize },
    /// A simulation whose clock or byte counts would pass 2^64 (data copied
    /// again and again beyond the trace's own total).
    #[error("the simulation's {quantity} passes 2^64; the trace is too long to simulate")]
    Overflow { quantity: &'static str },
    /// A schedule entry that names no client of the trace.
    #[error("schedule entry {position} names client {client}, but the trace has {}", count(*clients, "client"))]
    UnknownClient { position: usize, client: usize, clients: usize },
    /// A schedule that does not run a client's operations exactly once each.
    #[error("client '{client}' appears {} in the schedule but has {}", count(*found, "time"), count(*expected, "operation"))]
    ScheduleCount { client: String, expected: usize, found: usize },
    /// A bound that needs every client to have exactly one operation.
    #[error("client '{client}' has {}; a one-pass trace has exactly one per client", count(*operations, "operation"))]
    NotOnePass { client: String, operations: usize },
    /// Exhaustive search asked for a trace with too many operations.
    #[error("exhaustive search accepts at most {}, the trace has {operations}", count(*max, "operation"))]
    TooManyOperations { operations: usize, max: usize },
    /// A genetic-search parameter out of its range.
    #[error("genetic parameter {name} must be {rule}, got {value}")]
    GeneticParams { name: &'static str, rule: &'static str, value: String },
    /// A schedule run measured on a GPU that cannot be compared.
    #[error("measured run: {0}")]
    MeasuredRun(String),
    /// A bad parameter of the trace generator ([`crate::generate::generate`]).
    #[error("generator parameter {parameter} must be {requirement}, got {value}")]
    Parameter { parameter: &'static str, requirement: &'static str, value: f64 },
}
