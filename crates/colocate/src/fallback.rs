//! When a one-line rule chooses instead of the slowdown model: decided per
//! group size on the inner folds' targets, by how novel each target was
//! (see [`crate::TrainingWorkloads`]).
//!
//! Two decisions, both from the training rows alone:
//!
//! * **Far targets.** The rule and the novelty threshold (every target, or
//!   those beyond the median or the upper quartile of the inner targets'
//!   novelty) that would have chosen best on the inner targets, taken only
//!   when its mean advantage over the model is more than twice its standard
//!   error (a lead within the noise of the inner targets does not carry
//!   over to new ones).
//! * **Untested targets.** The inner folds tested the model up to the
//!   novelty of their farthest target; for a target further out than that
//!   nothing vouches for the model, and the rule that chose best over every
//!   inner target chooses instead.

use crate::rules::Rule;

/// One inner target: how novel it was to its fold's training rows, and the
/// score of the model's choice and of each rule's ([`Rule::ALL`] order).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct InnerTarget {
    pub novelty: f64,
    pub model: f64,
    pub rules: [f64; Rule::ALL.len()],
}

/// The inner targets' novelty quantiles a threshold is tried at (beyond
/// the median, beyond the upper quartile).
const THRESHOLD_QUANTILES: [f64; 2] = [0.5, 0.75];

/// Whether, and for which targets, a rule chooses instead of the model at
/// one group size.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fallback {
    /// Workloads per group.
    pub group_size: usize,
    /// The rule that chooses instead of the model for far targets, if one
    /// chose better on the inner folds.
    pub rule: Option<Rule>,
    /// With `rule`: it chooses only for targets more novel than this;
    /// `None`: for every target.
    pub beyond_novelty: Option<f64>,
    /// Inner targets scored at this size.
    pub targets: usize,
    /// The averaged model's mean score on them.
    pub model_score: f64,
    /// With `rule`, the mean score of the model with the rule choosing for
    /// far targets; else the best rule's alone.
    pub rule_score: f64,
    /// The standard error of that mean advantage per target.
    pub standard_error: f64,
    /// The novelty of the farthest inner target: how far out the model was
    /// tested (the largest number when no inner target was scored).
    pub tested_novelty: f64,
    /// The rule that chose best over every inner target: it chooses for a
    /// target more novel than `tested_novelty`.
    pub untested_rule: Rule,
}

/// Why a rule chose instead of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FallbackReason {
    /// The inner folds found the rule choosing better for targets this
    /// novel.
    ChoseBetter,
    /// The target is more novel than any the model was tested on.
    Untested,
}

impl Fallback {
    /// The rule that chooses for a target of `novelty`, and why; `None`
    /// when the model chooses.
    pub fn rule_for(&self, novelty: f64) -> Option<(Rule, FallbackReason)> {
        if novelty > self.tested_novelty {
            return Some((self.untested_rule, FallbackReason::Untested));
        }
        let rule = self.rule?;
        (novelty > self.beyond_novelty.unwrap_or(f64::NEG_INFINITY)).then_some((rule, FallbackReason::ChoseBetter))
    }
}

/// Decides the fallback of `group_size` from its inner targets (see the
/// module documentation).
pub(crate) fn decide(group_size: usize, inner: &[InnerTarget]) -> Fallback {
    let targets = inner.len();
    let mean = |values: &mut dyn Iterator<Item = f64>| values.sum::<f64>() / targets.max(1) as f64;
    let model_score = mean(&mut inner.iter().map(|t| t.model));
    let rule_means: Vec<f64> = (0..Rule::ALL.len()).map(|r| mean(&mut inner.iter().map(|t| t.rules[r]))).collect();
    let best_overall = (0..Rule::ALL.len()).fold(0, |best, r| if rule_means[r] > rule_means[best] { r } else { best });
    let mut novelties: Vec<f64> = inner.iter().map(|t| t.novelty).filter(|n| n.is_finite()).collect();
    novelties.sort_by(f64::total_cmp);
    // Nothing tested at this size: nothing to say the model is untested
    // anywhere either.
    let tested_novelty = novelties.last().copied().unwrap_or(f64::MAX);
    let scored = novelties.len();
    let thresholds = std::iter::once(None).chain(THRESHOLD_QUANTILES.iter().filter_map(|q| {
        let at = *novelties.get(((scored as f64 * q) as usize).min(scored.saturating_sub(1)))?;
        Some(Some(at))
    }));
    // Each (threshold, rule): the per-target advantage over the model.
    let mut best: Option<(Option<f64>, usize, Vec<f64>)> = None;
    for threshold in thresholds {
        let far = |t: &InnerTarget| t.novelty > threshold.unwrap_or(f64::NEG_INFINITY);
        for r in 0..Rule::ALL.len() {
            let advantages: Vec<f64> = inner.iter().map(|t| if far(t) { t.rules[r] - t.model } else { 0.0 }).collect();
            let total: f64 = advantages.iter().sum();
            if best.as_ref().is_none_or(|(_, _, b)| total > b.iter().sum::<f64>() + 1e-12) {
                best = Some((threshold, r, advantages));
            }
        }
    }
    let (threshold, r, advantages) = best.unwrap_or((None, best_overall, vec![0.0; targets]));
    let advantage = mean(&mut advantages.iter().copied());
    let variance =
        advantages.iter().map(|d| (d - advantage).powi(2)).sum::<f64>() / targets.saturating_sub(1).max(1) as f64;
    let standard_error = (variance / targets.max(1) as f64).sqrt();
    let taken = targets >= 2 && advantage > 0.0 && advantage > 2.0 * standard_error;
    Fallback {
        group_size,
        rule: taken.then_some(Rule::ALL[r]),
        beyond_novelty: if taken { threshold } else { None },
        targets,
        model_score,
        rule_score: if taken { model_score + advantage } else { rule_means[best_overall] },
        standard_error,
        tested_novelty,
        untested_rule: Rule::ALL[best_overall],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(novelty: f64, model: f64, sm_throughput: f64) -> InnerTarget {
        InnerTarget { novelty, model, rules: [0.5, 0.5, 0.5, sm_throughput] }
    }

    #[test]
    fn a_rule_better_only_on_far_targets_chooses_only_for_them() {
        // Near targets: the model is right. Far ones (novelty > 1): the
        // model is wrong and the summed SM throughput rule right.
        let mut inner: Vec<InnerTarget> = (0..12).map(|i| target(0.1 * i as f64, 1.0, 0.8)).collect();
        inner.extend((0..6).map(|i| target(1.5 + 0.1 * i as f64, 0.6 + 0.01 * i as f64, 1.0)));
        let decided = decide(2, &inner);
        assert_eq!(decided.rule, Some(Rule::HighestSmThroughput));
        // Thresholds are tried at quantiles only: beyond the median (0.9)
        // costs two near targets and gains all six far ones.
        assert_eq!(decided.beyond_novelty, Some(0.9));
        assert_eq!(decided.rule_for(0.2), None);
        assert_eq!(decided.rule_for(2.0), Some((Rule::HighestSmThroughput, FallbackReason::ChoseBetter)));
        assert!(decided.rule_score > decided.model_score);
    }

    #[test]
    fn a_lead_within_the_noise_is_not_taken_but_untested_targets_still_fall_back() {
        // The rule wins on half the targets and loses on the other half.
        let inner: Vec<InnerTarget> =
            (0..10).map(|i| target(0.1 * i as f64, if i % 2 == 0 { 0.7 } else { 1.0 }, 0.86)).collect();
        let decided = decide(3, &inner);
        assert_eq!((decided.rule, decided.beyond_novelty), (None, None));
        assert_eq!(decided.rule_for(0.9), None, "as novel as the farthest inner target: tested");
        assert_eq!(decided.tested_novelty, 0.9);
        let (rule, reason) = decided.rule_for(0.95).expect("beyond what was tested");
        assert_eq!(reason, FallbackReason::Untested);
        assert_eq!(rule, Rule::HighestSmThroughput, "the best rule over every inner target");
    }

    #[test]
    fn without_inner_targets_nothing_falls_back() {
        let decided = decide(4, &[]);
        assert_eq!((decided.rule, decided.rule_for(1e6)), (None, None));
    }

    #[test]
    fn a_rule_better_everywhere_chooses_for_every_target() {
        let inner: Vec<InnerTarget> = (0..10).map(|i| target(0.1 * i as f64, 0.6 + 0.01 * i as f64, 1.0)).collect();
        let decided = decide(2, &inner);
        assert_eq!((decided.rule, decided.beyond_novelty), (Some(Rule::HighestSmThroughput), None));
        assert!(decided.rule_for(0.0).is_some());
    }
}
