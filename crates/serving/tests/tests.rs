//! The serving model's integration tests: one binary, a module per area.

mod analytic;
