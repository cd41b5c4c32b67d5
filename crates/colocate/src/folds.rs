//! The folds of KACE's protocols, and how a choice among candidates is
//! scored: for each target workload a policy picks one of the measured
//! groups that contain it; the score is that group's summed throughput
//! over the best such group's.
//!
//! * **P3**: train on a split's training rows, choose among its test rows,
//!   for every workload that appears in the test rows; the mean over
//!   targets per split, then over splits.
//! * **LOWO** (leave one workload family out): for each family of model and
//!   task, train on every row with none of its workloads, and choose among
//!   all rows for each of them; the mean over every target.
//! * **LOFO** (leave one model family out): the same with a family being a
//!   whole model, every batch size, inference and training, so that no
//!   variant of the target is ever in training.
//! * **New family**: one LOFO fold, the model family that appears last in
//!   the file (its first row comes after every other family's first row):
//!   the case a user meets first, a model added after the others were
//!   measured.
//!
//! The evaluation ([`crate::evaluate`]) and the selection of a model's
//! configuration on inner folds ([`crate::select_slowdown`]) both work on
//! these folds.

use tessera_core::rng::SplitMix64;
use tessera_core::{Colocation, WorkloadMetrics};

use crate::groups::{build_groups, Composition};

/// One train/test split.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// The split's name, e.g. its seed.
    pub name: String,
    /// Rows to train on.
    pub train: Vec<Colocation>,
    /// Rows to choose among.
    pub test: Vec<Colocation>,
}

/// An evaluation protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Protocol {
    /// KACE's published splits: train on a split's training rows, choose
    /// among its test rows.
    P3,
    /// Leave one workload family (model and task) out of training.
    Lowo,
    /// Leave one model family (every batch size, inference and training)
    /// out of training.
    Lofo,
    /// Leave the newest model family (the last to appear in the rows) out
    /// of training: one LOFO fold.
    #[serde(rename = "new-family")]
    #[cfg_attr(feature = "clap", value(name = "new-family"))]
    NewFamily,
}

impl Protocol {
    /// Every protocol.
    pub const ALL: [Protocol; 4] = [Protocol::P3, Protocol::Lowo, Protocol::Lofo, Protocol::NewFamily];

    /// The protocol's name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::P3 => "p3",
            Protocol::Lowo => "lowo",
            Protocol::Lofo => "lofo",
            Protocol::NewFamily => "new family",
        }
    }

    /// The family a workload belongs to under a hold-out protocol (under
    /// P3, which holds out rows, every workload is its own).
    fn family(self, workload: &WorkloadMetrics) -> String {
        match self {
            Protocol::P3 => workload.workload.clone(),
            Protocol::Lowo => {
                let (model, task) = workload.family();
                format!("{model}-{task}")
            }
            Protocol::Lofo | Protocol::NewFamily => workload.family().0.to_string(),
        }
    }
}

/// Rows to train on, rows to choose among, and the workloads to choose for.
#[derive(Debug, Clone, PartialEq)]
pub struct Fold {
    /// The fold's name: a split, or the family held out.
    pub name: String,
    /// Rows to train on.
    pub train: Vec<Colocation>,
    /// Rows to choose among.
    pub candidates: Vec<Colocation>,
    /// The workloads to choose for, each with at least one candidate.
    pub targets: Vec<String>,
}

/// P3's folds: one per split, every workload of its test rows a target.
pub fn p3_folds(splits: &[Split]) -> Vec<Fold> {
    splits
        .iter()
        .map(|split| Fold {
            name: split.name.clone(),
            train: split.train.clone(),
            candidates: split.test.clone(),
            targets: workloads(&split.test),
        })
        .collect()
}

/// The hold-out folds of `protocol` over `rows`: one per family, in name
/// order, training on every row with no workload of it and choosing among
/// all rows for each of its workloads. For [`Protocol::P3`], which holds
/// out rows rather than families, every workload is its own family; for
/// [`Protocol::NewFamily`] only the last family to appear in `rows` is held
/// out.
pub fn holdout_folds(rows: &[Colocation], protocol: Protocol) -> Vec<Fold> {
    let family_of = |m: &tessera_core::GroupMember| protocol.family(&m.metrics);
    let newest = rows.iter().flat_map(|g| &g.members).map(family_of).fold(Vec::new(), |mut seen, family| {
        if !seen.contains(&family) {
            seen.push(family);
        }
        seen
    });
    let newest = newest.last().cloned();
    let mut families: Vec<(String, String)> = rows
        .iter()
        .flat_map(|g| g.members.iter().map(|m| (family_of(m), m.metrics.workload.clone())))
        .filter(|(family, _)| protocol != Protocol::NewFamily || Some(family) == newest.as_ref())
        .collect();
    families.sort();
    families.dedup();
    let mut folds: Vec<Fold> = Vec::new();
    for (family, workload) in families {
        match folds.last_mut() {
            Some(fold) if fold.name == family => fold.targets.push(workload),
            _ => {
                let train = rows.iter().filter(|g| g.members.iter().all(|m| family_of(m) != family)).cloned().collect();
                folds.push(Fold { name: family, train, candidates: rows.to_vec(), targets: vec![workload] });
            }
        }
    }
    folds
}

/// `folds` folds of `rows` drawn at random (seeded): each chooses among
/// its own rows for their workloads and trains on the others.
pub fn row_folds(rows: &[Colocation], folds: usize, seed: u64) -> Vec<Fold> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let mut fold_of = vec![0; rows.len()];
    for (position, &row) in order.iter().enumerate() {
        fold_of[row] = position % folds.max(1);
    }
    (0..folds.max(1))
        .map(|f| {
            let pick = |inside: bool| -> Vec<Colocation> {
                rows.iter().zip(&fold_of).filter(|(_, &g)| (g == f) == inside).map(|(r, _)| r.clone()).collect()
            };
            let candidates = pick(true);
            Fold { name: format!("rows {}", f + 1), train: pick(false), targets: workloads(&candidates), candidates }
        })
        .filter(|fold| !fold.targets.is_empty())
        .collect()
}

/// Where the candidate groups of one size come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum GroupSource {
    /// Groups of that size measured together.
    Measured,
    /// Groups built from measured pairs ([`crate::build_groups`]): every
    /// two members measured together, throughputs by `composition`.
    BuiltFromPairs {
        /// How the pairs' slowdowns make a group's.
        composition: Composition,
    },
    /// Neither measured nor buildable (no pairs to build from).
    Unavailable,
}

impl GroupSource {
    /// The groups of `size` in words.
    pub fn describe(self, size: usize) -> String {
        match self {
            GroupSource::Measured if size == 2 => "measured pairs".to_string(),
            GroupSource::Measured => format!("measured groups of {size}"),
            GroupSource::BuiltFromPairs { composition: Composition::Additive } => {
                format!("groups of {size} built from measured pairs (delays added: an assumption)")
            }
            GroupSource::BuiltFromPairs { composition: Composition::Multiplicative } => {
                format!("groups of {size} built from measured pairs (slowdowns multiplied: an assumption)")
            }
            GroupSource::Unavailable => format!("no groups of {size}: neither measured nor buildable from pairs"),
        }
    }
}

/// The group sizes measured among the folds' candidates, ascending.
pub fn measured_sizes(folds: &[Fold]) -> Vec<usize> {
    let mut sizes: Vec<usize> = folds.iter().flat_map(|f| f.candidates.iter().map(|g| g.members.len())).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The folds with their candidates replaced by the groups of `group_size`:
/// the measured ones when any fold has a measured group of that size,
/// else those built from each fold's measured pairs by `composition`
/// ([`crate::build_groups`]); targets with no such group are dropped, and
/// so are folds left with no target. The training rows stay as they were.
pub fn grouped_folds(folds: &[Fold], group_size: usize, composition: Composition) -> (GroupSource, Vec<Fold>) {
    let has = |size: usize| folds.iter().any(|f| f.candidates.iter().any(|g| g.members.len() == size));
    let source = if has(group_size) {
        GroupSource::Measured
    } else if group_size > 2 && has(2) {
        GroupSource::BuiltFromPairs { composition }
    } else {
        return (GroupSource::Unavailable, Vec::new());
    };
    let folds = folds
        .iter()
        .filter_map(|fold| {
            let candidates = match source {
                GroupSource::Measured => {
                    fold.candidates.iter().filter(|g| g.members.len() == group_size).cloned().collect()
                }
                _ => build_groups(&fold.candidates, group_size, composition),
            };
            let present = workloads(&candidates);
            let targets: Vec<String> =
                fold.targets.iter().filter(|t| present.binary_search(t).is_ok()).cloned().collect();
            (!targets.is_empty()).then(|| Fold {
                name: fold.name.clone(),
                train: fold.train.clone(),
                candidates,
                targets,
            })
        })
        .collect();
    (source, folds)
}

/// The protocol's mean of per-fold `(mean score, targets)`: over folds for
/// P3, over targets for the hold-out protocols.
pub(crate) fn mean_over_targets(protocol: Protocol, per_fold: &[(f64, usize)]) -> f64 {
    match protocol {
        Protocol::P3 => mean(per_fold.iter().map(|(s, _)| *s)),
        Protocol::Lowo | Protocol::Lofo | Protocol::NewFamily => {
            let targets: usize = per_fold.iter().map(|(_, n)| n).sum();
            per_fold.iter().map(|(s, n)| s * *n as f64).sum::<f64>() / targets.max(1) as f64
        }
    }
}

/// The mean of `values` (0 for none).
pub(crate) fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(s, c), v| (s + v, c + 1));
    if count == 0 {
        0.0
    } else {
        sum / count as f64
    }
}

/// Every workload appearing in `rows`, sorted.
pub fn workloads(rows: &[Colocation]) -> Vec<String> {
    let mut names: Vec<String> =
        rows.iter().flat_map(|g| g.members.iter().map(|m| m.metrics.workload.clone())).collect();
    names.sort();
    names.dedup();
    names
}

/// The score of choosing for `target` among `candidates` the one with the
/// highest `score(index)` (the first on ties): its measured total over the
/// best measured total of the target's candidates.
pub(crate) fn choose(candidates: &[Colocation], target: &str, score: impl Fn(usize) -> f64) -> f64 {
    let mut best_total = f64::MIN;
    let mut chosen: Option<(usize, f64)> = None;
    for (index, group) in candidates.iter().enumerate().filter(|(_, g)| g.contains(target)) {
        best_total = best_total.max(group.total_rps());
        let value = score(index);
        if chosen.is_none_or(|(_, best)| value > best) {
            chosen = Some((index, value));
        }
    }
    chosen.map_or(0.0, |(index, _)| candidates[index].total_rps() / best_total)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::features::tests::workload;

    /// Five workloads of three families; groups lose throughput with the
    /// members' summed SM utilisation.
    pub(crate) fn three_way_rows() -> Vec<Colocation> {
        use tessera_core::GroupMember;
        let names = ["a_batch1-inf", "a_batch2-inf", "c_batch1-train", "d_batch2-inf", "c_batch1-inf"];
        let metrics = |i: usize| {
            workload(names[i], 100.0 + 10.0 * i as f64, 30.0 + 12.0 * i as f64, 10.0 + 5.0 * i as f64, 1.0 + i as f64)
        };
        let group = |ids: &[usize]| {
            let load: f64 = ids.iter().map(|&i| metrics(i).sm_util_pct).sum();
            Colocation {
                members: ids
                    .iter()
                    .map(|&i| GroupMember {
                        metrics: metrics(i),
                        colocated_rps: metrics(i).exclusive_rps * 60.0 / load,
                    })
                    .collect(),
            }
        };
        let mut rows = Vec::new();
        for i in 0..5 {
            for j in i..5 {
                rows.push(group(&[i, j]));
            }
        }
        rows.push(group(&[0, 1, 2]));
        rows
    }

    #[test]
    fn hold_out_folds_train_without_the_family() {
        let rows = three_way_rows();
        let lowo = holdout_folds(&rows, Protocol::Lowo);
        let lofo = holdout_folds(&rows, Protocol::Lofo);
        let names = |folds: &[Fold]| folds.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&lowo), ["a-inf", "c-inf", "c-train", "d-inf"]);
        assert_eq!(names(&lofo), ["a", "c", "d"]);
        let c = &lofo[1];
        assert_eq!(c.targets, ["c_batch1-inf", "c_batch1-train"], "inference and training are one model family");
        assert!(c.train.iter().all(|g| g.members.iter().all(|m| !m.metrics.workload.starts_with("c_"))));
        assert!(!c.train.is_empty() && c.candidates.len() == rows.len());
        // LOWO keeps the other task of the same model in training.
        assert!(lowo[2].train.iter().any(|g| g.contains("c_batch1-inf")));
    }

    #[test]
    fn row_folds_partition_the_rows_deterministically() {
        let rows = three_way_rows();
        let folds = row_folds(&rows, 4, 7);
        assert_eq!(folds.len(), 4);
        assert_eq!(folds.iter().map(|f| f.candidates.len()).sum::<usize>(), rows.len());
        for fold in &folds {
            assert_eq!(fold.train.len() + fold.candidates.len(), rows.len());
        }
        assert_eq!(folds, row_folds(&rows, 4, 7));
        assert_ne!(folds, row_folds(&rows, 4, 8));
    }

    #[test]
    fn groups_of_a_size_are_the_measured_ones_else_built_from_pairs() {
        let rows = three_way_rows();
        let folds = holdout_folds(&rows, Protocol::Lowo);
        assert_eq!(measured_sizes(&folds), [2, 3]);
        // 15 pairs and one measured triple: the triple is chosen among alone.
        let (source, threes) = grouped_folds(&folds, 3, Composition::Additive);
        assert_eq!(source, GroupSource::Measured);
        assert!(threes.iter().all(|f| f.candidates.len() == 1 && f.candidates[0].members.len() == 3));
        let names: Vec<&str> = threes.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a-inf", "c-train"], "families with a member in the triple");
        // No group of 4 was measured: built from the pairs.
        let (source, fours) = grouped_folds(&folds, 4, Composition::Additive);
        assert_eq!(source, GroupSource::BuiltFromPairs { composition: Composition::Additive });
        assert!(!fours.is_empty() && fours.iter().all(|f| f.candidates.iter().all(|g| g.members.len() == 4)));
        // Without pairs nothing is built.
        let triple_only = holdout_folds(&rows[15..], Protocol::Lowo);
        assert_eq!(grouped_folds(&triple_only, 4, Composition::Additive), (GroupSource::Unavailable, Vec::new()));
        assert_eq!(grouped_folds(&triple_only, 2, Composition::Additive).0, GroupSource::Unavailable);
        assert!(GroupSource::Measured.describe(4).contains("measured groups of 4"));
        assert!(GroupSource::BuiltFromPairs { composition: Composition::Additive }.describe(3).contains("assumption"));
    }
}
