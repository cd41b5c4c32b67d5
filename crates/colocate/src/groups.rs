//! Groups of three or more workloads built from measured pairs.
//!
//! KACE measured pairs only. To test models on larger groups, a group is
//! built wherever the data allows: every two of its members (a workload
//! twice needs its self-pair) were measured together. Each member's
//! throughput in the group then follows the **additive slowdown** rule: a
//! member that keeps fraction `f_j` of its throughput beside partner `j`
//! alone is slowed by `1/f_j − 1` extra time per sample, and in the group
//! those delays add up, `1/f = 1 + Σ_j (1/f_j − 1)`. Two workloads taking
//! turns (`f = 1/2` in a pair) so keep `1/K` in a group of `K`, and a
//! partner that does not interfere adds nothing. The rule is an assumption,
//! not a measurement (a slowdown model trained on pairs only composes its
//! pair predictions by the same rule, which favours it on such groups):
//! built groups test how models rank larger groups, not how well they
//! predict a real one; groups measured together do that. The
//! [`Composition::Multiplicative`] rule, slowdowns multiplied, is there to
//! see how much a verdict depends on the assumption.

use std::collections::HashMap;

use tessera_core::{Colocation, GroupMember, WorkloadMetrics};

/// How a member's slowdowns beside each partner alone make its slowdown
/// in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Composition {
    /// The delays add ([`compose_slowdowns`]): the models' assumption.
    Additive,
    /// The slowdowns multiply: a harsher world, where each partner slows
    /// down what the others left (to check how much the built groups'
    /// verdicts depend on the assumption).
    Multiplicative,
}

/// A member's slowdown in a group (time per sample over time alone) from
/// its slowdown beside each partner alone: `1 + Σ (s_j − 1)`, the delays
/// added, but never below the smallest pair slowdown (a partner that
/// seemed to speed the member up in a pair does not make the group faster
/// than the member's best pair).
pub fn compose_slowdowns(pair_slowdowns: impl Iterator<Item = f64>) -> f64 {
    let (delay, least) = pair_slowdowns.fold((0.0, f64::INFINITY), |(d, l), s| (d + s - 1.0, l.min(s)));
    (1.0 + delay).max(least)
}

/// Each workload's retained fraction beside each partner, from the pairs.
struct PairFractions {
    workloads: Vec<WorkloadMetrics>,
    /// `fraction[(a, b)]`: what `a` keeps beside `b` (mean over repeated
    /// measurements; for a self-pair, over both members).
    fraction: HashMap<(usize, usize), f64>,
}

impl PairFractions {
    fn new(rows: &[Colocation]) -> Self {
        let mut workloads: Vec<WorkloadMetrics> = rows
            .iter()
            .filter(|g| g.members.len() == 2)
            .flat_map(|g| g.members.iter().map(|m| m.metrics.clone()))
            .collect();
        workloads.sort_by(|a, b| a.workload.cmp(&b.workload));
        workloads.dedup_by(|a, b| a.workload == b.workload);
        let index = |name: &str| workloads.binary_search_by(|w| w.workload.as_str().cmp(name)).expect("listed above");
        let mut sums: HashMap<(usize, usize), (f64, f64)> = HashMap::new();
        for group in rows.iter().filter(|g| g.members.len() == 2) {
            let [a, b] = [&group.members[0], &group.members[1]];
            let (i, j) = (index(&a.metrics.workload), index(&b.metrics.workload));
            for (own, member, partner) in [(i, a, j), (j, b, i)] {
                let entry = sums.entry((own, partner)).or_insert((0.0, 0.0));
                entry.0 += member.retained_fraction();
                entry.1 += 1.0;
            }
        }
        let fraction = sums.into_iter().map(|(key, (sum, count))| (key, sum / count)).collect();
        PairFractions { workloads, fraction }
    }

    /// The group of workloads `members` (indices), if every two of them were
    /// measured together.
    fn group(&self, members: &[usize], composition: Composition) -> Option<Colocation> {
        let mut built = Vec::with_capacity(members.len());
        for (i, &own) in members.iter().enumerate() {
            let mut pair_slowdowns = Vec::with_capacity(members.len() - 1);
            for (j, &partner) in members.iter().enumerate() {
                if i != j {
                    pair_slowdowns.push(1.0 / self.fraction.get(&(own, partner))?);
                }
            }
            let metrics = self.workloads[own].clone();
            let slowdown = match composition {
                Composition::Additive => compose_slowdowns(pair_slowdowns.into_iter()),
                Composition::Multiplicative => pair_slowdowns.iter().product(),
            };
            built.push(GroupMember { colocated_rps: metrics.exclusive_rps / slowdown, metrics });
        }
        Some(Colocation { members: built })
    }
}

/// Every group of `group_size` workloads (each at most twice, the order of
/// first appearance sorted by name) whose every two members were measured
/// together among the pairs of `rows` (rows of other sizes are ignored),
/// with the throughputs `composition` gives (see the module
/// documentation). A `group_size` of 2 gives one row per measured pair.
pub fn build_groups(rows: &[Colocation], group_size: usize, composition: Composition) -> Vec<Colocation> {
    if group_size < 2 {
        return Vec::new();
    }
    let fractions = PairFractions::new(rows);
    let sets = MemberSets::new(fractions.workloads.len(), group_size);
    sets.filter_map(|members| fractions.group(&members, composition)).collect()
}

/// Every multiset of `size` indices below `n` in which no index appears
/// more than twice (a workload and itself once more), as non-decreasing
/// index lists in lexicographic order.
pub(crate) struct MemberSets {
    n: usize,
    next: Option<Vec<usize>>,
}

impl MemberSets {
    /// The sets of `size` of `n` indices (none when either is 0).
    pub(crate) fn new(n: usize, size: usize) -> Self {
        let first = (n > 0 && size > 0).then(|| vec![0; size]);
        let mut sets = MemberSets { n, next: first };
        sets.skip_thrice();
        sets
    }

    /// The next non-decreasing list after `members`, if any.
    fn advance(&self, members: &mut [usize]) -> bool {
        let Some(i) = (0..members.len()).rev().find(|&i| members[i] + 1 < self.n) else { return false };
        members[i] += 1;
        let value = members[i];
        members[i + 1..].fill(value);
        true
    }

    /// Moves `next` past lists holding an index three times.
    fn skip_thrice(&mut self) {
        while let Some(mut members) = self.next.take() {
            if members.windows(3).all(|w| !(w[0] == w[1] && w[1] == w[2])) {
                self.next = Some(members);
                return;
            }
            if self.advance(&mut members) {
                self.next = Some(members);
            }
        }
    }
}

impl Iterator for MemberSets {
    type Item = Vec<usize>;

    fn next(&mut self) -> Option<Vec<usize>> {
        let current = self.next.take()?;
        let mut following = current.clone();
        if self.advance(&mut following) {
            self.next = Some(following);
            self.skip_thrice();
        }
        Some(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::tests::{pair, workload};

    #[test]
    fn taking_turns_in_pairs_means_one_kth_in_a_group() {
        let names = ["a", "b", "c"];
        let metrics: Vec<WorkloadMetrics> = names.iter().map(|n| workload(n, 100.0, 50.0, 10.0, 1.0)).collect();
        // Every pair (self-pairs included) takes turns: each keeps half.
        let mut rows = Vec::new();
        for i in 0..3 {
            for j in i..3 {
                rows.push(pair(metrics[i].clone(), 50.0, metrics[j].clone(), 50.0));
            }
        }
        let triples = build_groups(&rows, 3, Composition::Additive);
        // Multisets of 3 from 3 names with no name three times: 10 − 3.
        assert_eq!(triples.len(), 7);
        for group in &triples {
            assert!(group.members.iter().all(|m| (m.retained_fraction() - 1.0 / 3.0).abs() < 1e-12));
        }
        let quads = build_groups(&rows, 4, Composition::Additive);
        assert!(quads.iter().all(|g| g.members.iter().all(|m| (m.retained_fraction() - 0.25).abs() < 1e-12)));
        // Multiplied, three partners each halving leave an eighth.
        let quads = build_groups(&rows, 4, Composition::Multiplicative);
        assert!(quads.iter().all(|g| g.members.iter().all(|m| (m.retained_fraction() - 0.125).abs() < 1e-12)));
        assert_eq!(build_groups(&rows, 2, Composition::Additive).len(), rows.len());
        let sets: Vec<Vec<usize>> = MemberSets::new(3, 3).collect();
        assert_eq!(sets.len(), 7);
        assert_eq!((sets[0].clone(), sets[6].clone()), (vec![0, 0, 1], vec![1, 2, 2]));
        assert_eq!(MemberSets::new(0, 2).count() + MemberSets::new(2, 0).count(), 0);
    }

    #[test]
    fn a_group_needs_every_pair_measured_and_delays_add() {
        let a = workload("a", 100.0, 50.0, 10.0, 1.0);
        let b = workload("b", 60.0, 50.0, 10.0, 1.0);
        let c = workload("c", 30.0, 50.0, 10.0, 1.0);
        // a keeps 0.8 beside b and 0.5 beside c; b and c do not interfere.
        let rows = vec![
            pair(a.clone(), 80.0, b.clone(), 48.0),
            pair(a.clone(), 50.0, c.clone(), 15.0),
            pair(b, 60.0, c, 30.0),
        ];
        let triples = build_groups(&rows, 3, Composition::Additive);
        assert_eq!(triples.len(), 1, "no self-pairs were measured");
        let abc = &triples[0];
        // 1/f = 1 + (1/0.8 − 1) + (1/0.5 − 1) = 2.25.
        assert!((abc.members[0].retained_fraction() - 1.0 / 2.25).abs() < 1e-12);
        // b: 1 + (1/0.8 − 1) + 0; c: 1 + (1/0.5 − 1) + 0.
        assert!((abc.members[1].retained_fraction() - 0.8).abs() < 1e-12);
        assert!((abc.members[2].retained_fraction() - 0.5).abs() < 1e-12);
        assert!(build_groups(&rows[..2], 3, Composition::Additive).is_empty(), "b and c were not measured together");
    }
}
