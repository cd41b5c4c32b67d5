//! Planning jobs: a request is checked and its inputs (services and
//! profiles) snapshotted and stored at once, then planned by one of a fixed
//! number of workers on a blocking thread, and its plan stored with those
//! inputs so it can be verified again later.
//!
//! A job that runs past its time limit plus a grace period is failed with
//! that reason (the planner's thread finishes on its own and its plan is
//! dropped); the planner's own time limit stops it earlier in every phase,
//! and a plan it cut short says so in its notes. At shutdown, queued jobs
//! fail with "the server stopped" and running ones are waited for.

mod queue;
mod request;
mod run;

pub(crate) use queue::JobQueue;
pub(crate) use request::{JobInputs, PlanJobRequest};
pub(crate) use run::run_job;
