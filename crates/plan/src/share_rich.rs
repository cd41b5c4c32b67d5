//! A plan with shared instances ([`plan_shared`]): the light services
//! packed ([`crate::share`]), each shared instance placed by the optimal
//! planner as a stand-in segment, and memory-rich shared instances where
//! they save GPUs.
//!
//! Memory-rich shared instances. Where the optimal placement leaves a
//! GPU's last memory slice idle beside a smallest instance (seven `1g.10gb`
//! instances leave the eighth idle), the shared instance there can be the
//! smallest profile's memory-rich variant (`1g.20gb`) at no cost in compute
//! or placement ([`GpuSpec::memory_widening`]). Memory is what fills most
//! shared instances of a long tail (five 2 GB members fill 10 GB while the
//! executor is busy 60% of the time), so as many rich instances as there
//! are such GPUs let a local search give up other instances:
//!
//! 1. The least busy instances become rich.
//! 2. **Lighten.** Each rich instance's members are swapped, heaviest first,
//!    for lighter members of ordinary instances, where every member of both
//!    still meets its SLO at the margin: rich instances end up holding
//!    light members and busy time to spare.
//! 3. **Empty.** The least busy ordinary instance is given up when each of
//!    its members (heaviest first) finds another instance with memory for
//!    it where every member still meets its SLO (the least busy such one).
//!    Then back to 2, until no instance can be given up.
//!
//! The fewer instances are placed again; the plan is kept only when every
//! instance whose members need more than the smallest instance's memory
//! finds such a slot (else the search runs again with as many rich
//! instances as the new placement offers) and it takes fewer GPUs than
//! the plan without rich instances.
//!
//! A member's batch time in the rich variant is its profile's in the
//! primary instance of the same compute slices: the variant has the same
//! compute and more memory, so it is taken as no slower (not measured).
//!
//! [`GpuSpec::memory_widening`]: tessera_core::GpuSpec::memory_widening

use std::collections::{HashMap, HashSet};

use tessera_core::layout::Placement;
use tessera_core::{GpuAssignment, MigProfile, Plan, ServiceSlo};
use tessera_serving::serialized::{all_meet, Member};

use crate::error::PlanError;
use crate::optimal::plan_optimal;
use crate::problem::Problem;
use crate::share::{candidate, pack, stand_ins, unfold, Candidate, Packing, MAX_MEMBERS};

/// How many times the search runs again when a placement offers fewer
/// rich slots than it was run with.
const ROUNDS: usize = 3;
/// The most serving-model checks one search makes (a check is one M/G/1
/// tabulation, a fraction of a millisecond).
const MAX_CHECKS: usize = 20_000;
/// Lighter members of ordinary instances tried for each member of a rich
/// one, lightest first.
const SWAP_TRIES: usize = 64;

/// The smallest primary profile, its memory-rich variant and the start
/// where the variant costs nothing.
type Widening = (&'static MigProfile, &'static MigProfile, u8);

/// Plans `problem` with light services in shared instances: packs them,
/// lets the optimal planner place each shared instance as a segment of its
/// own beside the dedicated ones, tries memory-rich instances (see the
/// module documentation), and unfolds the result.
pub(crate) fn plan_shared(problem: &Problem<'_>) -> Result<Plan, PlanError> {
    let packing = pack(problem)?;
    let stand_ins = stand_ins(&packing, problem.catalog)?;
    let placing =
        Problem { catalog: &stand_ins.catalog, services: &stand_ins.services, points: None, ..problem.clone() };
    let plan = plan_optimal(&placing)?;
    if let Some(richer) = plan_with_rich_instances(problem, &packing, &plan, &stand_ins.names)? {
        return Ok(richer);
    }
    Ok(unfold(plan, &packing, &stand_ins, problem))
}

/// Plans `packing` again with memory-rich shared instances where `placed`
/// (the optimal placement of its stand-ins) shows room for them: the plan,
/// unfolded, when it needs fewer GPUs than `placed`; `None` otherwise.
pub(crate) fn plan_with_rich_instances(
    problem: &Problem<'_>,
    packing: &Packing,
    placed: &Plan,
    shared_names: &[String],
) -> Result<Option<Plan>, PlanError> {
    let Some(widening) = packing.gpu_model.spec().memory_widening() else { return Ok(None) };
    let shared: HashSet<&str> = shared_names.iter().map(String::as_str).collect();
    let mut slots = placed.gpus.iter().filter(|gpu| widening_slot(gpu, &shared, widening).is_some()).count();
    for _ in 0..ROUNDS {
        if slots == 0 {
            break;
        }
        let Some(enriched) = enrich(problem, packing, slots, widening) else { break };
        let stand_ins = stand_ins(&enriched, problem.catalog)?;
        let placing =
            Problem { catalog: &stand_ins.catalog, services: &stand_ins.services, points: None, ..problem.clone() };
        let mut plan = plan_optimal(&placing)?;
        if plan.gpu_count >= placed.gpu_count {
            break;
        }
        let (primary, _, _) = widening;
        let needs_rich = |(size, members): &(u8, Vec<tessera_core::SharedMember>)| {
            *size == primary.compute_slices
                && members.iter().map(|m| m.memory_gb).sum::<f64>() > f64::from(primary.memory_gb)
        };
        let rich: HashSet<&str> = stand_ins
            .names
            .iter()
            .zip(&enriched.instances)
            .filter(|(_, instance)| needs_rich(instance))
            .map(|(name, _)| name.as_str())
            .collect();
        let shared: HashSet<&str> = stand_ins.names.iter().map(String::as_str).collect();
        match widen(&mut plan, &shared, &rich, widening) {
            Ok(()) => return Ok(Some(unfold(plan, &enriched, &stand_ins, problem))),
            Err(available) if available < slots => slots = available,
            Err(_) => break,
        }
    }
    Ok(None)
}

/// Where `gpu` can take a rich instance: the index of the smallest shared
/// instance (named in `shared`) that would move to the widening start, and
/// the index of the instance now at that start, if any (a smallest
/// instance it swaps places with). `None` when anything else uses the rich
/// variant's memory there, or no smallest shared instance is on the GPU.
fn widening_slot(gpu: &GpuAssignment, shared: &HashSet<&str>, widening: Widening) -> Option<(usize, Option<usize>)> {
    let (primary, rich, start) = widening;
    let rich_mask = Placement { profile: rich, start }.memory_mask();
    let spec = gpu.gpu_model.spec();
    let mut at_start = None;
    for (k, instance) in gpu.instances.iter().enumerate() {
        let profile = spec.profile_by_name(&instance.profile).ok()?;
        let taken = Placement { profile, start: instance.start }.memory_mask();
        if taken & rich_mask == 0 {
            continue;
        }
        if !std::ptr::eq(profile, primary) || instance.start != start {
            return None;
        }
        at_start = Some(k);
    }
    if !gpu.shared.is_empty() {
        // Only a placed plan of stand-ins is widened: it has no shared
        // instance of its own whose memory the loop above would miss.
        return None;
    }
    let is_shared_smallest =
        |k: &usize| shared.contains(gpu.instances[*k].service.as_str()) && gpu.instances[*k].profile == primary.name;
    let mover = at_start.filter(is_shared_smallest).or_else(|| (0..gpu.instances.len()).find(is_shared_smallest))?;
    Some((mover, at_start.filter(|&k| k != mover)))
}

/// Puts every stand-in named in `rich` at a widening slot of `plan` (a
/// placed plan of stand-ins, `shared` naming them all) as the rich profile,
/// swapping stand-ins (they are alike) and, on a slot's GPU only, the
/// places of two smallest instances; the number of slots when they are
/// too few.
fn widen(plan: &mut Plan, shared: &HashSet<&str>, rich: &HashSet<&str>, widening: Widening) -> Result<(), usize> {
    let (_, rich_profile, start) = widening;
    let slots: Vec<(usize, usize, Option<usize>)> = plan
        .gpus
        .iter()
        .enumerate()
        .filter_map(|(g, gpu)| widening_slot(gpu, shared, widening).map(|(mover, at_start)| (g, mover, at_start)))
        .collect();
    let rich_places: Vec<(usize, usize)> = plan
        .gpus
        .iter()
        .enumerate()
        .flat_map(|(g, gpu)| {
            gpu.instances
                .iter()
                .enumerate()
                .filter(|(_, instance)| rich.contains(instance.service.as_str()))
                .map(move |(k, _)| (g, k))
        })
        .collect();
    if rich_places.len() > slots.len() {
        return Err(slots.len());
    }
    // A rich stand-in that is a slot's mover keeps that slot; the others
    // trade names with the movers of the slots left (none of them rich).
    let mut used = vec![false; slots.len()];
    let mut waiting = Vec::new();
    for place in rich_places {
        match slots.iter().position(|&(g, mover, _)| (g, mover) == place) {
            Some(slot) => used[slot] = true,
            None => waiting.push(place),
        }
    }
    for (g, k) in waiting {
        let Some(slot) = used.iter().position(|&taken| !taken) else { return Err(slots.len()) };
        used[slot] = true;
        let (slot_gpu, mover, _) = slots[slot];
        let name = std::mem::take(&mut plan.gpus[g].instances[k].service);
        let displaced = std::mem::replace(&mut plan.gpus[slot_gpu].instances[mover].service, name);
        plan.gpus[g].instances[k].service = displaced;
    }
    for (&(g, mover, at_start), _) in slots.iter().zip(&used).filter(|(_, &taken)| taken) {
        let gpu = &mut plan.gpus[g];
        if let Some(other) = at_start {
            gpu.instances[other].start = gpu.instances[mover].start;
        }
        gpu.instances[mover].start = start;
        gpu.instances[mover].profile = rich_profile.name.to_string();
    }
    Ok(())
}

/// One shared instance in the search: its members and whether it is rich.
#[derive(Debug, Clone)]
struct Bin {
    members: Vec<Candidate>,
    rich: bool,
}

impl Bin {
    fn busy(&self) -> f64 {
        self.members.iter().map(|(busy, ..)| busy).sum()
    }
}

/// The search's limits and its count of checks.
struct Search {
    margin: f64,
    smallest_gb: f64,
    rich_gb: f64,
    checks: usize,
}

impl Search {
    /// Whether `members` fit one instance (rich or not): memory, count and
    /// every member's SLO at the margin. `false` once the checks run out.
    fn fits<'a>(&mut self, members: impl Iterator<Item = &'a Candidate> + Clone, rich: bool) -> bool {
        let capacity_gb = if rich { self.rich_gb } else { self.smallest_gb };
        let memory_gb: f64 = members.clone().map(|(_, member, _)| member.memory_gb).sum();
        let judged: Vec<Member> = members.map(|(_, _, judged)| *judged).collect();
        if judged.len() > MAX_MEMBERS || memory_gb > capacity_gb || self.checks >= MAX_CHECKS {
            return false;
        }
        self.checks += 1;
        all_meet(&judged, self.margin)
    }

    /// Swaps each rich bin's members, heaviest first, for the lightest
    /// members of ordinary bins that both bins still take (each ordinary
    /// member swapped at most once a call).
    fn lighten(&mut self, bins: &mut [Bin]) {
        let mut lighter: Vec<(f64, usize, usize)> = bins
            .iter()
            .enumerate()
            .filter(|(_, bin)| !bin.rich)
            .flat_map(|(i, bin)| bin.members.iter().enumerate().map(move |(j, member)| (member.0, i, j)))
            .collect();
        lighter.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut swapped = vec![false; lighter.len()];
        let rich: Vec<usize> = (0..bins.len()).filter(|&r| bins[r].rich).collect();
        for r in rich {
            let mut order: Vec<usize> = (0..bins[r].members.len()).collect();
            order.sort_by(|&a, &b| bins[r].members[b].0.total_cmp(&bins[r].members[a].0));
            for b in order {
                let heavy = bins[r].members[b].0;
                let tries = (0..lighter.len())
                    .filter(|&t| !swapped[t] && lighter[t].0 < heavy * 0.999)
                    .take(SWAP_TRIES)
                    .collect::<Vec<usize>>();
                for t in tries {
                    let (_, i, j) = lighter[t];
                    let (into_rich, into_ordinary) = (&bins[i].members[j], &bins[r].members[b]);
                    let ordinary =
                        bins[i].members.iter().enumerate().map(|(k, m)| if k == j { into_ordinary } else { m });
                    let rich = bins[r].members.iter().enumerate().map(|(k, m)| if k == b { into_rich } else { m });
                    if self.fits(ordinary, false) && self.fits(rich, true) {
                        let heavier = bins[r].members[b].clone();
                        bins[r].members[b] = std::mem::replace(&mut bins[i].members[j], heavier);
                        swapped[t] = true;
                        break;
                    }
                }
            }
        }
    }

    /// Gives up the least busy ordinary bin whose members all find room in
    /// other bins; `false` when none can be given up.
    fn empty_one(&mut self, bins: &mut Vec<Bin>) -> bool {
        let mut targets: Vec<usize> = (0..bins.len()).filter(|&t| !bins[t].rich).collect();
        targets.sort_by(|&a, &b| bins[a].busy().total_cmp(&bins[b].busy()));
        for target in targets {
            let mut leaving = bins[target].members.clone();
            leaving.sort_by(|a, b| b.0.total_cmp(&a.0));
            let mut moved: Vec<usize> = Vec::new();
            for member in &leaving {
                let mut homes: Vec<usize> = (0..bins.len()).filter(|&k| k != target).collect();
                homes.sort_by(|&a, &b| bins[a].busy().total_cmp(&bins[b].busy()));
                let home = homes.into_iter().find(|&k| {
                    let rich = bins[k].rich;
                    self.fits(bins[k].members.iter().chain(std::iter::once(member)), rich)
                });
                match home {
                    Some(k) => {
                        bins[k].members.push(member.clone());
                        moved.push(k);
                    }
                    None => break,
                }
            }
            if moved.len() == leaving.len() {
                bins.remove(target);
                return true;
            }
            for k in moved {
                bins[k].members.pop();
            }
            if self.checks >= MAX_CHECKS {
                return false;
            }
        }
        false
    }
}

/// `packing` with fewer smallest instances, `slots` of them rich (see the
/// module documentation); `None` when the search gives up none.
fn enrich(problem: &Problem<'_>, packing: &Packing, slots: usize, widening: Widening) -> Option<Packing> {
    let (primary, rich, _) = widening;
    let by_name: HashMap<&str, &ServiceSlo> = problem.services.iter().map(|slo| (slo.service.as_str(), slo)).collect();
    let mut others = Vec::new();
    let mut bins = Vec::new();
    for (size, members) in &packing.instances {
        if *size != primary.compute_slices {
            others.push((*size, members.clone()));
            continue;
        }
        let judged: Option<Vec<Candidate>> = members
            .iter()
            .map(|member| {
                let slo = by_name.get(member.service.as_str())?;
                candidate(problem, packing.gpu_model, *size, slo).map(|(judged, _)| judged)
            })
            .collect();
        bins.push(Bin { members: judged?, rich: false });
    }
    let mut by_busy: Vec<usize> = (0..bins.len()).collect();
    by_busy.sort_by(|&a, &b| bins[a].busy().total_cmp(&bins[b].busy()));
    for &k in by_busy.iter().take(slots) {
        bins[k].rich = true;
    }
    let mut search = Search {
        margin: problem.margin,
        smallest_gb: f64::from(primary.memory_gb),
        rich_gb: f64::from(rich.memory_gb),
        checks: 0,
    };
    let before = bins.len();
    loop {
        search.lighten(&mut bins);
        if !search.empty_one(&mut bins) {
            break;
        }
    }
    if bins.len() >= before {
        return None;
    }
    let smallest =
        bins.into_iter().map(|bin| (primary.compute_slices, bin.members.into_iter().map(|(_, m, _)| m).collect()));
    Some(Packing { instances: others.into_iter().chain(smallest).collect(), ..packing.clone() })
}

#[cfg(test)]
mod tests {
    use tessera_core::synthetic::builtin_catalog;
    use tessera_core::{GpuModel, ServiceSlo, Sharing};

    use super::*;
    use crate::latency::LatencyRule;
    use crate::verification::{verify_plan, CheckOptions};
    use crate::{plan, PlanInputs, PlanRequest, ProfileOrigin, ReplanFrom};

    /// A long tail over five synthetic models: service i at
    /// max(1, round(200 / (i + 1)^1.1)) req/s, 400 ms at p99.
    fn long_tail(services: usize) -> Vec<ServiceSlo> {
        let models = ["resnet50", "mobilenetv2", "bert-base", "gpt2", "vit-b16"];
        (0..services)
            .map(|i| {
                let rate_rps = (200.0 / ((i + 1) as f64).powf(1.1)).round().max(1.0);
                ServiceSlo::new(format!("s{i}"), models[i % models.len()], rate_rps, 400.0).unwrap()
            })
            .collect()
    }

    #[test]
    fn memory_rich_instances_where_memory_idles_save_a_gpu_and_the_plan_verifies() {
        let (catalog, services) = (builtin_catalog(), long_tail(90));
        let problem = Problem {
            rule: LatencyRule::Percentile,
            margin: 0.06,
            ..Problem::parva(GpuModel::A100_80GB, &catalog, &services)
        };
        let packing = pack(&problem).unwrap();
        let stand_ins = stand_ins(&packing, problem.catalog).unwrap();
        let placing =
            Problem { catalog: &stand_ins.catalog, services: &stand_ins.services, points: None, ..problem.clone() };
        let without = plan_optimal(&placing).unwrap();
        let with = plan_with_rich_instances(&problem, &packing, &without, &stand_ins.names).unwrap();
        let with = with.expect("rich instances save a GPU here");
        assert!(with.gpu_count < without.gpu_count, "{} vs {}", with.gpu_count, without.gpu_count);

        // The planner's own path makes the same plan; it verifies, and every
        // 1g.20gb instance sits at start 6 with members needing more than 10 GB.
        let inputs =
            PlanInputs::new(services.clone(), builtin_catalog(), ProfileOrigin::Synthetic, &[GpuModel::A100_80GB])
                .unwrap();
        let planned =
            plan(&PlanRequest { share: Some(Sharing::Serialized), ..PlanRequest::new(&inputs) }).unwrap().plan;
        assert_eq!(planned.gpu_count, with.gpu_count);
        let rich: Vec<&tessera_core::SharedInstance> =
            planned.shared_instances().map(|(_, shared)| shared).filter(|shared| shared.profile == "1g.20gb").collect();
        assert!(!rich.is_empty());
        assert!(rich.iter().all(|shared| shared.start == 6 && shared.memory_gb() > 10.0 && shared.memory_gb() <= 20.0));
        let verified = verify_plan(&planned, &inputs, CheckOptions::default()).unwrap();
        assert!(verified.violations.is_empty(), "{:?}", verified.violations);
        assert!(planned.services.iter().all(|report| report.met));

        // Replanned from itself, every instance stays as it runs, the
        // 1g.20gb ones included, and the replan verifies.
        let from = ReplanFrom {
            current: &planned,
            max_extra_gpus: 0,
            drained: Vec::new(),
            lost: Vec::new(),
            within_layouts: false,
        };
        let request = PlanRequest { share: Some(Sharing::Serialized), from: Some(from), ..PlanRequest::new(&inputs) };
        let replanned = plan(&request).unwrap().plan;
        assert_eq!(replanned.gpus, planned.gpus);
        let verified = verify_plan(&replanned, &inputs, CheckOptions::default()).unwrap();
        assert!(verified.violations.is_empty(), "{:?}", verified.violations);
    }

    /// One GPU of 1g instances at `starts` (a 3g.40gb at 4 where `with_3g`);
    /// those at `shared` starts run a stand-in named `shared`.
    fn gpu(starts: &[u8], shared: &[u8], with_3g: bool) -> GpuAssignment {
        let instance = |profile: &str, size: u8, start: u8| tessera_core::InstanceAssignment {
            profile: profile.to_string(),
            size,
            start,
            service: if shared.contains(&start) { "shared".to_string() } else { format!("d{start}") },
            model: "m".to_string(),
            batch: 1,
            procs: 1,
            throughput_rps: 100.0,
            latency_ms: 10.0,
            capacity_rps: None,
        };
        let mut instances: Vec<_> = starts.iter().map(|&start| instance("1g.10gb", 1, start)).collect();
        if with_3g {
            instances.push(instance("3g.40gb", 3, 4));
        }
        GpuAssignment::dedicated(0, 0, GpuModel::A100_80GB, instances)
    }

    #[test]
    fn a_gpu_takes_a_rich_instance_only_where_its_memory_idles() {
        let widening = GpuModel::A100_80GB.spec().memory_widening().unwrap();
        let shared = HashSet::from(["shared"]);
        // Seven 1g: the shared one at 2 trades places with the dedicated one at 6.
        assert_eq!(widening_slot(&gpu(&[0, 1, 2, 3, 4, 5, 6], &[2], false), &shared, widening), Some((2, Some(6))));
        // The shared one at 6 widens where it is.
        assert_eq!(widening_slot(&gpu(&[0, 1, 2, 3, 4, 5, 6], &[6], false), &shared, widening), Some((6, None)));
        // Slice 6 free: the shared one moves there.
        assert_eq!(widening_slot(&gpu(&[0, 1, 2, 3], &[3], false), &shared, widening), Some((3, None)));
        // A 3g.40gb at 4 holds slices 4-7; no shared instance, no slot.
        assert_eq!(widening_slot(&gpu(&[0, 1, 2, 3], &[0], true), &shared, widening), None);
        assert_eq!(widening_slot(&gpu(&[0, 1, 2, 3, 4, 5, 6], &[], false), &shared, widening), None);
    }
}
