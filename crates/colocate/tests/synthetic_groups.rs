//! Groups of three measured together are not among the shared files, so
//! they are measured here on a synthetic GPU, whose interference model is
//! written down below and is none of the models': KACE's 21 workloads (their
//! metrics as measured in `pairs_mps100.csv`) share its SMs and its memory
//! bandwidth. For a group `G`, with `u` a workload's SM utilisation / 100
//! and `m` its DRAM throughput / 100:
//!
//! * SM demand `S = Σ_G u`; above 1 the SMs are time-sliced, and a member
//!   waits the more the more of them it wants: a factor
//!   `max(1, S)^(0.5 + 0.5 u_i)`;
//! * memory bandwidth: a member's memory traffic collides with its
//!   partners', `1 + 0.8 m_i Σ_{j≠i} m_j`;
//! * measurement noise: a factor `exp(0.05 z)`, `z` standard normal
//!   (Box–Muller on a seeded SplitMix64).
//!
//! A member's slowdown is the product; it keeps `1 / slowdown` of its
//! throughput alone. The groups are 400 drawn at random (seeded) among the
//! multisets of three of the 21 workloads, each at most twice, that fit
//! the V100's 32 GB, as KACE's groups of three did.
//!
//! This GPU is smooth in the group's summed demand, which KACE's least
//! squares on summed features fits almost exactly: over seeds 1 to 5 and
//! both protocols the slowdown model chose better than KACE in 8 of 10
//! cases and worse by at most 0.005 in the other two (seed 3 here is one of
//! them, under LOFO). The test holds the model to every rule, to KACE
//! within that margin, and its intervals to at least 87 % coverage and at
//! most 96 %; they cover 91.9 % to 95.4 % over the seeds (93.5 % and
//! 92.9 % here): with so little noise the inner folds' models, trained on
//! fewer rows, err more than the model itself, and the intervals
//! calibrated on them are conservative.

use tessera_colocate::INTERVAL_LEVEL;
use tessera_colocate::{evaluate, holdout_folds, measured_sizes, Composition, Policy, PolicyScores, Protocol, Rule};
use tessera_core::rng::SplitMix64;
use tessera_core::{Colocation, GroupMember, WorkloadMetrics};

/// Groups drawn.
const GROUPS: usize = 400;

/// The V100's memory, GB.
const GPU_MEMORY_GB: f64 = 32.0;

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut SplitMix64) -> f64 {
    let (a, b) = (rng.uniform(f64::MIN_POSITIVE, 1.0), rng.uniform(0.0, 1.0));
    (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
}

/// The group of `members` as the synthetic GPU measures it.
pub fn measure(members: &[&WorkloadMetrics], rng: &mut SplitMix64) -> Colocation {
    let u = |w: &WorkloadMetrics| w.sm_util_pct / 100.0;
    let m = |w: &WorkloadMetrics| w.kernel[2] / 100.0;
    let demand: f64 = members.iter().map(|w| u(w)).sum();
    let traffic: f64 = members.iter().map(|w| m(w)).sum();
    Colocation {
        members: members
            .iter()
            .map(|w| {
                let slicing = demand.max(1.0).powf(0.5 + 0.5 * u(w));
                let bandwidth = 1.0 + 0.8 * m(w) * (traffic - m(w));
                let noise = (0.05 * normal(rng)).exp();
                GroupMember { metrics: (*w).clone(), colocated_rps: w.exclusive_rps / (slicing * bandwidth * noise) }
            })
            .collect(),
    }
}

/// `GROUPS` groups of three of `workloads`, measured (seeded).
pub fn triples(workloads: &[WorkloadMetrics], seed: u64) -> Vec<Colocation> {
    let n = workloads.len();
    let mut sets = Vec::new();
    for a in 0..n {
        for b in a..n {
            for c in b..n {
                let thrice = a == b && b == c;
                let memory: f64 = [a, b, c].iter().map(|&i| workloads[i].memory_gb).sum();
                if !thrice && memory <= GPU_MEMORY_GB {
                    sets.push([a, b, c]);
                }
            }
        }
    }
    let mut rng = SplitMix64::new(seed);
    for i in (1..sets.len()).rev() {
        sets.swap(i, rng.below(i + 1));
    }
    sets.truncate(GROUPS);
    sets.iter().map(|set| measure(&set.map(|i| &workloads[i]), &mut rng)).collect()
}

/// KACE's 21 workloads, as measured in its pairs.
fn kace_workloads() -> Option<Vec<WorkloadMetrics>> {
    let dir = tessera_testkit::shared_data("kace")?;
    let rows = tessera_store::read_colocations(&dir.join("pairs_mps100.csv")).unwrap().rows;
    let mut pool: Vec<WorkloadMetrics> =
        rows.iter().flat_map(|g| g.members.iter().map(|m| m.metrics.clone())).collect();
    pool.sort_by(|a, b| a.workload.cmp(&b.workload));
    pool.dedup_by(|a, b| a.workload == b.workload);
    Some(pool)
}

fn by_name<'a>(results: &'a [PolicyScores], name: &str) -> &'a PolicyScores {
    results.iter().find(|r| r.name == name).unwrap()
}

#[test]
fn on_synthetic_groups_of_three_the_model_beats_every_rule_and_matches_kace() {
    let Some(workloads) = kace_workloads() else { return };
    let rows = triples(&workloads, 3);
    assert_eq!(rows.len(), GROUPS);
    // The figures measured on this seed (the slowdown model's mean).
    for (protocol, figure) in [(Protocol::Lowo, 0.9931), (Protocol::Lofo, 0.9890)] {
        let folds = holdout_folds(&rows, protocol);
        assert_eq!(measured_sizes(&folds), [3]);
        let results = evaluate(protocol, &folds, &[3], Composition::Additive, &Policy::all(0));
        let ours = &results[0];
        let scores = &ours.scores[0];
        let kace = by_name(&results, "kace").scores[0].mean;
        let best_rule = Rule::ALL.iter().map(|r| by_name(&results, r.name()).scores[0].mean).fold(0.0, f64::max);
        assert!((scores.mean - figure).abs() <= 0.0005, "{protocol:?}: {} instead of {figure}", scores.mean);
        assert!(scores.mean >= best_rule + 0.1, "{protocol:?}: {} vs the best rule {best_rule}", scores.mean);
        assert!(scores.mean >= kace - 0.005, "{protocol:?}: {} vs kace {kace}", scores.mean);
        assert_eq!(ours.fallbacks, [0], "{protocol:?}: the model chose for every target");
        let coverage = ours.coverage[0];
        assert!((INTERVAL_LEVEL - 0.03..=0.96).contains(&coverage.measured), "{protocol:?}: {coverage:?}");
    }
}
