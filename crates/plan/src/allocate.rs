//! ParvaGPU's Segment Allocator on the real MIG placement lattice.
//!
//! Segments are placed largest first, each on the GPU it fits best — the
//! one left with the fewest free compute slices, the lowest index on ties —
//! where "fits" means the GPU's multiset of instance sizes stays realizable
//! on the lattice (ParvaGPU only counted free slices and tracked start slots,
//! which admits layouts the driver rejects). A segment that fits nowhere
//! opens a new GPU: the fleet is unbounded and nothing is dropped.
//!
//! Then GPUs holding four compute slices or fewer are dissolved, from the
//! last GPU to the first: each of their segments is replaced by 2g and 1g
//! pieces that carry the same throughput, re-placed best-fit, so that small
//! pieces fill holes elsewhere and the emptied GPU is freed.

use std::collections::{BTreeSet, HashMap};

use tessera_core::{Lattice, ProfilePoint, SizeCounts};

/// A segment of one service in one configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Index of the service in the request's service list.
    pub service: usize,
    /// Its configuration and performance.
    pub point: ProfilePoint,
}

impl Segment {
    fn size(&self) -> u8 {
        self.point.config.size_gpcs
    }
}

/// GPUs of one model being filled with segments.
#[derive(Debug)]
pub struct Fleet<'l> {
    lattice: &'l Lattice,
    capacity_gpcs: u32,
    gpus: Vec<Vec<Segment>>,
    counts: Vec<SizeCounts>,
    /// GPU indices grouped by their current multiset of sizes.
    by_counts: HashMap<SizeCounts, BTreeSet<usize>>,
    /// Most instances of each size per GPU, on top of the lattice's rules.
    size_caps: [u32; 8],
}

impl<'l> Fleet<'l> {
    /// An empty fleet of GPUs of the lattice's model.
    pub fn new(lattice: &'l Lattice) -> Self {
        Fleet {
            lattice,
            capacity_gpcs: u32::from(lattice.model().spec().compute_slices),
            gpus: Vec::new(),
            counts: Vec::new(),
            by_counts: HashMap::new(),
            size_caps: [u32::MAX; 8],
        }
    }

    /// Allows at most `cap` instances of `size` per GPU (ParvaGPU allows
    /// one 3g, keeping the other four compute slices for smaller pieces).
    #[must_use]
    pub fn with_size_cap(mut self, size: u8, cap: u32) -> Self {
        self.size_caps[usize::from(size)] = cap;
        self
    }

    /// The GPU where a segment of `size` fits best, if any does.
    pub fn best_fit(&self, size: u8) -> Option<usize> {
        self.by_counts
            .iter()
            .filter(|(counts, _)| counts.count(size) < self.size_caps[usize::from(size)])
            .filter(|(counts, _)| self.lattice.is_realizable(&counts.with(size)))
            .filter_map(|(counts, gpus)| {
                let free_after = self.capacity_gpcs - counts.compute_slices() - u32::from(size);
                gpus.first().map(|&gpu| (free_after, gpu))
            })
            .min()
            .map(|(_, gpu)| gpu)
    }

    /// Places a segment best-fit, opening a GPU if none fits; returns the GPU.
    pub fn place(&mut self, segment: Segment) -> usize {
        let gpu = self.best_fit(segment.size()).unwrap_or_else(|| {
            self.gpus.push(Vec::new());
            self.counts.push(SizeCounts::EMPTY);
            self.gpus.len() - 1
        });
        let counts = self.counts[gpu];
        self.set_counts(gpu, counts, counts.with(segment.size()));
        self.gpus[gpu].push(segment);
        gpu
    }

    fn remove(&mut self, gpu: usize, position: usize) -> Segment {
        let segment = self.gpus[gpu].remove(position);
        let counts = self.counts[gpu];
        self.set_counts(gpu, counts, counts.without(segment.size()));
        segment
    }

    fn set_counts(&mut self, gpu: usize, old: SizeCounts, new: SizeCounts) {
        if let Some(set) = self.by_counts.get_mut(&old) {
            set.remove(&gpu);
            if set.is_empty() {
                self.by_counts.remove(&old);
            }
        }
        if !new.is_empty() {
            self.by_counts.entry(new).or_default().insert(gpu);
        }
        self.counts[gpu] = new;
    }

    /// Compute slices used on `gpu`.
    pub fn used_gpcs(&self, gpu: usize) -> u32 {
        self.counts[gpu].compute_slices()
    }

    /// Number of GPUs ever opened (some may have been emptied).
    pub fn len(&self) -> usize {
        self.gpus.len()
    }

    /// The segments of every non-empty GPU, in GPU order.
    pub fn into_gpus(self) -> Vec<Vec<Segment>> {
        self.gpus.into_iter().filter(|gpu| !gpu.is_empty()).collect()
    }
}

/// Places segments largest first (stable within a size), best-fit.
pub fn place_largest_first(fleet: &mut Fleet<'_>, segments: &[Segment]) {
    let mut order: Vec<&Segment> = segments.iter().collect();
    order.sort_by_key(|segment| std::cmp::Reverse(segment.size()));
    for segment in order {
        fleet.place(*segment);
    }
}

/// The 1g and 2g configurations a service may be dissolved into.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SmallPieces {
    /// Best feasible 1g configuration.
    pub one: Option<ProfilePoint>,
    /// Best feasible 2g configuration.
    pub two: Option<ProfilePoint>,
}

impl SmallPieces {
    /// Pieces covering `deficit_rps`, which is reduced by what they provide
    /// (it may turn negative: surplus carried to the service's next
    /// dissolved segment). 2g pieces are used first when they are more
    /// efficient per compute slice than 1g pieces.
    fn cover(&self, deficit_rps: &mut f64) -> Vec<ProfilePoint> {
        let mut pieces = Vec::new();
        let mut take = |point: ProfilePoint, count: f64, deficit_rps: &mut f64| {
            for _ in 0..count.max(0.0) as usize {
                pieces.push(point);
                *deficit_rps -= point.throughput_rps;
            }
        };
        match (self.one, self.two) {
            (None, None) => {}
            (Some(one), None) => take(one, (*deficit_rps / one.throughput_rps).ceil(), deficit_rps),
            (None, Some(two)) => take(two, (*deficit_rps / two.throughput_rps).ceil(), deficit_rps),
            (Some(one), Some(two)) => {
                if two.throughput_rps / 2.0 > one.throughput_rps {
                    take(two, (*deficit_rps / two.throughput_rps).floor(), deficit_rps);
                }
                take(one, (*deficit_rps / one.throughput_rps).ceil(), deficit_rps);
            }
        }
        pieces
    }
}

/// ParvaGPU's consolidation: dissolves GPUs using at most `max_used_gpcs`
/// compute slices (ParvaGPU: 4), last GPU first, into 1g/2g pieces
/// re-placed best-fit. `pieces[s]` gives service `s`'s small configurations;
/// a segment of a service with neither stays where it is.
pub fn dissolve_small_gpus(fleet: &mut Fleet<'_>, pieces: &[SmallPieces], max_used_gpcs: u32) {
    let mut deficit_rps = vec![0.0; pieces.len()];
    for gpu in (0..fleet.len()).rev() {
        if fleet.used_gpcs(gpu) > max_used_gpcs {
            continue;
        }
        let mut kept = 0;
        while kept < fleet.gpus[gpu].len() {
            let service = fleet.gpus[gpu][kept].service;
            let small = pieces[service];
            if small.one.is_none() && small.two.is_none() {
                kept += 1;
                continue;
            }
            let removed = fleet.remove(gpu, kept);
            deficit_rps[service] += removed.point.throughput_rps;
            let mut replacements = small.cover(&mut deficit_rps[service]);
            replacements.sort_by_key(|p| std::cmp::Reverse(p.config.size_gpcs));
            for point in replacements {
                let target = fleet.place(Segment { service, point });
                if target == gpu {
                    // Landed back here: keep it, do not dissolve it again.
                    let last = fleet.gpus[gpu].len() - 1;
                    fleet.gpus[gpu].swap(kept, last);
                    kept += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::{GpuModel, SegmentConfig};

    fn segment(service: usize, size_gpcs: u8, throughput_rps: f64) -> Segment {
        let config = SegmentConfig { size_gpcs, batch: 1, procs: 1 };
        Segment { service, point: ProfilePoint::new(config, throughput_rps, 1.0, None).unwrap() }
    }

    #[test]
    fn best_fit_respects_memory_slices() {
        let lattice = Lattice::new(GpuModel::A100_80GB);
        let mut fleet = Fleet::new(&lattice);
        // 3g + 3g fill all eight memory slices; a 1g must go elsewhere even
        // though one compute slice is free.
        place_largest_first(&mut fleet, &[segment(0, 3, 1.0), segment(0, 3, 1.0), segment(0, 1, 1.0)]);
        let gpus = fleet.into_gpus();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].len(), 2);
    }

    #[test]
    fn best_fit_prefers_the_fullest_gpu_then_the_lowest_index() {
        let lattice = Lattice::new(GpuModel::A100_80GB);
        let mut fleet = Fleet::new(&lattice);
        fleet.place(segment(0, 4, 1.0)); // gpu 0: 3 free
        fleet.place(segment(0, 7, 1.0)); // gpu 1: full
        fleet.place(segment(0, 4, 1.0)); // gpu 2 (4g max 1 per GPU): 3 free
        fleet.place(segment(0, 2, 1.0)); // gpu 0 or 2: lowest index
        assert_eq!(fleet.best_fit(1), Some(0), "gpu 0 has 1 free slice left");
        assert_eq!(fleet.best_fit(3), Some(2));
        assert_eq!(fleet.best_fit(7), None);
    }

    #[test]
    fn dissolving_keeps_throughput_and_frees_small_gpus() {
        let lattice = Lattice::new(GpuModel::A100_80GB);
        let mut fleet = Fleet::new(&lattice);
        // gpu 0: 4g + 2g (one slice free); gpu 1: a lone 1g of service 1
        // holding 50 rps. Dissolving gpu 1 moves the 1g into gpu 0.
        place_largest_first(&mut fleet, &[segment(0, 4, 100.0), segment(0, 2, 50.0), segment(1, 1, 50.0)]);
        assert_eq!(fleet.len(), 1, "best fit already packs it");
        let mut fleet = Fleet::new(&lattice);
        place_largest_first(&mut fleet, &[segment(0, 7, 100.0), segment(1, 3, 90.0)]);
        assert_eq!(fleet.len(), 2);
        let one = segment(1, 1, 40.0).point;
        let pieces = [SmallPieces::default(), SmallPieces { one: Some(one), two: None }];
        dissolve_small_gpus(&mut fleet, &pieces, 4);
        let gpus = fleet.into_gpus();
        let provided: f64 = gpus.iter().flatten().filter(|s| s.service == 1).map(|s| s.point.throughput_rps).sum();
        assert!(provided >= 90.0, "{provided}");
        assert_eq!(gpus.iter().flatten().filter(|s| s.service == 1).count(), 3);
    }

    #[test]
    fn segments_without_small_pieces_are_never_dropped() {
        let lattice = Lattice::new(GpuModel::A100_80GB);
        let mut fleet = Fleet::new(&lattice);
        place_largest_first(&mut fleet, &[segment(0, 3, 10.0)]);
        dissolve_small_gpus(&mut fleet, &[SmallPieces::default()], 4);
        assert_eq!(fleet.into_gpus(), vec![vec![segment(0, 3, 10.0)]]);
    }

    #[test]
    fn small_pieces_prefer_efficient_2g_then_top_up_with_1g() {
        let one = segment(0, 1, 10.0).point;
        let two = segment(0, 2, 25.0).point;
        let mut deficit = 60.0;
        let pieces = SmallPieces { one: Some(one), two: Some(two) }.cover(&mut deficit);
        let sizes: Vec<u8> = pieces.iter().map(|p| p.config.size_gpcs).collect();
        assert_eq!(sizes, vec![2, 2, 1]);
        assert!(deficit <= 0.0);
    }
}
