//! Ranking partners for a target workload.

use tessera_core::{Colocation, GroupMember, WorkloadMetrics};

use crate::error::ColocateError;
use crate::models::{Driver, ThroughputModel};

/// One member's predicted throughput in a recommended group.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MemberPrediction {
    /// The workload.
    pub workload: String,
    /// Its throughput alone, samples/s.
    pub alone_rps: f64,
    /// Its predicted throughput in the group, samples/s.
    pub predicted_rps: f64,
    /// Predicted / alone.
    pub retained: f64,
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
    /// Summed memory footprint, GB.
    pub memory_gb: f64,
    /// `true` when the footprints exceed the GPU's memory.
    pub exceeds_memory: bool,
    /// The features that drove the prediction most.
    pub drivers: Vec<Driver>,
}

/// Ranks groups of `group_size` workloads containing `target`, partners
/// drawn from `candidates` (names; all of `pool` when `None`, the target
/// itself included once), best predicted total first.
pub fn recommend(
    model: &dyn ThroughputModel,
    pool: &[WorkloadMetrics],
    target: &str,
    candidates: Option<&[String]>,
    group_size: usize,
    gpu_memory_gb: f64,
) -> Result<Vec<Recommendation>, ColocateError> {
    if group_size < 2 {
        return Err(ColocateError::GroupSize(group_size));
    }
    let find = |name: &str| {
        pool.iter().find(|w| w.workload == name).ok_or_else(|| ColocateError::UnknownWorkload {
            given: name.to_string(),
            known: pool.iter().map(|w| w.workload.as_str()).collect::<Vec<_>>().join(", "),
        })
    };
    let target = find(target)?;
    let partners: Vec<&WorkloadMetrics> = match candidates {
        Some(names) => names.iter().map(|n| find(n)).collect::<Result<_, _>>()?,
        None => pool.iter().collect(),
    };
    let mut ranked: Vec<Recommendation> = combinations(partners.len(), group_size - 1)
        .into_iter()
        .map(|chosen| {
            let members = std::iter::once(target).chain(chosen.iter().map(|&i| partners[i]));
            let group = Colocation {
                members: members.map(|m| GroupMember { metrics: m.clone(), colocated_rps: 0.0 }).collect(),
            };
            predict(model, &group, gpu_memory_gb)
        })
        .collect();
    ranked.sort_by(|a, b| b.predicted_total_rps.total_cmp(&a.predicted_total_rps));
    Ok(ranked)
}

/// Drivers listed per recommendation.
const DRIVERS: usize = 3;

fn predict(model: &dyn ThroughputModel, group: &Colocation, gpu_memory_gb: f64) -> Recommendation {
    let predicted = model.predict_members(group);
    let members: Vec<MemberPrediction> = group
        .members
        .iter()
        .zip(&predicted)
        .map(|(m, &rps)| MemberPrediction {
            workload: m.metrics.workload.clone(),
            alone_rps: m.metrics.exclusive_rps,
            predicted_rps: rps,
            retained: rps / m.metrics.exclusive_rps,
        })
        .collect();
    let alone_total_rps: f64 = members.iter().map(|m| m.alone_rps).sum();
    let predicted_total_rps: f64 = predicted.iter().sum();
    let memory_gb: f64 = group.members.iter().map(|m| m.metrics.memory_gb).sum();
    Recommendation {
        vs_time_sharing: predicted_total_rps / (alone_total_rps / members.len() as f64),
        members,
        predicted_total_rps,
        alone_total_rps,
        memory_gb,
        exceeds_memory: memory_gb > gpu_memory_gb,
        drivers: model.drivers(group, DRIVERS),
    }
}

/// Every `k`-subset of `0..n`, in lexicographic order.
fn combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
    let mut all = Vec::new();
    let mut current = Vec::with_capacity(k);
    fn extend(start: usize, n: usize, k: usize, current: &mut Vec<usize>, all: &mut Vec<Vec<usize>>) {
        if current.len() == k {
            all.push(current.clone());
            return;
        }
        for i in start..n {
            current.push(i);
            extend(i + 1, n, k, current, all);
            current.pop();
        }
    }
    extend(0, n, k, &mut current, &mut all);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::tests::{pair, workload};
    use crate::models::KaceModel;

    #[test]
    fn subsets_are_complete_and_ordered() {
        assert_eq!(combinations(4, 2).len(), 6);
        assert_eq!(combinations(3, 3), vec![vec![0, 1, 2]]);
        assert_eq!(combinations(2, 1), vec![vec![0], vec![1]]);
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
        let ranked = recommend(&model, &pool, "light_batch1-inf", None, 2, 32.0).unwrap();
        assert_eq!(ranked.len(), 3);
        assert!(ranked.windows(2).all(|w| w[0].predicted_total_rps >= w[1].predicted_total_rps));
        assert_eq!(ranked[0].members[0].workload, "light_batch1-inf");
        assert_eq!(ranked.last().unwrap().members[1].workload, "heavy_batch1-inf");
        assert!(ranked.iter().all(|r| r.drivers.len() == 3));
        let triples = recommend(&model, &pool, "light_batch1-inf", None, 3, 32.0).unwrap();
        assert_eq!(triples.len(), 3);
        assert!(triples.iter().any(|r| r.exceeds_memory), "light + heavy + heavy-ish exceed 32 GB");
        assert!(matches!(recommend(&model, &pool, "nope", None, 2, 32.0), Err(ColocateError::UnknownWorkload { .. })));
        assert_eq!(
            recommend(&model, &pool, "light_batch1-inf", None, 1, 32.0).unwrap_err(),
            ColocateError::GroupSize(1)
        );
    }
}
