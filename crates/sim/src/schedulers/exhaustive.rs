//! Exhaustive search over every distinct interleaving of the clients'
//! operations (the permutations of the multiset of client ids).

use crate::engine::simulate_compiled;
use crate::error::SimError;
use crate::policy::Policies;
use crate::trace::Trace;
use crate::workload::{Compiled, Workload};

/// Largest number of operations exhaustive search accepts.
pub const EXHAUSTIVE_MAX_OPERATIONS: usize = 10;

struct Search<'a> {
    trace: &'a Trace,
    compiled: Compiled,
    policies: Policies,
    remaining: Vec<usize>,
    current: Vec<usize>,
    evaluated: usize,
    /// (makespan, bytes moved, ids) of the best so far.
    best: Option<(u64, u64, Vec<usize>)>,
}

impl Search<'_> {
    fn visit(&mut self, progress: &mut dyn FnMut(usize, u64)) -> Result<(), SimError> {
        if self.remaining.iter().all(|&n| n == 0) {
            let work = Workload::new(&self.compiled, &self.current);
            let (makespan, bytes) = simulate_compiled(&self.trace.gpu, &work, self.policies, None, None)?;
            self.evaluated += 1;
            if self.best.as_ref().is_none_or(|&(m, b, _)| (makespan, bytes) < (m, b)) {
                self.best = Some((makespan, bytes, self.current.clone()));
                progress(self.evaluated, makespan);
            }
            return Ok(());
        }
        for client in 0..self.remaining.len() {
            if self.remaining[client] > 0 {
                self.remaining[client] -= 1;
                self.current.push(client);
                self.visit(progress)?;
                self.current.pop();
                self.remaining[client] += 1;
            }
        }
        Ok(())
    }
}

/// The interleaving with the smallest makespan (ties: fewer bytes moved,
/// then the lexicographically first).
pub(crate) fn search(
    trace: &Trace,
    policies: Policies,
    progress: &mut dyn FnMut(usize, u64),
) -> Result<Vec<usize>, SimError> {
    let remaining: Vec<usize> = trace.clients.iter().map(|c| c.operations.len()).collect();
    let operations: usize = remaining.iter().sum();
    if operations > EXHAUSTIVE_MAX_OPERATIONS {
        return Err(SimError::TooManyOperations { operations, max: EXHAUSTIVE_MAX_OPERATIONS });
    }
    let mut search = Search {
        trace,
        compiled: Compiled::new(trace),
        policies,
        remaining,
        current: Vec::with_capacity(operations),
        evaluated: 0,
        best: None,
    };
    search.visit(progress)?;
    Ok(search.best.map(|(_, _, ids)| ids).unwrap_or_default())
}
