//! The simulator and its schedulers on the design notes' toys and on small
//! random traces. One test binary with a module per area.

mod bounds;
mod common;
mod runs;
mod schedulers;
mod toys;
