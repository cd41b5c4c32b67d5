//! A schedule: the order in which the clients' operations run on the
//! single compute engine. It is a sequence of client ids; the k-th
//! occurrence of a client means its k-th operation.

use crate::error::SimError;
use crate::trace::Trace;

/// A validated schedule for one trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    steps: Vec<(usize, usize)>,
}

impl Schedule {
    /// Checks that every id names a client of `trace` and that each client
    /// appears exactly as many times as it has operations.
    pub fn new(trace: &Trace, client_ids: &[usize]) -> Result<Schedule, SimError> {
        let mut next_op = vec![0usize; trace.clients.len()];
        let mut steps = Vec::with_capacity(client_ids.len());
        for (position, &client) in client_ids.iter().enumerate() {
            let Some(count) = next_op.get_mut(client) else {
                return Err(SimError::UnknownClient { position, client, clients: trace.clients.len() });
            };
            steps.push((client, *count));
            *count += 1;
        }
        for (client, found) in trace.clients.iter().zip(next_op) {
            if found != client.operations.len() {
                return Err(SimError::ScheduleCount {
                    client: client.name.clone(),
                    expected: client.operations.len(),
                    found,
                });
            }
        }
        Ok(Schedule { steps })
    }

    /// The (client id, operation index) pairs, in running order.
    pub fn steps(&self) -> &[(usize, usize)] {
        &self.steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Client, Gpu, Operation};

    fn trace(ops: &[usize]) -> Trace {
        let op = Operation { compute_ms: 1.0, buffers: vec![], ephemeral_bytes: 0 };
        Trace {
            gpu: Gpu { memory_bytes: 1, h2d_bytes_per_s: 1.0, d2h_bytes_per_s: 1.0, copy_latency_ns: 0 },
            clients: ops
                .iter()
                .enumerate()
                .map(|(i, &n)| Client { name: format!("c{i}"), operations: vec![op.clone(); n] })
                .collect(),
        }
    }

    #[test]
    fn maps_occurrences_to_operations() {
        let s = Schedule::new(&trace(&[2, 1]), &[0, 1, 0]).unwrap();
        assert_eq!(s.steps(), &[(0, 0), (1, 0), (0, 1)]);
    }

    #[test]
    fn rejects_wrong_counts_and_unknown_clients() {
        let t = trace(&[2, 1]);
        assert_eq!(
            Schedule::new(&t, &[0, 1]).unwrap_err().to_string(),
            "client 'c0' appears 1 time in the schedule but has 2 operations"
        );
        assert!(Schedule::new(&t, &[0, 1, 0, 1]).unwrap_err().to_string().contains("'c1' appears 2 times"));
        assert!(Schedule::new(&t, &[0, 2, 0]).unwrap_err().to_string().contains("names client 2"));
    }
}
