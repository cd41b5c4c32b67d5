//! End-to-end tests of the `tessera` binary, and of the library crates
//! working together. One test binary with a module per area (as ripgrep
//! does), so the program is linked once.

mod autopilot;
mod autopilot_run;
mod campaign;
mod colocate;
mod deploy;
mod docs;
mod fuzz;
mod k8s;
mod matrix;
mod options;
mod plan;
mod profile;
mod profile_to_colocate;
mod profiles;
mod replan;
mod segments;
mod serve;
mod simulate;
mod usage;
mod util;
mod workload;
