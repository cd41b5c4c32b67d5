//! KACE's protocols on KACE's own data (skipped when `../shared/data/kace`
//! is absent): the least-squares reproduction, the rule baselines, the
//! nested slowdown model against them on every protocol and group size of
//! the pairs and on the groups of four measured together, its figures, its
//! intervals' coverage, and partner search.

use std::path::{Path, PathBuf};

use tessera_colocate::{evaluate, holdout_folds, p3_folds, Composition, Policy, PolicyScores, Protocol, Rule, Split};
use tessera_colocate::{recommend, Basis, GroupSource, Query, Search, TrainedModel, BEAM_WIDTH, INTERVAL_LEVEL};
use tessera_core::{Colocation, GroupMember, WorkloadMetrics};

fn data() -> Option<PathBuf> {
    tessera_testkit::shared_data("kace")
}

fn splits(dir: &Path) -> Vec<Split> {
    [10, 20, 30, 40, 50]
        .iter()
        .map(|seed| {
            let folder = dir.join(format!("splits/n_occur_3/rand{seed}"));
            let read = |name: &str| tessera_store::read_colocations(&folder.join(name)).unwrap().rows;
            Split { name: seed.to_string(), train: read("training_set.csv"), test: read("testing_set.csv") }
        })
        .collect()
}

fn pairs(dir: &Path) -> Vec<Colocation> {
    tessera_store::read_colocations(&dir.join("pairs_mps100.csv")).unwrap().rows
}

fn by_name<'a>(results: &'a [PolicyScores], name: &str) -> &'a PolicyScores {
    results.iter().find(|r| r.name == name).unwrap()
}

#[test]
fn p3_and_lowo_reproduce_kace_and_the_baselines() {
    let Some(dir) = data() else { return };
    let baselines: Vec<Policy> =
        [Policy::Kace, Policy::Random].into_iter().chain(Rule::ALL.map(Policy::Rule)).collect();
    let results = evaluate(Protocol::P3, &p3_folds(&splits(&dir)), &[2], Composition::Additive, &baselines);
    let kace = &by_name(&results, "kace").scores[0];
    for (got, want) in kace.per_fold.iter().zip([0.9212, 0.9389, 0.8770, 0.9638, 0.8899]) {
        assert!((got - want).abs() <= 0.0005, "kace {:?}", kace.per_fold);
    }
    for (name, want) in [
        ("random (expected)", 0.5431),
        ("lowest memory footprint", 0.7850),
        ("lowest memory utilisation", 0.7182),
        ("highest SM utilisation", 0.3543),
        ("highest summed SM throughput", 0.8710),
    ] {
        let got = by_name(&results, name).scores[0].mean;
        assert!((got - want).abs() <= 0.001, "{name}: {got} vs {want}");
    }
    let rows = pairs(&dir);
    let results =
        evaluate(Protocol::Lowo, &holdout_folds(&rows, Protocol::Lowo), &[2], Composition::Additive, &baselines);
    // Reference: least squares with training z-scoring .795, lowest memcap .793.
    assert!((by_name(&results, "kace").scores[0].mean - 0.795).abs() <= 0.001);
    assert!((by_name(&results, "lowest memory footprint").scores[0].mean - 0.793).abs() <= 0.001);
}

/// Checks the default model (first) against KACE and every rule at each
/// size, its figures (measured with `tessera bench colocate`), that no
/// fallback rule chose, and its intervals within three points of their
/// level (over several folds; the new-family protocol's one fold holds a
/// few dozen groups, where the intervals cover more than their level).
fn check(what: &str, results: &[PolicyScores], figures: &[f64]) {
    let slowdown = &results[0];
    assert_eq!(slowdown.name, "slowdown");
    assert_eq!(slowdown.scores.len(), figures.len(), "{what}");
    for ((k, scores), figure) in slowdown.scores.iter().enumerate().zip(figures) {
        let size = scores.group_size;
        let kace = by_name(results, "kace").scores[k].mean;
        let best_rule = Rule::ALL.iter().map(|r| by_name(results, r.name()).scores[k].mean).fold(0.0, f64::max);
        let got = scores.mean;
        assert!(got >= kace && got >= best_rule, "{what} K={size}: {got} vs kace {kace}, rule {best_rule}");
        assert!((got - figure).abs() <= 0.0005, "{what} K={size}: {got} instead of {figure}");
        assert_eq!(slowdown.fallbacks[k], 0, "{what} K={size}: the model chose for every target");
        let coverage = &slowdown.coverage[k];
        assert_eq!(coverage.level, INTERVAL_LEVEL);
        if what.contains("NewFamily") {
            assert!(coverage.measured >= INTERVAL_LEVEL - 0.03, "{what} K={size}: {coverage:?}");
        } else {
            assert!((coverage.measured - INTERVAL_LEVEL).abs() <= 0.03, "{what} K={size}: {coverage:?}");
        }
    }
}

/// The bar on the pairs: the slowdown model, every choice it makes
/// taken on the training rows of each fold alone, is at least as good as
/// KACE and as the best rule on every protocol (P3, LOWO, LOFO, the newest
/// family) and group size (measured pairs, groups of 3 and 4 built from
/// them, which it predicts from pairs).
#[test]
fn on_the_pairs_the_nested_slowdown_model_is_never_behind_kace_or_the_best_rule() {
    let Some(dir) = data() else { return };
    let (splits, rows) = (splits(&dir), pairs(&dir));
    for (protocol, figures) in [
        (Protocol::P3, [0.9513, 0.9592, 0.9433]),
        (Protocol::Lowo, [0.9444, 0.9494, 0.9172]),
        (Protocol::Lofo, [0.9240, 0.8491, 0.8384]),
        (Protocol::NewFamily, [0.9894, 1.0000, 0.9486]),
    ] {
        let folds = match protocol {
            Protocol::P3 => p3_folds(&splits),
            _ => holdout_folds(&rows, protocol),
        };
        let results = evaluate(protocol, &folds, &[2, 3, 4], Composition::Additive, &Policy::all(0));
        let scores = &results[0].scores;
        assert_eq!(scores[0].source, GroupSource::Measured);
        assert_eq!(scores[1].source, GroupSource::BuiltFromPairs { composition: Composition::Additive });
        assert_eq!(scores[1].basis, Some(Basis::ComposedFromPairs), "trained on pairs, groups from pairs");
        check(&format!("pairs {protocol:?}"), &results, &figures);
    }
}

/// The same bar on the 1,107 groups of four measured together, scored at
/// their own size: the model learns from the groups of four themselves.
#[test]
fn on_groups_of_four_measured_together_the_nested_model_is_never_behind() {
    let Some(dir) = data() else { return };
    let rows = tessera_store::read_colocations(&dir.join("four_way_1107.csv")).unwrap().rows;
    for (protocol, figure, targets) in
        [(Protocol::Lowo, 0.9828, 14), (Protocol::Lofo, 0.9791, 14), (Protocol::NewFamily, 1.0, 2)]
    {
        let folds = holdout_folds(&rows, protocol);
        let results = evaluate(protocol, &folds, &[4], Composition::Additive, &Policy::all(0));
        let scores = &results[0].scores[0];
        assert_eq!((scores.source, scores.basis), (GroupSource::Measured, Some(Basis::Measured)));
        assert_eq!(scores.targets, targets);
        check(&format!("quads {protocol:?}"), &results, &[figure]);
        // The baselines as published with the file.
        if protocol == Protocol::Lowo {
            assert!((by_name(&results, "kace").scores[0].mean - 0.913).abs() <= 0.0005);
            let rule = by_name(&results, Rule::HighestSmThroughput.name()).scores[0].mean;
            assert!((rule - 0.939).abs() <= 0.0005, "{rule}");
            assert!((by_name(&results, "random (expected)").scores[0].mean - 0.380).abs() <= 0.0005);
        }
    }
}

/// A family far from every workload KACE measured, added last to KACE's
/// pairs (so the new-family protocol holds it out): its throughput beside
/// a partner grows with the partner's summed SM throughput, so that rule
/// chooses its best partner. The model never saw anything like it; its
/// inner folds tested it only as far as KACE's families lie from one
/// another, so a rule chooses for every one of its workloads, and the
/// default model chooses exactly as well as the rule.
#[test]
fn on_a_family_beyond_anything_trained_on_the_rule_chooses() {
    let Some(dir) = data() else { return };
    let mut rows = pairs(&dir);
    let mut partners: Vec<WorkloadMetrics> =
        rows.iter().flat_map(|g| g.members.iter().map(|m| m.metrics.clone())).collect();
    partners.sort_by(|a, b| a.workload.cmp(&b.workload));
    partners.dedup_by(|a, b| a.workload == b.workload);
    for batch in [1, 4] {
        let giant = WorkloadMetrics {
            workload: format!("giant-lm_batch{batch}-inf"),
            kernel: [5e9, 99.0, 95.0, 97.0, 9e11, 1e9],
            exclusive_rps: 1e5 * f64::from(batch),
            sm_util_pct: 100.0,
            mem_util_pct: 99.0,
            memory_gb: 75.0,
        };
        for partner in &partners {
            let retained = partner.kernel[1] / 100.0;
            rows.push(Colocation {
                members: vec![
                    GroupMember { colocated_rps: giant.exclusive_rps * retained, metrics: giant.clone() },
                    GroupMember { colocated_rps: 1e-3 * partner.exclusive_rps, metrics: partner.clone() },
                ],
            });
        }
    }
    let folds = holdout_folds(&rows, Protocol::NewFamily);
    assert_eq!((folds.len(), folds[0].name.as_str()), (1, "giant-lm"));
    // Trained on KACE's pairs alone (the fold's training rows), the model
    // was tested up to some novelty; the giant family lies beyond it.
    let trained = TrainedModel::slowdown(&folds[0].train, 0).unwrap();
    let tested = trained.fallback_decision(2).unwrap().tested_novelty;
    let giant = rows.last().unwrap().members[0].metrics.clone();
    assert!(trained.novelty(&giant) > tested, "{tested}");
    let policies = [Policy::Slowdown { seed: 0, fallback: true }, Policy::Rule(Rule::HighestSmThroughput)];
    let results = evaluate(Protocol::NewFamily, &folds, &[2], Composition::Additive, &policies);
    let (ours, rule) = (&results[0], &results[1]);
    assert_eq!(ours.scores[0].targets, 2);
    assert_eq!((ours.fallbacks[0], ours.untested[0]), (2, 2), "{ours:?}");
    assert!(ours.median_novelty[0] > 3.0, "{ours:?}");
    assert!((ours.scores[0].mean - rule.scores[0].mean).abs() < 1e-12, "{ours:?} {rule:?}");
    assert!(rule.scores[0].mean > 0.99, "the rule is this family's best choice: {rule:?}");
}

#[test]
fn beam_search_finds_the_exhaustive_best_group_on_kaces_workloads() {
    let Some(dir) = data() else { return };
    let rows = pairs(&dir);
    let mut pool: Vec<WorkloadMetrics> =
        rows.iter().flat_map(|g| g.members.iter().map(|m| m.metrics.clone())).collect();
    pool.sort_by(|a, b| a.workload.cmp(&b.workload));
    pool.dedup_by(|a, b| a.workload == b.workload);
    let models = [TrainedModel::slowdown(&rows, 0).unwrap(), TrainedModel::kace(&rows).unwrap()];
    let mut compared = 0;
    for model in &models {
        for target in pool.iter().step_by(3) {
            for group_size in 2..=7 {
                let ask = |search| Query {
                    target: &target.workload,
                    candidates: None,
                    group_size,
                    gpu_memory_gb: 32.0,
                    top: 1,
                    search: Some(search),
                };
                let exact = recommend(model.as_model(), &pool, &ask(Search::Exhaustive)).unwrap();
                let beam = recommend(model.as_model(), &pool, &ask(Search::Beam { width: BEAM_WIDTH })).unwrap();
                assert_eq!(
                    beam.groups[0].members,
                    exact.groups[0].members,
                    "{} {} size {group_size}",
                    model.as_model().name(),
                    target.workload
                );
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 2 * pool.len().div_ceil(3) * 6);
}
