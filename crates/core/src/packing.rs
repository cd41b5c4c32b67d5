//! The fewest GPUs that hold a multiset of MIG instances, in closed form.
//!
//! Planners decide how many instances of each size to run; this module
//! answers how many GPUs of one model they need ([`Packer::min_gpus`]) and
//! how to group them ([`Packer::pack`]). The answer is exact for the two
//! lattice shapes MIG GPUs have (a unit test checks it against an
//! exhaustive search over [`Lattice`](crate::Lattice) layouts):
//!
//! * **7 compute / 8 memory slices** (A100, H100, H200): a 7g fills a GPU;
//!   a 4g pairs with a 3g; a lone 4g leaves 3 slices for small instances
//!   (at most one 2g), a lone 3g leaves 4 (at most two 2g), two 3g fill a
//!   GPU's memory; a GPU of small instances holds 7 slices with at most
//!   three 2g. Pairing every possible 4g with a 3g is never worse, and
//!   pairing 3g with 3g pays off only while the small instances still fit
//!   beside the lone 3g and 4g.
//! * **4 compute / 4 memory slices** (A30): a 4g fills a GPU; otherwise 4
//!   slices with at most two 2g.

use crate::gpu::GpuModel;
use crate::layout::SizeCounts;

/// Packs instance multisets onto GPUs of one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packer {
    model: GpuModel,
}

/// How one family of GPUs is cut: per kind of GPU, the small-instance room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SmallRoom {
    /// Compute slices left for 1g and 2g instances.
    slots: u64,
    /// Most 2g instances among them.
    twos: u64,
}

/// The decision for a multiset on a 7-slice GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SevenSlicePacking {
    sevens: u64,
    four_three: u64,
    three_three: u64,
    lone_fours: u64,
    lone_threes: u64,
    small_gpus: u64,
}

const LONE_FOUR: SmallRoom = SmallRoom { slots: 3, twos: 1 };
const LONE_THREE: SmallRoom = SmallRoom { slots: 4, twos: 2 };
const SEVEN_SMALL: SmallRoom = SmallRoom { slots: 7, twos: 3 };
const FOUR_SMALL: SmallRoom = SmallRoom { slots: 4, twos: 2 };

impl Packer {
    /// The packer of `model`.
    pub fn new(model: GpuModel) -> Self {
        Packer { model }
    }

    /// The fewest GPUs that hold `counts`.
    ///
    /// # Panics
    /// If `counts` holds a size the model does not offer.
    pub fn min_gpus(&self, counts: &SizeCounts) -> u64 {
        match self.model.spec().compute_slices {
            7 => seven_slice(counts).total(),
            _ => four_slice(counts).0,
        }
    }

    /// The multisets of the GPUs of a fewest-GPU packing of `counts`; each
    /// is realizable on the model's lattice.
    pub fn pack(&self, counts: &SizeCounts) -> Vec<SizeCounts> {
        match self.model.spec().compute_slices {
            7 => {
                let p = seven_slice(counts);
                let mut gpus = Vec::new();
                gpus.extend(std::iter::repeat_n(SizeCounts::from_sizes([7]), p.sevens as usize));
                gpus.extend(std::iter::repeat_n(SizeCounts::from_sizes([4, 3]), p.four_three as usize));
                gpus.extend(std::iter::repeat_n(SizeCounts::from_sizes([3, 3]), p.three_three as usize));
                let mut rooms = Vec::new();
                rooms.extend(std::iter::repeat_n((SizeCounts::from_sizes([4]), LONE_FOUR), p.lone_fours as usize));
                rooms.extend(std::iter::repeat_n((SizeCounts::from_sizes([3]), LONE_THREE), p.lone_threes as usize));
                rooms.extend(std::iter::repeat_n((SizeCounts::EMPTY, SEVEN_SMALL), p.small_gpus as usize));
                gpus.extend(fill_small(rooms, counts));
                gpus
            }
            _ => {
                let (_, fours, small_gpus) = four_slice(counts);
                let mut gpus: Vec<SizeCounts> =
                    std::iter::repeat_n(SizeCounts::from_sizes([4]), fours as usize).collect();
                let rooms = std::iter::repeat_n((SizeCounts::EMPTY, FOUR_SMALL), small_gpus as usize).collect();
                gpus.extend(fill_small(rooms, counts));
                gpus
            }
        }
    }
}

impl SevenSlicePacking {
    fn total(&self) -> u64 {
        self.sevens + self.four_three + self.three_three + self.lone_fours + self.lone_threes + self.small_gpus
    }
}

fn count(counts: &SizeCounts, size: u8) -> u64 {
    u64::from(counts.count(size))
}

/// GPUs of small instances needed beside the given rooms.
fn small_gpus_needed(twos: u64, ones: u64, room_slots: u64, room_twos: u64, gpu: SmallRoom) -> u64 {
    let twos_left = twos.saturating_sub(room_twos);
    let slots_left = (2 * twos + ones).saturating_sub(room_slots);
    twos_left.div_ceil(gpu.twos).max(slots_left.div_ceil(gpu.slots))
}

fn seven_slice(counts: &SizeCounts) -> SevenSlicePacking {
    let (ones, twos, threes, fours, sevens) =
        (count(counts, 1), count(counts, 2), count(counts, 3), count(counts, 4), count(counts, 7));
    let four_three = threes.min(fours);
    let lone_fours = fours - four_three;
    let threes_left = threes - four_three;
    let with_pairs = |three_three: u64| {
        let lone_threes = threes_left - 2 * three_three;
        let room_slots = LONE_FOUR.slots * lone_fours + LONE_THREE.slots * lone_threes;
        let room_twos = LONE_FOUR.twos * lone_fours + LONE_THREE.twos * lone_threes;
        SevenSlicePacking {
            sevens,
            four_three,
            three_three,
            lone_fours,
            lone_threes,
            small_gpus: small_gpus_needed(twos, ones, room_slots, room_twos, SEVEN_SMALL),
        }
    };
    // Pairing two lone 3g saves a GPU as long as the small instances still
    // fit beside the remaining lone 3g and 4g; past that point every pair
    // costs at least the GPU it saves. So the best pair count is the
    // largest that needs no small-instance GPU, or the one just above it.
    let max_pairs = threes_left / 2;
    let room_twos = (LONE_FOUR.twos * lone_fours + LONE_THREE.twos * threes_left).saturating_sub(twos);
    let room_slots = (LONE_FOUR.slots * lone_fours + LONE_THREE.slots * threes_left).saturating_sub(2 * twos + ones);
    let free_pairs = (room_twos / (2 * LONE_THREE.twos)).min(room_slots / (2 * LONE_THREE.slots)).min(max_pairs);
    [0, free_pairs, (free_pairs + 1).min(max_pairs)]
        .into_iter()
        .map(with_pairs)
        .min_by_key(|p| (p.total(), p.three_three))
        .expect("three candidates")
}

/// (GPUs, 4g GPUs, small-instance GPUs) on a 4-slice GPU.
fn four_slice(counts: &SizeCounts) -> (u64, u64, u64) {
    let fours = count(counts, 4);
    let small = small_gpus_needed(count(counts, 2), count(counts, 1), 0, 0, FOUR_SMALL);
    (fours + small, fours, small)
}

/// Puts the 1g and 2g instances of `counts` into `rooms` (base multiset and
/// room), 2g first, and returns the filled multisets, skipping empty ones.
fn fill_small(rooms: Vec<(SizeCounts, SmallRoom)>, counts: &SizeCounts) -> Vec<SizeCounts> {
    let (mut twos, mut ones) = (count(counts, 2), count(counts, 1));
    let mut gpus = Vec::with_capacity(rooms.len());
    for (mut gpu, room) in rooms {
        let placed_twos = twos.min(room.twos);
        twos -= placed_twos;
        let placed_ones = ones.min(room.slots - 2 * placed_twos);
        ones -= placed_ones;
        for _ in 0..placed_twos {
            gpu = gpu.with(2);
        }
        for _ in 0..placed_ones {
            gpu = gpu.with(1);
        }
        if !gpu.is_empty() {
            gpus.push(gpu);
        }
    }
    debug_assert_eq!((twos, ones), (0, 0), "the rooms hold every small instance");
    gpus
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Lattice;
    use std::collections::HashMap;

    /// Fewest GPUs by exhaustive search over maximal size multisets.
    fn brute_force(lattice: &Lattice, counts: SizeCounts, memo: &mut HashMap<SizeCounts, u64>) -> u64 {
        if counts.is_empty() {
            return 0;
        }
        if let Some(&known) = memo.get(&counts) {
            return known;
        }
        let mut best = u64::MAX;
        for layout in lattice.maximal_size_sets() {
            let mut rest = counts;
            for size in layout.sizes_desc() {
                rest = rest.without(size);
            }
            if rest != counts {
                best = best.min(1 + brute_force(lattice, rest, memo));
            }
        }
        memo.insert(counts, best);
        best
    }

    fn check_model(model: GpuModel, max_per_size: u8) {
        let lattice = Lattice::new(model);
        let packer = Packer::new(model);
        let sizes: Vec<u8> = model.spec().sizes().collect();
        let mut memo = HashMap::new();
        let mut all = vec![SizeCounts::EMPTY];
        for &size in &sizes {
            all = all
                .into_iter()
                .flat_map(|c| (0..=max_per_size).map(move |n| (0..n).fold(c, |acc, _| acc.with(size))))
                .collect();
        }
        for counts in all {
            let expected = brute_force(&lattice, counts, &mut memo);
            assert_eq!(packer.min_gpus(&counts), expected, "{model} {counts}");
            let gpus = packer.pack(&counts);
            assert_eq!(gpus.len() as u64, expected, "{model} {counts}");
            let mut total = SizeCounts::EMPTY;
            for gpu in &gpus {
                assert!(lattice.is_realizable(gpu), "{model}: {gpu} is not realizable");
                for size in gpu.sizes_desc() {
                    total = total.with(size);
                }
            }
            assert_eq!(total, counts);
        }
    }

    #[test]
    fn seven_slice_packing_is_exact() {
        check_model(GpuModel::A100_80GB, 5);
    }

    #[test]
    fn four_slice_packing_is_exact() {
        check_model(GpuModel::A30_24GB, 7);
    }

    #[test]
    fn packs_large_multisets_quickly_and_tightly() {
        let packer = Packer::new(GpuModel::H100_80GB);
        let mut counts = SizeCounts::EMPTY;
        for (size, n) in [(1, 120), (2, 80), (3, 60), (4, 20), (7, 10)] {
            for _ in 0..n {
                counts = counts.with(size);
            }
        }
        // 10 × 7g, 20 × 4g+3g, 40 × 3g+2g+2g (all 2g), 120 × 1g beside the
        // 3g (40 slices left, 80 to go): 18 GPUs of 1g. 88 = ⌈610 / 7⌉.
        assert_eq!(packer.min_gpus(&counts), 88);
        assert_eq!(u64::from(counts.compute_slices()).div_ceil(7), 88);
        assert_eq!(packer.pack(&counts).len(), 88);
    }
}
