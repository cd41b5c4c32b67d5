//! The lower bounds against exhaustive search: never above the best
//! makespan of any schedule, under any policy.

use tessera_core::rng::SplitMix64;
use tessera_sim::{
    lower_bound_ns, memory_lower_bound_ns, plan_schedule, simulate, Buffer, Client, Eviction, Gpu, Operation, Policies,
    Prefetch, Retention, SchedulerKind, Trace,
};

const GB: u64 = 1_000_000_000;

/// A small trace where memory is tight: 2 to 4 clients, 6 or 7 operations
/// in all, clean or dirty buffers, memory just above the largest working
/// set. With `same_scratch` every client has the same large scratch, so
/// that no two clients' operations fit side by side (the switches the
/// memory bound counts); otherwise scratch varies per client.
fn tight_trace(rng: &mut SplitMix64, same_scratch: bool) -> Trace {
    let clients = 2 + rng.below(3);
    let total_ops = 6 + rng.below(2);
    let mut counts = vec![1usize; clients];
    for _ in clients..total_ops {
        counts[rng.below(clients)] += 1;
    }
    let clients: Vec<Client> = counts
        .iter()
        .enumerate()
        .map(|(c, &n)| {
            let dirty = rng.below(2) == 0;
            let buffers: Vec<Buffer> = (0..1 + rng.below(2))
                .map(|b| Buffer { name: format!("b{b}"), bytes: (1 + rng.below(6) as u64) * GB / 4, dirty })
                .collect();
            let ephemeral_bytes = if same_scratch { 2 * GB } else { rng.below(5) as u64 * GB / 2 };
            let operations = (0..n)
                .map(|_| Operation {
                    compute_ms: rng.uniform(50.0, 600.0).round(),
                    buffers: buffers.iter().filter(|_| same_scratch || rng.below(5) != 0).cloned().collect(),
                    ephemeral_bytes,
                })
                .collect();
            Client { name: format!("c{c}"), operations }
        })
        .collect();
    let largest = clients.iter().flat_map(|c| &c.operations).map(Operation::working_set_bytes).max().unwrap();
    let memory_bytes = largest + rng.below(3) as u64 * GB / 4;
    let latency = [0, 10_000][rng.below(2)];
    let gpu = Gpu {
        memory_bytes,
        h2d_bytes_per_s: 1e10,
        d2h_bytes_per_s: 1e10 * rng.uniform(0.5, 2.0),
        copy_latency_ns: latency,
    };
    Trace { gpu, clients }
}

fn all_policies() -> Vec<Policies> {
    let mut all = Vec::new();
    for eviction in [Eviction::Lru, Eviction::Belady] {
        for prefetch in
            [Prefetch::None, Prefetch::Passive, Prefetch::Active, Prefetch::Lookahead(1), Prefetch::Lookahead(3)]
        {
            for retention in [Retention::ReleaseAfterLastUse, Retention::KeepUntilEvicted] {
                all.push(Policies { eviction, prefetch, retention });
            }
        }
    }
    all
}

#[test]
fn the_memory_bound_is_never_above_the_optimum_and_often_above_the_old_bound() {
    let mut rng = SplitMix64::new(17);
    let policies = all_policies();
    let (mut raised, mut instances) = (0, 0);
    for round in 0..60 {
        let trace = tight_trace(&mut rng, round % 2 == 0);
        let old = lower_bound_ns(&trace).unwrap();
        // Every policy in turn on a few traces, one random policy on the rest.
        let tried: Vec<Policies> = if round < 4 { policies.clone() } else { vec![policies[rng.below(policies.len())]] };
        for p in tried {
            let memory = memory_lower_bound_ns(&trace, p).unwrap();
            assert!(memory >= old, "round {round}: {memory} < {old}");
            let schedule = plan_schedule(&trace, p, &SchedulerKind::Exhaustive, &mut |_, _| {}).unwrap();
            let best = simulate(&trace, &schedule, p).unwrap().makespan_ns;
            assert!(memory <= best, "round {round} {p:?}: bound {memory} above the optimum {best}\n{trace:?}");
            instances += 1;
            raised += usize::from(memory > old);
        }
    }
    assert!(instances >= 100);
    assert!(raised >= 12, "the memory bound rose above the old one in only {raised} of {instances} runs");
}
