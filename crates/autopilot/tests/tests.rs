//! The autopilot's integration tests: one binary, a module per area.

mod controller;
mod day;
