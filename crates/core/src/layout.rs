//! The MIG placement lattice: which sets of (profile, start) one GPU accepts.
//!
//! A layout is valid iff every instance starts at a memory slice its profile
//! allows, no profile appears more often than its maximum, and no two
//! instances share a memory slice. Planners mostly reason about the
//! *multiset of sizes* on a GPU ([`SizeCounts`]); a [`Lattice`] answers
//! whether a multiset is realizable and turns it into explicit starts.

use std::collections::HashSet;
use std::fmt;

use crate::gpu::{GpuModel, MigProfile};

use crate::error::LayoutError;

/// One MIG instance on a GPU: a profile at a start memory slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The instance's profile.
    pub profile: &'static MigProfile,
    /// The first memory slice it occupies.
    pub start: u8,
}

impl Placement {
    /// Bit mask of the memory slices this instance occupies.
    pub fn memory_mask(&self) -> u16 {
        slice_mask(self.start, self.profile.memory_slices)
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.profile.name, self.start)
    }
}

fn slice_mask(start: u8, count: u8) -> u16 {
    (((1u32 << count) - 1) << start) as u16
}

/// Checks one GPU's layout against the placement rules of its model.
pub fn validate_layout(model: GpuModel, placements: &[Placement]) -> Result<(), LayoutError> {
    let spec = model.spec();
    for placement in placements {
        let profile = placement.profile;
        if !spec.profiles.iter().any(|p| std::ptr::eq(p, profile)) {
            return Err(LayoutError::ForeignProfile { gpu: spec.id, profile: profile.name });
        }
        if !profile.starts.contains(&placement.start) {
            return Err(LayoutError::InvalidStart {
                gpu: spec.id,
                profile: profile.name,
                start: placement.start,
                valid: profile.starts,
            });
        }
        let count = placements.iter().filter(|p| std::ptr::eq(p.profile, profile)).count();
        if count > usize::from(profile.max_count) {
            return Err(LayoutError::TooMany { gpu: spec.id, profile: profile.name, count, max: profile.max_count });
        }
    }
    for (i, first) in placements.iter().enumerate() {
        if let Some(second) = placements[i + 1..].iter().find(|second| first.memory_mask() & second.memory_mask() != 0)
        {
            return Err(LayoutError::Overlap { gpu: spec.id, first: first.to_string(), second: second.to_string() });
        }
    }
    Ok(())
}

/// The first start at which an instance of `profile` fits beside
/// `placements` on a GPU of `model`: a start its profile allows, on memory
/// slices no instance holds, within the profile's most instances per GPU.
/// `None` when it fits nowhere, or when `placements` is not a valid layout.
/// The same answer as [`validate_layout`] of `placements` with the instance
/// added, without building an error for each start that does not fit.
pub fn free_start(model: GpuModel, placements: &[Placement], profile: &'static MigProfile) -> Option<u8> {
    validate_layout(model, placements).ok()?;
    let spec = model.spec();
    let of_profile = placements.iter().filter(|p| std::ptr::eq(p.profile, profile)).count();
    if !spec.profiles.iter().any(|p| std::ptr::eq(p, profile)) || of_profile >= usize::from(profile.max_count) {
        return None;
    }
    let used = placements.iter().fold(0u16, |used, placement| used | placement.memory_mask());
    profile.starts.iter().copied().find(|&start| slice_mask(start, profile.memory_slices) & used == 0)
}

/// How many instances of each size (compute slices) a GPU holds.
///
/// Index `s` counts the instances with `s` compute slices; index 0 is unused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SizeCounts([u32; 8]);

impl SizeCounts {
    /// The empty multiset.
    pub const EMPTY: SizeCounts = SizeCounts([0; 8]);

    /// The multiset of the given sizes.
    ///
    /// # Panics
    /// If a size exceeds 7 (no GPU has more compute slices).
    pub fn from_sizes(sizes: impl IntoIterator<Item = u8>) -> Self {
        let mut counts = SizeCounts::EMPTY;
        for size in sizes {
            counts = counts.with(size);
        }
        counts
    }

    /// This multiset plus one instance of `size`.
    ///
    /// # Panics
    /// If `size` exceeds 7.
    #[must_use]
    pub fn with(mut self, size: u8) -> Self {
        self.0[usize::from(size)] += 1;
        self
    }

    /// This multiset minus one instance of `size` (unchanged if absent).
    #[must_use]
    pub fn without(mut self, size: u8) -> Self {
        let slot = &mut self.0[usize::from(size)];
        *slot = slot.saturating_sub(1);
        self
    }

    /// The union of two multisets (counts added).
    #[must_use]
    pub fn plus(mut self, other: &SizeCounts) -> Self {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine += theirs;
        }
        self
    }

    /// This multiset less `other` (counts subtracted, floored at zero).
    #[must_use]
    pub fn minus(mut self, other: &SizeCounts) -> Self {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine = mine.saturating_sub(theirs);
        }
        self
    }

    /// This multiset plus `n` instances of `size`.
    #[must_use]
    pub fn with_n(mut self, size: u8, n: u32) -> Self {
        self.0[usize::from(size)] += n;
        self
    }

    /// Number of instances of `size`.
    pub fn count(&self, size: u8) -> u32 {
        self.0[usize::from(size)]
    }

    /// Total compute slices used.
    pub fn compute_slices(&self) -> u32 {
        (1..8u8).map(|size| u32::from(size) * self.0[usize::from(size)]).sum()
    }

    /// Number of instances.
    pub fn len(&self) -> usize {
        self.0.iter().map(|&c| c as usize).sum()
    }

    /// `true` when there is no instance.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `true` when every count here is at most the one in `other`.
    pub fn is_subset_of(&self, other: &SizeCounts) -> bool {
        self.0.iter().zip(other.0.iter()).all(|(a, b)| a <= b)
    }

    /// The sizes, largest first, with repetition.
    pub fn sizes_desc(&self) -> impl Iterator<Item = u8> + '_ {
        (1..8u8).rev().flat_map(move |size| std::iter::repeat_n(size, self.0[usize::from(size)] as usize))
    }
}

impl fmt::Display for SizeCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("empty");
        }
        let parts: Vec<String> = self.sizes_desc().map(|s| format!("{s}g")).collect();
        f.write_str(&parts.join("+"))
    }
}

/// The placement lattice of one GPU model over its primary profiles.
///
/// Built once per model (a few microseconds), then answers realizability
/// queries with a hash lookup.
#[derive(Debug, Clone)]
pub struct Lattice {
    model: GpuModel,
    /// Maximal layouts, the ones with the most compute first.
    maximal: Vec<Vec<Placement>>,
    realizable: HashSet<SizeCounts>,
}

impl Lattice {
    /// Enumerates the lattice of `model`.
    pub fn new(model: GpuModel) -> Self {
        let spec = model.spec();
        let candidates: Vec<Placement> = spec
            .primary_profiles()
            .flat_map(|profile| profile.starts.iter().map(move |&start| Placement { profile, start }))
            .collect();
        let mut maximal = Vec::new();
        collect_maximal(&candidates, 0, 0, &mut Vec::new(), &mut maximal);
        maximal.sort_by_key(|layout: &Vec<Placement>| {
            let compute: u8 = layout.iter().map(|p| p.profile.compute_slices).sum();
            (std::cmp::Reverse(compute), layout.len())
        });
        let mut realizable = HashSet::new();
        for layout in &maximal {
            let counts = SizeCounts::from_sizes(layout.iter().map(|p| p.profile.compute_slices));
            insert_sub_multisets(counts, &mut realizable);
        }
        Lattice { model, maximal, realizable }
    }

    /// The GPU model of this lattice.
    pub fn model(&self) -> GpuModel {
        self.model
    }

    /// The maximal layouts: valid layouts to which no instance can be added.
    pub fn maximal_layouts(&self) -> &[Vec<Placement>] {
        &self.maximal
    }

    /// The multisets of sizes of the maximal layouts that no other maximal
    /// multiset contains.
    pub fn maximal_size_sets(&self) -> Vec<SizeCounts> {
        let all: HashSet<SizeCounts> = self
            .maximal
            .iter()
            .map(|layout| SizeCounts::from_sizes(layout.iter().map(|p| p.profile.compute_slices)))
            .collect();
        let mut maximal: Vec<SizeCounts> = all
            .iter()
            .filter(|counts| !all.iter().any(|other| other != *counts && counts.is_subset_of(other)))
            .copied()
            .collect();
        maximal.sort();
        maximal
    }

    /// `true` when some valid layout holds exactly these sizes.
    pub fn is_realizable(&self, counts: &SizeCounts) -> bool {
        self.realizable.contains(counts)
    }

    /// Every realizable multiset (the empty one included).
    pub fn realizable_sets(&self) -> impl Iterator<Item = &SizeCounts> {
        self.realizable.iter()
    }

    /// Explicit placements for these sizes, or `None` if no layout holds them.
    ///
    /// The placements are a subset of the first maximal layout (most compute
    /// first) that contains the multiset, so the GPU can still be filled up
    /// to that layout later; e.g. a lone 3g goes to start 4, because a 3g at
    /// start 0 strands the seventh compute slice.
    pub fn realize(&self, counts: &SizeCounts) -> Option<Vec<Placement>> {
        let layout = self.maximal.iter().find(|layout| {
            counts.is_subset_of(&SizeCounts::from_sizes(layout.iter().map(|p| p.profile.compute_slices)))
        })?;
        let mut remaining = *counts;
        let mut placements: Vec<Placement> = layout
            .iter()
            .filter(|placement| {
                let size = placement.profile.compute_slices;
                let keep = remaining.count(size) > 0;
                remaining = remaining.without(size);
                keep
            })
            .copied()
            .collect();
        placements.sort_by_key(|p| (std::cmp::Reverse(p.profile.compute_slices), p.start));
        Some(placements)
    }
}

fn collect_maximal(
    candidates: &[Placement],
    next: usize,
    used: u16,
    chosen: &mut Vec<Placement>,
    out: &mut Vec<Vec<Placement>>,
) {
    if next == candidates.len() {
        let fits = |p: &Placement| {
            let count = chosen.iter().filter(|c| std::ptr::eq(c.profile, p.profile)).count();
            p.memory_mask() & used == 0 && count < usize::from(p.profile.max_count)
        };
        if !candidates.iter().any(fits) {
            let mut layout = chosen.clone();
            layout.sort_by_key(|p| (p.start, std::cmp::Reverse(p.profile.compute_slices)));
            out.push(layout);
        }
        return;
    }
    let candidate = candidates[next];
    let count = chosen.iter().filter(|c| std::ptr::eq(c.profile, candidate.profile)).count();
    if candidate.memory_mask() & used == 0 && count < usize::from(candidate.profile.max_count) {
        chosen.push(candidate);
        collect_maximal(candidates, next + 1, used | candidate.memory_mask(), chosen, out);
        chosen.pop();
    }
    collect_maximal(candidates, next + 1, used, chosen, out);
}

fn insert_sub_multisets(counts: SizeCounts, into: &mut HashSet<SizeCounts>) {
    if !into.insert(counts) {
        return;
    }
    for size in 1..8u8 {
        if counts.count(size) > 0 {
            insert_sub_multisets(counts.without(size), into);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(model: GpuModel, name: &str, start: u8) -> Placement {
        Placement { profile: model.spec().profile_by_name(name).unwrap(), start }
    }

    #[test]
    fn a100_has_19_maximal_layouts_and_12_maximal_size_sets() {
        let lattice = Lattice::new(GpuModel::A100_80GB);
        assert_eq!(lattice.maximal_layouts().len(), 19);
        assert_eq!(lattice.maximal_size_sets().len(), 12);
        for layout in lattice.maximal_layouts() {
            validate_layout(GpuModel::A100_80GB, layout).unwrap();
        }
    }

    #[test]
    fn every_seven_slice_model_shares_the_a100_lattice_shape() {
        for model in [GpuModel::A100_40GB, GpuModel::H100_80GB, GpuModel::H100_94GB, GpuModel::H200_141GB] {
            assert_eq!(Lattice::new(model).maximal_layouts().len(), 19, "{model}");
        }
    }

    #[test]
    fn a30_lattice() {
        let lattice = Lattice::new(GpuModel::A30_24GB);
        // 4g | 2g+2g | 2g+1g+1g (two ways) | 1g x4
        assert_eq!(lattice.maximal_layouts().len(), 5);
        assert!(lattice.is_realizable(&SizeCounts::from_sizes([2, 1, 1])));
        assert!(!lattice.is_realizable(&SizeCounts::from_sizes([4, 1])));
    }

    #[test]
    fn rejects_invalid_starts_overlaps_and_excess() {
        let m = GpuModel::A100_80GB;
        let error = validate_layout(m, &[place(m, "3g.40gb", 2)]).unwrap_err();
        assert!(matches!(error, LayoutError::InvalidStart { start: 2, .. }));
        // 2g at 0 covers memory slices 0-1, so a 1g at 1 collides.
        let error = validate_layout(m, &[place(m, "2g.20gb", 0), place(m, "1g.10gb", 1)]).unwrap_err();
        assert!(matches!(error, LayoutError::Overlap { .. }), "{error}");
        let error = validate_layout(m, &[place(m, "4g.40gb", 0), place(m, "4g.40gb", 0)]).unwrap_err();
        assert!(matches!(error, LayoutError::TooMany { .. } | LayoutError::Overlap { .. }));
        let foreign = place(GpuModel::A100_40GB, "3g.20gb", 4);
        assert!(matches!(validate_layout(m, &[foreign]), Err(LayoutError::ForeignProfile { .. })));
        validate_layout(m, &[place(m, "4g.40gb", 0), place(m, "3g.40gb", 4)]).unwrap();
    }

    #[test]
    fn free_start_is_the_first_start_a_validated_layout_accepts() {
        for model in [GpuModel::A100_80GB, GpuModel::A30_24GB, GpuModel::H200_141GB] {
            let spec = model.spec();
            for layout in Lattice::new(model).maximal_layouts() {
                // Every sub-layout of a maximal one, and each profile beside it.
                for subset in 0..1u32 << layout.len() {
                    let placements: Vec<Placement> =
                        (0..layout.len()).filter(|i| subset >> i & 1 == 1).map(|i| layout[i]).collect();
                    for profile in spec.profiles {
                        let validated = profile.starts.iter().copied().find(|&start| {
                            let with: Vec<Placement> =
                                placements.iter().copied().chain([Placement { profile, start }]).collect();
                            validate_layout(model, &with).is_ok()
                        });
                        assert_eq!(free_start(model, &placements, profile), validated, "{model} {profile:?}");
                    }
                }
            }
        }
        let m = GpuModel::A100_80GB;
        let overlapping = [place(m, "2g.20gb", 0), place(m, "1g.10gb", 1)];
        assert_eq!(free_start(m, &overlapping, place(m, "1g.10gb", 6).profile), None);
        assert_eq!(free_start(m, &[], place(GpuModel::A100_40GB, "1g.5gb", 0).profile), None);
    }

    #[test]
    fn realizability_follows_memory_slices_not_just_compute() {
        let lattice = Lattice::new(GpuModel::A100_80GB);
        assert!(lattice.is_realizable(&SizeCounts::from_sizes([3, 3])));
        assert!(lattice.is_realizable(&SizeCounts::from_sizes([4, 2, 1])));
        assert!(lattice.is_realizable(&SizeCounts::from_sizes([3, 2, 1, 1])));
        // Seven compute slices, but 3g+3g needs all eight memory slices.
        assert!(!lattice.is_realizable(&SizeCounts::from_sizes([3, 3, 1])));
        assert!(!lattice.is_realizable(&SizeCounts::from_sizes([4, 3, 1])));
        assert!(!lattice.is_realizable(&SizeCounts::from_sizes([2, 2, 2, 2])));
        assert!(lattice.is_realizable(&SizeCounts::EMPTY));
    }

    #[test]
    fn realize_gives_valid_starts_that_leave_room_to_fill_the_gpu() {
        let model = GpuModel::A100_80GB;
        let lattice = Lattice::new(model);
        let lone_three = lattice.realize(&SizeCounts::from_sizes([3])).unwrap();
        assert_eq!(lone_three[0].start, 4);
        for counts in lattice.realizable_sets() {
            let placements = lattice.realize(counts).unwrap();
            validate_layout(model, &placements).unwrap();
            assert_eq!(SizeCounts::from_sizes(placements.iter().map(|p| p.profile.compute_slices)), *counts);
        }
        assert!(lattice.realize(&SizeCounts::from_sizes([7, 1])).is_none());
    }

    #[test]
    fn size_counts_arithmetic() {
        let counts = SizeCounts::from_sizes([1, 3, 1]);
        assert_eq!(counts.compute_slices(), 5);
        assert_eq!(counts.len(), 3);
        assert_eq!(counts.to_string(), "3g+1g+1g");
        assert_eq!(counts.without(1).without(1).without(1).to_string(), "3g");
        assert!(SizeCounts::from_sizes([1]).is_subset_of(&counts));
        let more = counts.plus(&SizeCounts::from_sizes([7])).with_n(2, 3);
        assert_eq!(more.to_string(), "7g+3g+2g+2g+2g+1g+1g");
        assert_eq!(more.minus(&counts).minus(&SizeCounts::from_sizes([1])).to_string(), "7g+2g+2g+2g");
    }
}
