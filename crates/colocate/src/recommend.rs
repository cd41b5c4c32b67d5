//! Ranking partners for a target workload.
//!
//! A candidate group is the target and `group_size − 1` distinct partners
//! drawn from the candidates (the target may be one of them, i.e. run
//! twice). There are C(candidates, group_size − 1) such groups; up to
//! [`EXHAUSTIVE_MAX_GROUPS`] of them are all scored, one at a time, keeping
//! only the best (memory does not grow with their number). Beyond that a
//! **beam search** ranks them: partners are added one at a time and after
//! each addition only the [`BEAM_WIDTH`] partial groups with the highest
//! predicted total are kept. Its cost grows with group size × beam width ×
//! candidates, but it is **not exhaustive**: the best group it finds is not
//! guaranteed to be the model's best (no model here gives an upper bound on
//! what a partial group can still reach, which a pruned exact search needs).
//!
//! A trained model ranks by its predicted total ([`Risk::Mean`]) or by the
//! lower end of its interval ([`Risk::Lower`]: a platform would rather lose
//! a little expected throughput than risk an SLO), shows each group's
//! interval (calibrated for groups of that size), and flags a group whose
//! interval reaches below what taking turns on the GPU gives. When the
//! model's training found a rule choosing better than the model at this
//! group size, the rule ranks instead, and the ranking says so; it also
//! says how the model predicts groups of this size ([`Basis`]: measured,
//! from pairs, or beyond the sizes trained on) and names a target outside
//! the training range.

use std::collections::HashSet;

use tessera_core::{Colocation, GroupMember, WorkloadMetrics};

use crate::error::ColocateError;
use crate::fallback::FallbackReason;
use crate::model_file::TrainedModel;
use crate::models::{Basis, Driver, ThroughputModel};
use crate::novelty::TrainingWorkloads;
use crate::range::OutOfRange;
use crate::rules::Rule;
use crate::selection::Calibration;

/// Candidate groups up to which every group is scored (quoted in the CLI's
/// `--help` and the colocation guide, docs/colocation.md).
pub const EXHAUSTIVE_MAX_GROUPS: u128 = 100_000;

/// Partial groups the beam search keeps after each added partner, or the
/// number of groups asked for if more (quoted in the CLI's `--help` and the
/// colocation guide, docs/colocation.md).
pub const BEAM_WIDTH: usize = 256;

/// One member's predicted throughput in a recommended group.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MemberPrediction {
    /// The workload.
    pub workload: String,
    /// Its throughput alone, samples/s.
    pub alone_rps: f64,
    /// Its predicted throughput in the group, samples/s; `None` when the
    /// model predicts only the group's total
    /// ([`ThroughputModel::predict_members`]).
    pub predicted_rps: Option<f64>,
    /// Predicted / alone, at most 1; `None` with `predicted_rps`.
    pub retained: Option<f64>,
    /// What the model predicted this member keeps before clipping it to
    /// 1, when it predicted more than 1 (faster beside partners than
    /// alone: measured fractions above 1 are measurement noise, which the
    /// model learned); `None` when nothing was clipped.
    pub clipped_from: Option<f64>,
}

/// A candidate group for the target, with its prediction.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Recommendation {
    /// The target first, then its partners.
    pub members: Vec<MemberPrediction>,
    /// Predicted summed throughput, samples/s.
    pub predicted_total_rps: f64,
    /// Summed throughput of the members each alone on a GPU, samples/s.
    pub alone_total_rps: f64,
    /// Predicted total over what taking turns on one GPU gives (the mean of
    /// the members' exclusive throughputs): above 1, colocating wins.
    pub vs_time_sharing: f64,
    /// The interval of the predicted total at the model's calibrated level,
    /// samples/s: `[lower, upper]` (`None` for a model without intervals).
    pub interval_rps: Option<[f64; 2]>,
    /// `true` when the interval reaches below what taking turns gives:
    /// colocating may lose throughput.
    pub may_lose_to_time_sharing: bool,
    /// Summed memory footprint, GB.
    pub memory_gb: f64,
    /// `true` when the footprints exceed the GPU's memory.
    pub exceeds_memory: bool,
    /// The features that drove the prediction most.
    pub drivers: Vec<Driver>,
    /// The largest novelty among the members: how far from the training
    /// workloads the prediction reaches (see
    /// [`crate::TrainingWorkloads::novelty`]; `None` from a model given
    /// without its training workloads).
    pub novelty: Option<f64>,
}

/// How the candidate groups are searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// Every candidate group is scored.
    Exhaustive,
    /// Partners added one at a time, the `width` best partial groups kept
    /// after each addition (not exhaustive).
    Beam {
        /// Partial groups kept per step.
        width: usize,
    },
}

/// What to recommend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Query<'a> {
    /// The workload to find partners for.
    pub target: &'a str,
    /// Names of the partners to draw from (duplicates ignored); all of the
    /// pool, the target included once, when `None`.
    pub candidates: Option<&'a [String]>,
    /// Workloads per group, the target included (at least 2).
    pub group_size: usize,
    /// GPU memory for the footprint check, GB.
    pub gpu_memory_gb: f64,
    /// Groups to return, best first (at least 1).
    pub top: usize,
    /// How to search; `None` chooses: [`Search::Exhaustive`] up to
    /// `EXHAUSTIVE_MAX_GROUPS` candidate groups, else a beam of
    /// [`BEAM_WIDTH`].
    pub search: Option<Search>,
}

/// What a recommendation ranks groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Risk {
    /// The predicted total.
    Mean,
    /// The lower end of the predicted total's interval.
    Lower,
}

/// The rule that ranked instead of the model, and why: on the inner folds
/// of the model's training data it chose better than the model for targets
/// this novel at this group size, or the target is more novel than any the
/// model was tested on there.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RuleFallback {
    /// The rule that ranked.
    pub rule: Rule,
    /// Why it ranked.
    pub reason: FallbackReason,
    /// The target's novelty.
    pub novelty: f64,
    /// The novelty of the farthest inner target the model was tested on.
    pub tested_novelty: f64,
    /// The model's mean choice score on the inner folds.
    pub model_score: f64,
    /// The rule's (for a rule that chose better on far targets: the model
    /// with the rule choosing for them).
    pub rule_score: f64,
}

impl RuleFallback {
    /// Why the rule ranked, in one sentence, for groups of `group_size`.
    pub fn describe(&self, group_size: usize) -> String {
        let rule = self.rule.name();
        let scores = format!("{:.3} against {:.3}", self.rule_score, self.model_score);
        match self.reason {
            FallbackReason::ChoseBetter => format!(
                "ranked by the rule '{rule}', which chose better than the model for groups of {group_size} and \
                 targets this novel ({:.2}) on the inner folds of its training data ({scores})",
                self.novelty
            ),
            FallbackReason::Untested => format!(
                "ranked by the rule '{rule}': the target's novelty {:.2} lies beyond the farthest the model was \
                 tested on for groups of {group_size} ({:.2}, on the inner folds of its training data), where that \
                 rule chose best",
                self.novelty, self.tested_novelty
            ),
        }
    }
}

/// The best groups found and how they were found.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    /// At most `top` groups, best predicted total first (ties: the earlier
    /// partners in candidate order first).
    pub groups: Vec<Recommendation>,
    /// How the groups were searched.
    pub search: Search,
    /// Candidate groups there are (saturating at `u128::MAX`).
    pub candidate_groups: u128,
    /// Groups (partial ones included) the model scored.
    pub scored_groups: u64,
    /// Set when a rule ranked instead of the model.
    pub fallback: Option<RuleFallback>,
    /// The target's first metric beyond the training workloads' range,
    /// if any: the predictions for it extrapolate.
    pub out_of_range: Option<OutOfRange>,
    /// The target's novelty and the novelty of the farthest inner target
    /// the model was tested on at this size (trained models only).
    pub novelty: Option<(f64, f64)>,
    /// How the model predicted groups of this size: measured and trained
    /// on, predicted from pairs (an assumption), or beyond the sizes
    /// trained on.
    pub basis: Basis,
}

/// How groups are scored for ranking.
#[derive(Clone, Copy)]
struct Ranker<'a> {
    model: &'a dyn ThroughputModel,
    /// The intervals, when the model has them.
    calibration: Option<&'a Calibration>,
    risk: Risk,
    /// A rule that ranks instead of the model.
    rule: Option<Rule>,
    /// The training workloads, to measure each group's novelty against.
    workloads: Option<&'a TrainingWorkloads>,
}

impl Ranker<'_> {
    /// The group's ranking score; one that is not a number ranks last.
    fn score(&self, group: &Colocation) -> f64 {
        let score = match (self.rule, self.risk, self.calibration) {
            (Some(rule), ..) => rule.score(group),
            (None, Risk::Lower, Some(calibration)) => {
                calibration.interval(self.model.predict_total(group), self.model.spread(group)).0
            }
            _ => self.model.predict_total(group),
        };
        if score.is_nan() {
            f64::NEG_INFINITY
        } else {
            score
        }
    }
}

/// Ranks the groups of `query.group_size` workloads containing
/// `query.target`, partners drawn from the candidates, by `model`'s
/// predicted total alone, and returns the best `query.top` (see the module
/// documentation for the search).
pub fn recommend(
    model: &dyn ThroughputModel,
    pool: &[WorkloadMetrics],
    query: &Query,
) -> Result<Ranking, ColocateError> {
    rank(Ranker { model, calibration: None, risk: Risk::Mean, rule: None, workloads: None }, pool, query, None)
}

/// Ranks like [`recommend`] with a trained model: by the predicted total or
/// the lower end of its interval (`risk`), each group with the interval
/// calibrated for its size, and by the model's fallback rule instead when
/// training found that rule choosing better at this group size; a target
/// outside the training range is named.
pub fn recommend_trained(
    model: &TrainedModel,
    pool: &[WorkloadMetrics],
    query: &Query,
    risk: Risk,
) -> Result<Ranking, ColocateError> {
    let calibration = model.selection.calibration(query.group_size);
    if risk == Risk::Lower && !calibration.quantile.is_finite() {
        return Err(ColocateError::NoIntervals { samples: calibration.samples });
    }
    let (target, _) = resolve(pool, query)?;
    let novelty = model.novelty(target);
    let decided = model.fallback_decision(query.group_size);
    let fallback = decided.and_then(|decided| {
        let (rule, reason) = decided.rule_for(novelty)?;
        Some(RuleFallback {
            rule,
            reason,
            novelty,
            tested_novelty: decided.tested_novelty,
            model_score: decided.model_score,
            rule_score: decided.rule_score,
        })
    });
    let ranker = Ranker {
        model: model.as_model(),
        calibration: Some(calibration),
        risk,
        rule: fallback.as_ref().map(|f| f.rule),
        workloads: Some(&model.workloads),
    };
    let mut ranking = rank(ranker, pool, query, fallback)?;
    ranking.out_of_range = model.out_of_range(target);
    ranking.novelty = decided.map(|decided| (novelty, decided.tested_novelty));
    Ok(ranking)
}

/// Checks `query` against `pool` before any model is trained for it: the
/// group size, the number asked for, the target and candidates named, and
/// enough partners for a group (the errors [`recommend`] would give).
pub fn check_query(pool: &[WorkloadMetrics], query: &Query) -> Result<(), ColocateError> {
    resolve(pool, query).map(drop)
}

/// The target and the partners `query` draws from `pool`, checked.
fn resolve<'p>(
    pool: &'p [WorkloadMetrics],
    query: &Query,
) -> Result<(&'p WorkloadMetrics, Vec<&'p WorkloadMetrics>), ColocateError> {
    if query.group_size < 2 {
        return Err(ColocateError::GroupSize(query.group_size));
    }
    if query.top == 0 {
        return Err(ColocateError::Top);
    }
    let find = |name: &str| {
        pool.iter().find(|w| w.workload == name).ok_or_else(|| ColocateError::UnknownWorkload {
            given: name.to_string(),
            known: pool.iter().map(|w| w.workload.as_str()).collect::<Vec<_>>().join(", "),
        })
    };
    let target = find(query.target)?;
    let partners: Vec<&WorkloadMetrics> = match query.candidates {
        Some(names) => {
            let mut seen = HashSet::new();
            names.iter().filter(|n| seen.insert(n.as_str())).map(|n| find(n)).collect::<Result<_, _>>()?
        }
        None => pool.iter().collect(),
    };
    if query.group_size - 1 > partners.len() {
        return Err(ColocateError::GroupTooLarge { group_size: query.group_size, candidates: partners.len() });
    }
    Ok((target, partners))
}

fn rank(
    ranker: Ranker,
    pool: &[WorkloadMetrics],
    query: &Query,
    fallback: Option<RuleFallback>,
) -> Result<Ranking, ColocateError> {
    let (target, partners) = resolve(pool, query)?;
    let chosen = query.group_size - 1;
    let candidate_groups = binomial(partners.len(), chosen);
    let search = query.search.unwrap_or(if candidate_groups <= EXHAUSTIVE_MAX_GROUPS {
        Search::Exhaustive
    } else {
        Search::Beam { width: BEAM_WIDTH }
    });
    // The model, remembering what it predicted for the pool's workloads.
    let pooled = ranker.model.for_pool(pool);
    let ranker = Ranker { model: pooled.as_deref().unwrap_or(ranker.model), ..ranker };
    let mut scorer = Scorer::new(ranker, target, &partners);
    let best = match search {
        Search::Exhaustive => exhaustive(&mut scorer, chosen, query.top),
        Search::Beam { width } => beam(&mut scorer, chosen, query.top, width.max(query.top)),
    };
    let groups = best.entries.iter().map(|entry| predict(&ranker, scorer.group(&entry.chosen), query.gpu_memory_gb));
    let basis = ranker.model.basis(query.group_size);
    Ok(Ranking {
        groups: groups.collect(),
        search,
        candidate_groups,
        scored_groups: scorer.scored,
        fallback,
        out_of_range: None,
        novelty: None,
        basis,
    })
}

/// Scores groups of the target and some partners without allocating per
/// group: one group is reused, its members overwritten in place.
struct Scorer<'a> {
    ranker: Ranker<'a>,
    partners: &'a [&'a WorkloadMetrics],
    group: Colocation,
    scored: u64,
}

impl<'a> Scorer<'a> {
    fn new(ranker: Ranker<'a>, target: &WorkloadMetrics, partners: &'a [&'a WorkloadMetrics]) -> Self {
        let group = Colocation { members: vec![GroupMember { metrics: target.clone(), colocated_rps: 0.0 }] };
        Scorer { ranker, partners, group, scored: 0 }
    }

    /// The group of the target and the partners at `chosen`.
    fn group(&mut self, chosen: &[usize]) -> &Colocation {
        let members = &mut self.group.members;
        members.truncate(1 + chosen.len());
        for (slot, &index) in chosen.iter().enumerate() {
            match members.get_mut(slot + 1) {
                Some(member) => member.metrics.clone_from(self.partners[index]),
                None => members.push(GroupMember { metrics: self.partners[index].clone(), colocated_rps: 0.0 }),
            }
        }
        &self.group
    }

    /// The group's ranking score.
    fn score(&mut self, chosen: &[usize]) -> f64 {
        self.scored += 1;
        let ranker = self.ranker;
        ranker.score(self.group(chosen))
    }
}

/// A scored set of partner indices.
struct Entry {
    score: f64,
    chosen: Vec<usize>,
}

/// The `keep` best entries offered, best score first; among equal scores
/// the first offered stays ahead.
struct Best {
    keep: usize,
    entries: Vec<Entry>,
}

impl Best {
    fn new(keep: usize) -> Self {
        Best { keep, entries: Vec::with_capacity(keep + 1) }
    }

    /// Whether an entry scoring `score` would be kept now.
    fn admits(&self, score: f64) -> bool {
        self.entries.len() < self.keep || self.entries.last().is_some_and(|worst| score > worst.score)
    }

    fn offer(&mut self, score: f64, chosen: &[usize]) {
        if !self.admits(score) {
            return;
        }
        let at = self.entries.partition_point(|e| e.score >= score);
        self.entries.insert(at, Entry { score, chosen: chosen.to_vec() });
        self.entries.truncate(self.keep);
    }
}

/// Scores every `chosen`-subset of the partners in lexicographic order.
fn exhaustive(scorer: &mut Scorer, chosen: usize, top: usize) -> Best {
    let n = scorer.partners.len();
    let mut best = Best::new(top);
    let mut indices: Vec<usize> = (0..chosen).collect();
    loop {
        let score = scorer.score(&indices);
        best.offer(score, &indices);
        // The next subset: bump the rightmost index that can still move.
        let Some(i) = (0..chosen).rev().find(|&i| indices[i] < n - chosen + i) else { return best };
        indices[i] += 1;
        for j in i + 1..chosen {
            indices[j] = indices[j - 1] + 1;
        }
    }
}

/// Beam search: from the target alone, add one partner at a time to every
/// kept partial group, keep the `width` best new ones (sets, so each group
/// is scored once per step), and return the `top` best complete groups.
fn beam(scorer: &mut Scorer, chosen: usize, top: usize, width: usize) -> Best {
    let n = scorer.partners.len();
    let mut frontier: Vec<Vec<usize>> = vec![Vec::new()];
    for step in 1..=chosen {
        let mut best = Best::new(if step == chosen { top } else { width });
        let mut seen: HashSet<Vec<usize>> = HashSet::new();
        for partial in &frontier {
            for partner in (0..n).filter(|p| !partial.contains(p)) {
                let mut grown = partial.clone();
                grown.insert(grown.partition_point(|&p| p < partner), partner);
                if seen.insert(grown.clone()) {
                    let score = scorer.score(&grown);
                    best.offer(score, &grown);
                }
            }
        }
        if step == chosen {
            return best;
        }
        frontier = best.entries.into_iter().map(|e| e.chosen).collect();
    }
    unreachable!("a group has at least one partner")
}

/// C(n, k), saturating at `u128::MAX`.
fn binomial(n: usize, k: usize) -> u128 {
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 0..k {
        // c × (n − i) is divisible by i + 1; dividing first where it is
        // exact keeps the product small.
        let (factor, divisor) = ((n - i) as u128, (i + 1) as u128);
        c = match c.checked_mul(factor) {
            Some(product) => product / divisor,
            None => return u128::MAX,
        };
    }
    c
}

/// Drivers listed per recommendation.
const DRIVERS: usize = 3;

fn predict(ranker: &Ranker, group: &Colocation, gpu_memory_gb: f64) -> Recommendation {
    let model = ranker.model;
    let predicted = model.predict_members(group);
    let unclipped = model.retained_before_clipping(group);
    let members: Vec<MemberPrediction> = group
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let predicted_rps = predicted.as_ref().map(|p| p[i]);
            MemberPrediction {
                workload: m.metrics.workload.clone(),
                alone_rps: m.metrics.exclusive_rps,
                predicted_rps,
                retained: predicted_rps.map(|rps| rps / m.metrics.exclusive_rps),
                clipped_from: unclipped.as_ref().map(|u| u[i]).filter(|&fraction| fraction > 1.0),
            }
        })
        .collect();
    let alone_total_rps: f64 = members.iter().map(|m| m.alone_rps).sum();
    let predicted_total_rps = model.predict_total(group);
    let memory_gb: f64 = group.members.iter().map(|m| m.metrics.memory_gb).sum();
    let time_sharing_rps = alone_total_rps / members.len() as f64;
    let interval_rps = ranker.calibration.map(|c| {
        let (lower, upper) = c.interval(predicted_total_rps, model.spread(group));
        [lower, upper]
    });
    Recommendation {
        vs_time_sharing: predicted_total_rps / time_sharing_rps,
        may_lose_to_time_sharing: interval_rps.is_some_and(|[lower, _]| lower < time_sharing_rps),
        interval_rps,
        members,
        predicted_total_rps,
        alone_total_rps,
        memory_gb,
        exceeds_memory: memory_gb > gpu_memory_gb,
        drivers: model.drivers(group, DRIVERS),
        novelty: ranker
            .workloads
            .map(|trained| group.members.iter().map(|m| trained.novelty(&m.metrics)).fold(0.0, f64::max)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::tests::{pair, workload};
    use crate::model_file::TrainedModel;
    use crate::models::{KaceModel, SlowdownModel};
    use tessera_core::rng::SplitMix64;

    fn query(target: &str, group_size: usize) -> Query<'_> {
        Query { target, candidates: None, group_size, gpu_memory_gb: 32.0, top: 100, search: None }
    }

    fn names(r: &Recommendation) -> Vec<&str> {
        r.members.iter().map(|m| m.workload.as_str()).collect()
    }

    #[test]
    fn binomials_are_exact_and_saturate() {
        assert_eq!(binomial(4, 2), 6);
        assert_eq!(binomial(21, 9), 293_930);
        assert_eq!(binomial(31, 7), 2_629_575);
        assert_eq!(binomial(5, 0), 1);
        assert_eq!(binomial(5, 5), 1);
        assert_eq!(binomial(1000, 500), u128::MAX);
    }

    #[test]
    fn ranks_partners_and_flags_memory() {
        let light = workload("light_batch1-inf", 100.0, 30.0, 10.0, 2.0);
        let heavy = workload("heavy_batch1-inf", 100.0, 95.0, 60.0, 30.0);
        let other = workload("other_batch1-inf", 100.0, 50.0, 30.0, 4.0);
        // Training data where SM-heavy partners hurt.
        let rows = vec![
            pair(light.clone(), 90.0, light.clone(), 90.0),
            pair(light.clone(), 60.0, heavy.clone(), 50.0),
            pair(light.clone(), 80.0, other.clone(), 75.0),
            pair(heavy.clone(), 55.0, other.clone(), 45.0),
            pair(other.clone(), 70.0, other.clone(), 70.0),
        ];
        let model = KaceModel::fit(&rows);
        let pool = vec![light, heavy, other];
        let ranked = recommend(&model, &pool, &query("light_batch1-inf", 2)).unwrap();
        assert_eq!((ranked.search, ranked.candidate_groups, ranked.scored_groups), (Search::Exhaustive, 3, 3));
        let ranked = ranked.groups;
        assert_eq!(ranked.len(), 3);
        assert!(ranked.windows(2).all(|w| w[0].predicted_total_rps >= w[1].predicted_total_rps));
        assert_eq!(ranked[0].members[0].workload, "light_batch1-inf");
        assert_eq!(ranked.last().unwrap().members[1].workload, "heavy_batch1-inf");
        assert!(ranked.iter().all(|r| r.drivers.len() == 3));
        assert!(ranked.iter().flat_map(|r| &r.members).all(|m| m.predicted_rps.is_none() && m.retained.is_none()));
        let triples = recommend(&model, &pool, &query("light_batch1-inf", 3)).unwrap().groups;
        assert_eq!(triples.len(), 3);
        assert!(triples.iter().any(|r| r.exceeds_memory), "light + heavy + heavy-ish exceed 32 GB");
        let top_one = recommend(&model, &pool, &Query { top: 1, ..query("light_batch1-inf", 3) }).unwrap();
        assert_eq!(top_one.groups, triples[..1]);
        assert!(matches!(recommend(&model, &pool, &query("nope", 2)), Err(ColocateError::UnknownWorkload { .. })));
        assert_eq!(recommend(&model, &pool, &query("light_batch1-inf", 1)).unwrap_err(), ColocateError::GroupSize(1));
        assert_eq!(
            recommend(&model, &pool, &Query { top: 0, ..query("light_batch1-inf", 2) }).unwrap_err(),
            ColocateError::Top
        );
    }

    #[test]
    fn a_group_larger_than_the_candidates_is_an_error_naming_both() {
        let pool: Vec<_> = ["a", "b", "c"].iter().map(|n| workload(n, 100.0, 50.0, 20.0, 2.0)).collect();
        let rows = vec![pair(pool[0].clone(), 50.0, pool[1].clone(), 40.0); 3];
        let model = KaceModel::fit(&rows);
        // The target and all three candidates (itself once more) is the largest group.
        assert_eq!(recommend(&model, &pool, &query("a", 4)).unwrap().groups.len(), 1);
        let err = recommend(&model, &pool, &query("a", 5)).unwrap_err();
        assert_eq!(err, ColocateError::GroupTooLarge { group_size: 5, candidates: 3 });
        let message = err.to_string();
        assert!(message.contains("group size 5") && message.contains("3 candidate"), "{message}");
        let candidates = ["b".to_string(), "b".to_string(), "c".to_string()];
        let listed = Query { candidates: Some(&candidates), ..query("a", 4) };
        assert_eq!(
            recommend(&model, &pool, &listed).unwrap_err(),
            ColocateError::GroupTooLarge { group_size: 4, candidates: 2 },
            "duplicate candidates count once"
        );
        // The same answers before any model is trained.
        assert_eq!(check_query(&pool, &query("a", 4)), Ok(()));
        assert_eq!(
            check_query(&pool, &query("a", 5)),
            Err(ColocateError::GroupTooLarge { group_size: 5, candidates: 3 })
        );
        let unknown = check_query(&pool, &query("z", 2)).unwrap_err();
        assert_eq!(unknown, recommend(&model, &pool, &query("z", 2)).unwrap_err());
        assert!(unknown.to_string().contains("'z'"), "{unknown}");
    }

    /// Random workloads and colocations where interference grows with the
    /// partners' summed SM and memory use.
    fn random_pool(workloads: usize, seed: u64) -> (Vec<WorkloadMetrics>, Vec<Colocation>) {
        let mut rng = SplitMix64::new(seed);
        let pool: Vec<WorkloadMetrics> = (0..workloads)
            .map(|i| {
                workload(
                    &format!("w{i}_batch1-inf"),
                    rng.uniform(20.0, 200.0),
                    rng.uniform(10.0, 95.0),
                    rng.uniform(5.0, 60.0),
                    rng.uniform(1.0, 12.0),
                )
            })
            .collect();
        let mut rows = Vec::new();
        for _ in 0..60 {
            let size = 2 + rng.below(3);
            let members: Vec<&WorkloadMetrics> = (0..size).map(|_| &pool[rng.below(workloads)]).collect();
            let load: f64 = members.iter().map(|m| m.sm_util_pct + 0.5 * m.mem_util_pct).sum::<f64>() / 100.0;
            rows.push(Colocation {
                members: members
                    .iter()
                    .map(|m| GroupMember {
                        metrics: (*m).clone(),
                        colocated_rps: m.exclusive_rps / load.max(1.0) * rng.uniform(0.9, 1.1),
                    })
                    .collect(),
            });
        }
        (pool, rows)
    }

    #[test]
    fn beam_search_finds_the_exhaustive_best_group() {
        for seed in 0..4 {
            let (pool, rows) = random_pool(14, seed);
            let slowdown = SlowdownModel::fit(&rows, &crate::grid()[..crate::AVERAGED]).unwrap();
            let kace = KaceModel::fit(&rows);
            let models: [&dyn ThroughputModel; 2] = [&slowdown, &kace];
            for model in models {
                for group_size in 2..=6 {
                    let target = &pool[seed as usize].workload;
                    let ask = |search| Query { top: 3, search: Some(search), ..query(target, group_size) };
                    let exact = recommend(model, &pool, &ask(Search::Exhaustive)).unwrap();
                    let beam = recommend(model, &pool, &ask(Search::Beam { width: BEAM_WIDTH })).unwrap();
                    assert_eq!(exact.candidate_groups, binomial(14, group_size - 1));
                    assert_eq!(exact.scored_groups as u128, exact.candidate_groups);
                    assert_eq!(
                        names(&beam.groups[0]),
                        names(&exact.groups[0]),
                        "{} seed {seed} size {group_size}",
                        model.name()
                    );
                    assert_eq!(beam.groups[0].predicted_total_rps, exact.groups[0].predicted_total_rps);
                }
            }
        }
    }

    #[test]
    fn large_searches_switch_to_a_beam_whose_cost_grows_gently() {
        let (pool, rows) = random_pool(60, 7);
        let model = SlowdownModel::fit(&rows, &crate::grid()[..crate::AVERAGED]).unwrap();
        let small = recommend(&model, &pool, &Query { top: 5, ..query("w0_batch1-inf", 3) }).unwrap();
        assert_eq!((small.search, small.candidate_groups), (Search::Exhaustive, 1770));
        let large = recommend(&model, &pool, &Query { top: 5, ..query("w0_batch1-inf", 10) }).unwrap();
        assert_eq!(large.search, Search::Beam { width: BEAM_WIDTH });
        assert_eq!(large.candidate_groups, binomial(60, 9));
        // At most one scoring per kept partial group × partner × step.
        assert!(large.scored_groups <= (9 * BEAM_WIDTH * 60) as u64, "{}", large.scored_groups);
        assert_eq!(large.groups.len(), 5);
        for group in &large.groups {
            let mut partners = names(group)[1..].to_vec();
            partners.sort();
            partners.dedup();
            assert_eq!(partners.len(), 9, "distinct partners: {partners:?}");
        }
        assert!(large.groups.windows(2).all(|w| w[0].predicted_total_rps >= w[1].predicted_total_rps));
    }

    #[test]
    fn says_how_a_size_is_predicted_and_flags_a_clipped_member() {
        // Light workloads measured keeping more than alone beside each other.
        let pool: Vec<WorkloadMetrics> = (0..5)
            .map(|i| workload(&format!("w{i}_batch1-inf"), 50.0 + 10.0 * i as f64, 10.0 + 20.0 * i as f64, 5.0, 1.0))
            .collect();
        let mut rows = Vec::new();
        for i in 0..5 {
            for j in i..5 {
                let load = (pool[i].sm_util_pct + pool[j].sm_util_pct) / 100.0;
                let keep = |w: &WorkloadMetrics| w.exclusive_rps * 1.4 / load.max(0.4);
                rows.push(pair(pool[i].clone(), keep(&pool[i]), pool[j].clone(), keep(&pool[j])));
            }
        }
        let model = TrainedModel::slowdown(&rows, 0).unwrap();
        let ask = |group_size| recommend_trained(&model, &pool, &query("w0_batch1-inf", group_size), Risk::Mean);
        let pairs = ask(2).unwrap();
        assert_eq!((pairs.basis, pairs.out_of_range.is_none()), (Basis::Measured, true));
        let members: Vec<&MemberPrediction> = pairs.groups.iter().flat_map(|g| &g.members).collect();
        assert!(members.iter().all(|m| m.retained.unwrap() <= 1.0), "{members:?}");
        let clipped: Vec<f64> = members.iter().filter_map(|m| m.clipped_from).collect();
        assert!(!clipped.is_empty() && clipped.iter().all(|&raw| raw > 1.0), "{members:?}");
        for m in members.iter().filter(|m| m.clipped_from.is_some()) {
            assert_eq!(m.retained, Some(1.0), "a clipped member keeps exactly what it does alone");
        }
        assert_eq!(ask(3).unwrap().basis, Basis::ComposedFromPairs);
    }
}
