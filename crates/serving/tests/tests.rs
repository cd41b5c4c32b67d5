//! The serving model's integration tests: one binary, a module per area.

mod analytic;
mod arrivals;
mod azure;
mod measured;
mod plan;
mod simulate;
mod speed;
mod support;
