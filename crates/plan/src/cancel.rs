//! Cooperative cancellation: whoever runs a plan (a server's job past its
//! limit, a server shutting down) may ask it to stop; the planner checks
//! between services in the steps its time limit does not bound (the
//! serving model's capacities, the option tables, the predictions of the
//! plan's report) and between its searches, and answers
//! [`crate::PlanError::Cancelled`]: a cancelled request never returns a
//! plan.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A request to stop planning, shared by the planner and whoever may stop
/// it (clones share the flag).
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A request not cancelled (yet).
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks the planning that holds this to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether it was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
