//! GPU models and their MIG profiles.
//!
//! A MIG-capable GPU is cut into *compute slices* (GPCs) and *memory
//! slices*. A MIG profile such as `3g.40gb` takes a number of each and may
//! start only at certain memory slices. The tables below follow NVIDIA's MIG
//! user guide; the placement rules themselves live in [`crate::layout`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::CoreError;

/// One MIG GPU-instance profile of a GPU model, e.g. `3g.40gb`.
#[derive(Debug, PartialEq, Eq)]
pub struct MigProfile {
    /// NVIDIA's profile name, e.g. `3g.40gb`.
    pub name: &'static str,
    /// Compute slices (GPCs); the "size" of an instance, e.g. 3 for `3g.40gb`.
    pub compute_slices: u8,
    /// Memory slices the instance occupies, starting at its start slice.
    pub memory_slices: u8,
    /// Memory slices at which an instance of this profile may start.
    pub starts: &'static [u8],
    /// Most instances of this profile on one GPU.
    pub max_count: u8,
    /// Memory of one instance in GB, as in the profile's name.
    pub memory_gb: u32,
    /// `true` for the standard profile of its compute size; `false` for
    /// variants such as `1g.20gb` that trade compute for memory.
    pub primary: bool,
    /// NVIDIA's GPU-instance profile id, as `nvidia-smi mig -lgip` lists it
    /// and `-lgi` shows it.
    pub profile_id: u8,
    /// The profile id of the instance's default compute instance (the
    /// whole GPU instance), as `nvidia-smi mig -lci` shows it.
    pub compute_profile_id: u8,
}

/// The static description of one GPU model: its slices and MIG profiles.
#[derive(Debug, PartialEq, Eq)]
pub struct GpuSpec {
    /// Canonical identifier, e.g. `a100-80gb`.
    pub id: &'static str,
    /// Human-readable name, e.g. `A100-80GB`.
    pub display_name: &'static str,
    /// Compute slices (GPCs) available to MIG.
    pub compute_slices: u8,
    /// Memory slices.
    pub memory_slices: u8,
    /// Total memory in GB.
    pub memory_gb: u32,
    /// Every MIG GPU-instance profile, primary profiles first by size.
    pub profiles: &'static [MigProfile],
    /// The product, as one word of the driver's name for every board of the
    /// model, e.g. `A100` in `NVIDIA A100-SXM4-80GB`; the memory tells
    /// models of one product apart.
    pub product: &'static str,
    /// What `nvidia-smi --query-gpu=name` prints for a typical board.
    pub board_name: &'static str,
    /// What `nvidia-smi --query-gpu=memory.total` prints for that board,
    /// MiB (the driver reserves a little of the model's memory).
    pub board_memory_mib: u64,
}

/// The GPU models Tessera knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum GpuModel {
    /// NVIDIA A100 with 40 GB.
    #[serde(rename = "a100-40gb")]
    A100_40GB,
    /// NVIDIA A100 with 80 GB.
    #[serde(rename = "a100-80gb")]
    A100_80GB,
    /// NVIDIA H100 with 80 GB.
    #[serde(rename = "h100-80gb")]
    H100_80GB,
    /// NVIDIA H100 NVL with 94 GB.
    #[serde(rename = "h100-94gb")]
    H100_94GB,
    /// NVIDIA H200 with 141 GB.
    #[serde(rename = "h200-141gb")]
    H200_141GB,
    /// NVIDIA B200 with 180 GB.
    #[serde(rename = "b200-180gb")]
    B200_180GB,
    /// NVIDIA A30 with 24 GB.
    #[serde(rename = "a30-24gb")]
    A30_24GB,
}

/// Builds the six profiles of a GPU with 7 compute and 8 memory slices.
macro_rules! seven_slice_profiles {
    ($g1:literal, $g1x2:literal, $g2:literal, $g3:literal, $g4:literal, $g7:literal,
     $m1:literal, $m1x2:literal, $m2:literal, $m3:literal, $m4:literal, $m7:literal) => {
        &[
            MigProfile {
                name: $g1,
                compute_slices: 1,
                memory_slices: 1,
                starts: &[0, 1, 2, 3, 4, 5, 6],
                max_count: 7,
                memory_gb: $m1,
                profile_id: 19,
                compute_profile_id: 0,
                primary: true,
            },
            MigProfile {
                name: $g2,
                compute_slices: 2,
                memory_slices: 2,
                starts: &[0, 2, 4],
                max_count: 3,
                memory_gb: $m2,
                profile_id: 14,
                compute_profile_id: 1,
                primary: true,
            },
            MigProfile {
                name: $g3,
                compute_slices: 3,
                memory_slices: 4,
                starts: &[0, 4],
                max_count: 2,
                memory_gb: $m3,
                profile_id: 9,
                compute_profile_id: 2,
                primary: true,
            },
            MigProfile {
                name: $g4,
                compute_slices: 4,
                memory_slices: 4,
                starts: &[0],
                max_count: 1,
                memory_gb: $m4,
                profile_id: 5,
                compute_profile_id: 3,
                primary: true,
            },
            MigProfile {
                name: $g7,
                compute_slices: 7,
                memory_slices: 8,
                starts: &[0],
                max_count: 1,
                memory_gb: $m7,
                profile_id: 0,
                compute_profile_id: 4,
                primary: true,
            },
            MigProfile {
                name: $g1x2,
                compute_slices: 1,
                memory_slices: 2,
                starts: &[0, 2, 4, 6],
                max_count: 4,
                memory_gb: $m1x2,
                profile_id: 15,
                compute_profile_id: 0,
                primary: false,
            },
        ]
    };
}

#[rustfmt::skip]
static A100_40GB: GpuSpec = GpuSpec {
    id: "a100-40gb", display_name: "A100-40GB", compute_slices: 7, memory_slices: 8, memory_gb: 40,
    profiles: seven_slice_profiles!("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", 5, 10, 10, 20, 20, 40),
    product: "A100", board_name: "NVIDIA A100-SXM4-40GB", board_memory_mib: 40960,
};
#[rustfmt::skip]
static A100_80GB: GpuSpec = GpuSpec {
    id: "a100-80gb", display_name: "A100-80GB", compute_slices: 7, memory_slices: 8, memory_gb: 80,
    profiles: seven_slice_profiles!("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", 10, 20, 20, 40, 40, 80),
    product: "A100", board_name: "NVIDIA A100-SXM4-80GB", board_memory_mib: 81920,
};
#[rustfmt::skip]
static H100_80GB: GpuSpec = GpuSpec {
    id: "h100-80gb", display_name: "H100-80GB", compute_slices: 7, memory_slices: 8, memory_gb: 80,
    profiles: seven_slice_profiles!("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", 10, 20, 20, 40, 40, 80),
    product: "H100", board_name: "NVIDIA H100 80GB HBM3", board_memory_mib: 81559,
};
#[rustfmt::skip]
static H100_94GB: GpuSpec = GpuSpec {
    id: "h100-94gb", display_name: "H100-94GB", compute_slices: 7, memory_slices: 8, memory_gb: 94,
    profiles: seven_slice_profiles!("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb", 12, 24, 24, 47, 47, 94),
    product: "H100", board_name: "NVIDIA H100 NVL", board_memory_mib: 95830,
};
#[rustfmt::skip]
static H200_141GB: GpuSpec = GpuSpec {
    id: "h200-141gb", display_name: "H200-141GB", compute_slices: 7, memory_slices: 8, memory_gb: 141,
    profiles: seven_slice_profiles!("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", 18, 35, 35, 71, 71, 141),
    product: "H200", board_name: "NVIDIA H200", board_memory_mib: 143771,
};
// NVIDIA's MIG user guide lists the B200 180 GB product's profiles with the
// same slices as the H200's; its board answers `NVIDIA B200`, 183359 MiB.
#[rustfmt::skip]
static B200_180GB: GpuSpec = GpuSpec {
    id: "b200-180gb", display_name: "B200-180GB", compute_slices: 7, memory_slices: 8, memory_gb: 180,
    profiles: seven_slice_profiles!("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb", 23, 45, 45, 90, 90, 180),
    product: "B200", board_name: "NVIDIA B200", board_memory_mib: 183359,
};
#[rustfmt::skip]
static A30_24GB: GpuSpec = GpuSpec {
    id: "a30-24gb", display_name: "A30-24GB", compute_slices: 4, memory_slices: 4, memory_gb: 24,
    profiles: &[
        MigProfile { name: "1g.6gb", compute_slices: 1, memory_slices: 1, starts: &[0, 1, 2, 3], max_count: 4, memory_gb: 6, primary: true, profile_id: 14, compute_profile_id: 0 },
        MigProfile { name: "2g.12gb", compute_slices: 2, memory_slices: 2, starts: &[0, 2], max_count: 2, memory_gb: 12, primary: true, profile_id: 5, compute_profile_id: 1 },
        MigProfile { name: "4g.24gb", compute_slices: 4, memory_slices: 4, starts: &[0], max_count: 1, memory_gb: 24, primary: true, profile_id: 0, compute_profile_id: 3 },
    ],
    product: "A30", board_name: "NVIDIA A30", board_memory_mib: 24576,
};

impl GpuModel {
    /// Every known model, in a stable order.
    pub const ALL: [GpuModel; 7] = [
        GpuModel::A100_40GB,
        GpuModel::A100_80GB,
        GpuModel::H100_80GB,
        GpuModel::H100_94GB,
        GpuModel::H200_141GB,
        GpuModel::B200_180GB,
        GpuModel::A30_24GB,
    ];

    /// The static description of this model.
    pub fn spec(self) -> &'static GpuSpec {
        match self {
            GpuModel::A100_40GB => &A100_40GB,
            GpuModel::A100_80GB => &A100_80GB,
            GpuModel::H100_80GB => &H100_80GB,
            GpuModel::H100_94GB => &H100_94GB,
            GpuModel::H200_141GB => &H200_141GB,
            GpuModel::B200_180GB => &B200_180GB,
            GpuModel::A30_24GB => &A30_24GB,
        }
    }

    /// Canonical identifier, e.g. `a100-80gb`.
    pub fn id(self) -> &'static str {
        self.spec().id
    }

    fn known_ids() -> String {
        GpuModel::ALL.map(GpuModel::id).join(", ")
    }
}

impl fmt::Display for GpuModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl FromStr for GpuModel {
    type Err = CoreError;

    /// Accepts the canonical id in any case, with `_` for `-` and an
    /// optional `nvidia-` prefix: `A100-80GB`, `nvidia_a100_80gb`.
    fn from_str(given: &str) -> Result<Self, Self::Err> {
        let normalized = given.trim().to_ascii_lowercase().replace('_', "-");
        let normalized = normalized.strip_prefix("nvidia-").unwrap_or(&normalized);
        GpuModel::ALL
            .into_iter()
            .find(|model| model.id() == normalized)
            .ok_or_else(|| CoreError::UnknownGpu { given: given.to_string(), known: GpuModel::known_ids() })
    }
}

impl GpuSpec {
    /// The profile with this NVIDIA name (case-insensitive), e.g. `3g.40gb`.
    pub fn profile_by_name(&self, name: &str) -> Result<&'static MigProfile, CoreError> {
        let wanted = name.trim().to_ascii_lowercase();
        self.profiles.iter().find(|profile| profile.name == wanted).ok_or_else(|| CoreError::UnknownProfile {
            gpu: self.id.to_string(),
            given: name.to_string(),
            known: self.profiles.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        })
    }

    /// The primary profile with this many compute slices, e.g. 3 → `3g.40gb`.
    pub fn profile_for_size(&self, compute_slices: u8) -> Result<&'static MigProfile, CoreError> {
        self.primary_profiles().find(|profile| profile.compute_slices == compute_slices).ok_or_else(|| {
            CoreError::UnknownSize {
                gpu: self.id.to_string(),
                size: compute_slices,
                known: self.sizes().map(|s| format!("{s}g")).collect::<Vec<_>>().join(", "),
            }
        })
    }

    /// The primary profiles (one per compute size), smallest first.
    pub fn primary_profiles(&self) -> impl Iterator<Item = &'static MigProfile> {
        let profiles: &'static [MigProfile] = self.profiles;
        profiles.iter().filter(|profile| profile.primary)
    }

    /// The memory-rich variant of the smallest profile that costs nothing
    /// to use at one start: the smallest primary profile, its variant with
    /// more memory and the same compute (`1g.20gb` beside `1g.10gb`), and
    /// the start where the variant's extra memory slices are ones no
    /// placement could use without overlapping the primary profile there
    /// anyway (start 6 on a GPU of 7 compute and 8 memory slices: the
    /// eighth memory slice that seven `1g.10gb` instances leave idle).
    /// `None` when the model has no such variant or start.
    pub fn memory_widening(&self) -> Option<(&'static MigProfile, &'static MigProfile, u8)> {
        let primary = self.primary_profiles().next()?;
        let profiles: &'static [MigProfile] = self.profiles;
        let rich = profiles.iter().find(|p| {
            !p.primary && p.compute_slices == primary.compute_slices && p.memory_slices > primary.memory_slices
        })?;
        let mask = |start: u8, slices: u8| -> u16 { (((1u32 << slices) - 1) << start) as u16 };
        let start = rich.starts.iter().copied().find(|&start| {
            if !primary.starts.contains(&start) {
                return false;
            }
            let primary_mask = mask(start, primary.memory_slices);
            let extra = mask(start, rich.memory_slices) & !primary_mask;
            profiles.iter().all(|other| {
                other.starts.iter().all(|&at| {
                    let taken = mask(at, other.memory_slices);
                    taken & extra == 0 || taken & primary_mask != 0
                })
            })
        })?;
        Some((primary, rich, start))
    }

    /// The instance sizes (compute slices) this model offers, smallest first.
    pub fn sizes(&self) -> impl Iterator<Item = u8> {
        self.primary_profiles().map(|profile| profile.compute_slices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ids_leniently_and_rejects_unknown_models() {
        assert_eq!("A100-80GB".parse::<GpuModel>().unwrap(), GpuModel::A100_80GB);
        assert_eq!("nvidia_h100_80gb".parse::<GpuModel>().unwrap(), GpuModel::H100_80GB);
        let error = "v100-32gb".parse::<GpuModel>().unwrap_err().to_string();
        assert!(error.contains("v100-32gb") && error.contains("a100-80gb"), "{error}");
    }

    #[test]
    fn the_memory_rich_smallest_instance_widens_only_where_nothing_else_could_start() {
        for model in GpuModel::ALL.into_iter().filter(|model| model.spec().compute_slices == 7) {
            let spec = model.spec();
            let (primary, rich, start) = spec.memory_widening().expect("every seven-slice model has 1g's variant");
            assert_eq!((primary.compute_slices, rich.compute_slices, start), (1, 1, 6), "{model}");
            assert!(rich.memory_gb > primary.memory_gb && !rich.primary);
        }
        assert_eq!(GpuModel::A30_24GB.spec().memory_widening(), None, "the A30 has no memory-rich 1g");
        assert_eq!(GpuModel::A100_80GB.spec().memory_widening().map(|(_, rich, _)| rich.name), Some("1g.20gb"));
    }

    #[test]
    fn looks_up_profiles_by_name_and_size() {
        let a100 = GpuModel::A100_80GB.spec();
        let three = a100.profile_by_name("3g.40gb").unwrap();
        assert_eq!((three.compute_slices, three.memory_slices, three.starts), (3, 4, &[0u8, 4][..]));
        assert_eq!(a100.profile_for_size(3).unwrap().name, "3g.40gb");
        assert_eq!(a100.profile_for_size(1).unwrap().name, "1g.10gb");
        assert_eq!(GpuModel::H200_141GB.spec().profile_for_size(7).unwrap().memory_gb, 141);
        assert!(a100.profile_by_name("3g.20gb").is_err());
        assert!(a100.profile_for_size(5).is_err());
        assert_eq!(GpuModel::A30_24GB.spec().sizes().collect::<Vec<_>>(), vec![1, 2, 4]);
    }

    #[test]
    fn every_profile_fits_its_gpu() {
        for model in GpuModel::ALL {
            let spec = model.spec();
            for profile in spec.profiles {
                for &start in profile.starts {
                    assert!(start + profile.memory_slices <= spec.memory_slices, "{} {}", spec.id, profile.name);
                }
                assert!(profile.memory_gb <= spec.memory_gb);
                assert!(profile.max_count as usize >= 1);
            }
        }
    }

    #[test]
    fn every_board_is_named_by_its_product_with_about_its_memory() {
        for model in GpuModel::ALL {
            let spec = model.spec();
            let words: Vec<&str> = spec.board_name.split([' ', '-']).collect();
            assert!(words.contains(&spec.product), "{}: {}", spec.id, spec.board_name);
            let gib = spec.board_memory_mib as f64 / 1024.0;
            assert!((gib - f64::from(spec.memory_gb)).abs() <= 0.1 * f64::from(spec.memory_gb), "{}", spec.id);
            let mut ids: Vec<u8> = spec.profiles.iter().map(|p| p.profile_id).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), spec.profiles.len(), "{}: one id per profile", spec.id);
        }
    }

    #[test]
    fn serializes_as_canonical_id() {
        let json = serde_json::to_string(&GpuModel::H100_94GB).unwrap();
        assert_eq!(json, "\"h100-94gb\"");
    }
}
