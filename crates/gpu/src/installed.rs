//! Which GPU model is installed, and whether it is in MIG mode, from
//! `nvidia-smi --query-gpu=name,memory.total,mig.mode.current`, so a plan
//! made for another model (or a GPU without MIG) is refused before it
//! changes anything.

use tessera_core::{GpuAssignment, GpuModel};

use crate::error::GpuError;
use crate::mig::NVIDIA_SMI;
use crate::runner::{command_line, run_checked, CommandRunner};

/// MiB per GiB: the driver reports memory in MiB, and the GB in a MIG
/// model's name are GiB.
const MIB_PER_GIB: f64 = 1024.0;

/// How far (as a fraction of the model's memory) the reported memory may
/// be from the model's: the driver reserves a little, e.g. 81559 MiB on an
/// H100 80GB.
const MEMORY_TOLERANCE: f64 = 0.1;

/// A GPU as the driver names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledGpu {
    /// The driver's product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Its total memory, MiB.
    pub memory_mib: u64,
    /// The GPU model it is.
    pub gpu_model: GpuModel,
    /// `true` when MIG mode is enabled (`mig.mode.current` is `Enabled`).
    pub mig_enabled: bool,
}

/// The GPU model of a board named `name` (as `nvidia-smi --query-gpu=name`
/// prints it) with `memory_mib` of memory, e.g. `NVIDIA A100 80GB PCIe`
/// with 81920 MiB is an a100-80gb. The product is a word of the name (a
/// [`tessera_core::GpuSpec`]'s `product`, so a GH200 is no H200); the memory
/// tells its variants apart. An unknown name or memory is an error naming
/// both.
pub fn gpu_model_from_name(name: &str, memory_mib: u64) -> Result<GpuModel, String> {
    let words: Vec<&str> = name.split(|c: char| c.is_whitespace() || c == '-').collect();
    let candidates: Vec<GpuModel> =
        GpuModel::ALL.into_iter().filter(|model| words.contains(&model.spec().product)).collect();
    if candidates.is_empty() {
        let mut known: Vec<&str> = GpuModel::ALL.iter().map(|model| model.spec().product).collect();
        known.dedup();
        return Err(format!("'{name}' is no GPU Tessera knows (it knows the {})", known.join(", ")));
    }
    let gib = memory_mib as f64 / MIB_PER_GIB;
    let distance = |model: &GpuModel| (gib - f64::from(model.spec().memory_gb)).abs();
    candidates
        .iter()
        .copied()
        .filter(|model| distance(model) <= MEMORY_TOLERANCE * f64::from(model.spec().memory_gb))
        .min_by(|a, b| distance(a).total_cmp(&distance(b)))
        .ok_or_else(|| {
            let ids: Vec<&str> = candidates.iter().map(|model| model.id()).collect();
            format!("'{name}' with {memory_mib} MiB is none of {}", ids.join(", "))
        })
}

/// What the query asks for.
pub const QUERY: &str = "--query-gpu=name,memory.total,mig.mode.current";

/// The arguments that ask for GPU `index`'s name, memory and MIG mode.
fn query_args(index: u32) -> Vec<String> {
    [QUERY, "--format=csv,noheader,nounits", "-i"]
        .iter()
        .map(|s| (*s).to_string())
        .chain(std::iter::once(index.to_string()))
        .collect()
}

/// nvidia-smi's exit status when what was asked for does not exist.
const NOT_FOUND: i32 = 6;
/// nvidia-smi's exit status when the driver is not loaded or does not
/// answer.
const DRIVER_NOT_LOADED: i32 = 9;

/// Reads GPU `index`'s name, memory and MIG mode and tells its GPU model. A
/// GPU the driver does not have is a [`GpuError::PlanGpu`] saying so; a
/// driver that does not answer is [`GpuError::DriverFailed`], with
/// nvidia-smi's own words.
pub fn installed_gpu(runner: &mut dyn CommandRunner, index: u32) -> Result<InstalledGpu, GpuError> {
    let args = query_args(index);
    let output = run_checked(runner, NVIDIA_SMI, &args).map_err(|error| match error {
        GpuError::CommandFailed { status: NOT_FOUND, message, .. } => {
            GpuError::PlanGpu { gpu: index, message: format!("not on this node: nvidia-smi -i {index}: {message}") }
        }
        GpuError::CommandFailed { command, status: DRIVER_NOT_LOADED, message } => {
            GpuError::DriverFailed { command, status: DRIVER_NOT_LOADED, message }
        }
        other => other,
    })?;
    let bad = |message: String| GpuError::MigOutput { command: command_line(NVIDIA_SMI, &args), line: 1, message };
    let line = output.stdout.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default();
    let fields: Vec<&str> = line.rsplitn(3, ',').map(str::trim).collect();
    let [mig_mode, memory, name] = fields[..] else {
        return Err(bad(format!("expected 'name, memory MiB, MIG mode', got '{line}'")));
    };
    let memory_mib =
        memory.parse::<u64>().map_err(|_| bad(format!("memory.total '{memory}' is not a number of MiB")))?;
    let gpu_model =
        gpu_model_from_name(name, memory_mib).map_err(|message| GpuError::PlanGpu { gpu: index, message })?;
    // `[N/A]` on GPUs without MIG support.
    let mig_enabled = mig_mode.eq_ignore_ascii_case("Enabled");
    Ok(InstalledGpu { name: name.to_string(), memory_mib, gpu_model, mig_enabled })
}

/// Refuses a planned GPU whose model is not the one installed at its
/// index, or which is not in MIG mode.
pub fn check_installed(runner: &mut dyn CommandRunner, planned: &GpuAssignment) -> Result<InstalledGpu, GpuError> {
    let installed = installed_gpu(runner, planned.index)?;
    if installed.gpu_model != planned.gpu_model {
        return Err(GpuError::ModelMismatch {
            gpu: planned.index,
            name: installed.name,
            installed: installed.gpu_model,
            planned: planned.gpu_model,
        });
    }
    if !installed.mig_enabled {
        return Err(GpuError::MigDisabled { gpu: planned.index, name: installed.name });
    }
    Ok(installed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{FakeNvidiaSmi, DRIVER_FAILED_LINE};

    #[test]
    fn realistic_names_map_to_their_models() {
        let cases = [
            ("NVIDIA A100-SXM4-40GB", 40960, GpuModel::A100_40GB),
            ("NVIDIA A100-PCIE-40GB", 40960, GpuModel::A100_40GB),
            ("NVIDIA A100-SXM4-80GB", 81920, GpuModel::A100_80GB),
            ("NVIDIA A100 80GB PCIe", 81920, GpuModel::A100_80GB),
            ("NVIDIA H100 80GB HBM3", 81559, GpuModel::H100_80GB),
            ("NVIDIA H100 PCIe", 81559, GpuModel::H100_80GB),
            ("NVIDIA H100 NVL", 95830, GpuModel::H100_94GB),
            ("NVIDIA H200", 143771, GpuModel::H200_141GB),
            ("NVIDIA H200 NVL", 143771, GpuModel::H200_141GB),
            ("NVIDIA B200", 183359, GpuModel::B200_180GB),
            ("NVIDIA A30", 24576, GpuModel::A30_24GB),
        ];
        for (name, memory_mib, model) in cases {
            assert_eq!(gpu_model_from_name(name, memory_mib), Ok(model), "{name}");
        }
    }

    #[test]
    fn unknown_names_and_memories_are_errors_naming_them() {
        for name in ["NVIDIA GeForce RTX 4090", "NVIDIA GH200 480GB", "NVIDIA GB200", "Tesla V100-SXM2-16GB", ""] {
            let error = gpu_model_from_name(name, 24576).unwrap_err();
            assert!(error.contains(&format!("'{name}'")) && error.contains("A100"), "{error}");
        }
        let error = gpu_model_from_name("NVIDIA A100-SXM4-80GB", 16384).unwrap_err();
        assert_eq!(error, "'NVIDIA A100-SXM4-80GB' with 16384 MiB is none of a100-40gb, a100-80gb");
    }

    #[test]
    fn the_fake_names_every_model_as_the_driver_does() {
        for model in GpuModel::ALL {
            let mut fake = FakeNvidiaSmi::new().with_gpu(3, model);
            assert_eq!(installed_gpu(&mut fake, 3).unwrap().gpu_model, model);
        }
    }

    #[test]
    fn a_plan_for_another_model_is_refused_in_one_line() {
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::H100_80GB);
        let planned = GpuAssignment {
            node: 0,
            index: 0,
            gpu_model: GpuModel::A100_80GB,
            instances: Vec::new(),
            shared: Vec::new(),
        };
        let error = check_installed(&mut fake, &planned).unwrap_err().to_string();
        assert_eq!(error, "GPU 0 is an NVIDIA H100 80GB HBM3 (h100-80gb) but the plan wants a100-80gb");
        let planned = GpuAssignment { gpu_model: GpuModel::H100_80GB, ..planned };
        assert_eq!(check_installed(&mut fake, &planned).unwrap().name, "NVIDIA H100 80GB HBM3");
        // A GPU that is not there, with the driver's words.
        let error = check_installed(&mut fake, &GpuAssignment { index: 4, ..planned.clone() }).unwrap_err().to_string();
        assert_eq!(error, "GPU 4: not on this node: nvidia-smi -i 4: No GPU with index 4 found: Not Found");
        // A GPU without MIG mode.
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::H100_80GB).with_mig_disabled(0);
        let error = check_installed(&mut fake, &planned).unwrap_err().to_string();
        assert!(error.starts_with("GPU 0 (NVIDIA H100 80GB HBM3) is not in MIG mode"), "{error}");
        assert!(error.contains("never changes MIG mode"), "{error}");
    }

    #[test]
    fn a_broken_driver_is_reported_as_such_with_nvidia_smis_words() {
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::H100_80GB).with_broken_driver();
        let error = installed_gpu(&mut fake, 0).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "the NVIDIA driver does not answer: `nvidia-smi {QUERY} --format=csv,noheader,nounits -i 0` failed \
                 (exit status 9): {DRIVER_FAILED_LINE}"
            )
        );
        assert!(!error.contains("not on this node"), "{error}");
    }

    #[test]
    fn unreadable_output_names_the_command() {
        struct Prints(&'static str);
        impl CommandRunner for Prints {
            fn run(&mut self, _: &str, _: &[String]) -> Result<crate::runner::CommandOutput, GpuError> {
                Ok(crate::runner::CommandOutput { status: 0, stdout: self.0.to_string(), stderr: String::new() })
            }
        }
        for (stdout, needle) in [
            ("NVIDIA A30, 24576\n", "expected 'name, memory MiB, MIG mode'"),
            ("NVIDIA A30, [N/A], Enabled\n", "[N/A]"),
        ] {
            let error = installed_gpu(&mut Prints(stdout), 0).unwrap_err().to_string();
            assert!(error.contains(QUERY) && error.contains(needle), "{error}");
        }
        // As the H200 of a lent GPU node printed it.
        let h200 = installed_gpu(&mut Prints("NVIDIA H200, 143771, Disabled\n"), 0).unwrap();
        assert_eq!((h200.gpu_model, h200.mig_enabled), (GpuModel::H200_141GB, false));
        let error = installed_gpu(&mut Prints("NVIDIA Tesla T4, 15360, [N/A]\n"), 2).unwrap_err().to_string();
        assert!(error.starts_with("GPU 2: 'NVIDIA Tesla T4' is no GPU"), "{error}");
    }
}
