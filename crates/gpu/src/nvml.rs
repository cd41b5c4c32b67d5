//! NVML (`libnvidia-ml`, loaded at run time through `nvml-wrapper`): only
//! reads, never changes a setting.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use crate::error::{one_line, GpuError};
use crate::mig::{MigDevice, MigDevices};
use crate::runner::{CommandOutput, CommandRunner, SystemRunner};
use crate::workload::DeviceTarget;

/// Loads NVML; without a driver, the one-line
/// [`GpuError::NvmlUnavailable`].
pub(crate) fn init() -> Result<Nvml, GpuError> {
    Nvml::init().map_err(|error| GpuError::NvmlUnavailable { message: one_line(&error) })
}

/// [`GpuError::Nvml`] for GPU `gpu_index`, naming what was asked.
pub(crate) fn query_error(gpu_index: u32, what: &str, error: &NvmlError) -> GpuError {
    GpuError::Nvml { message: format!("GPU {gpu_index}: {what}: {}", one_line(error)) }
}

/// Checks, through NVML, that `device` exists on this node: without a
/// driver or with a wrong index or UUID, a one-line error before anything
/// is started.
pub fn check_device(device: &DeviceTarget) -> Result<(), GpuError> {
    let nvml = init()?;
    let found = match device {
        DeviceTarget::Gpu(index) => nvml.device_by_index(*index).map(drop),
        DeviceTarget::Mig(uuid) => nvml.device_by_uuid(uuid.as_str()).map(drop),
    };
    found.map_err(|error| GpuError::Nvml { message: format!("{device}: {}", one_line(&error)) })
}

/// The MIG devices of a node's GPUs, from NVML.
pub struct NvmlMigDevices {
    nvml: Nvml,
}

impl std::fmt::Debug for NvmlMigDevices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlMigDevices").finish_non_exhaustive()
    }
}

impl NvmlMigDevices {
    /// Loads NVML.
    pub fn open() -> Result<Self, GpuError> {
        Ok(Self { nvml: init()? })
    }

    /// The GPU- and compute-instance ids of a MIG device handle. nvml-wrapper
    /// 0.13 has no safe wrapper for these two NVML calls.
    fn instance_ids(&self, gpu_index: u32, mig: &nvml_wrapper::Device<'_>) -> Result<(u32, u32), GpuError> {
        let lib = self.nvml.lib();
        let (mut gi_id, mut ci_id) = (0u32, 0u32);
        // SAFETY: `mig` is a live MIG device handle of `self.nvml`, which
        // outlives the calls, and each call writes one `c_uint` through a
        // valid pointer.
        let (gi_status, ci_status) = unsafe {
            let handle = mig.handle();
            (lib.nvmlDeviceGetGpuInstanceId(handle, &mut gi_id), lib.nvmlDeviceGetComputeInstanceId(handle, &mut ci_id))
        };
        if gi_status != 0 || ci_status != 0 {
            return Err(GpuError::Nvml {
                message: format!("GPU {gpu_index}: instance ids of a MIG device: NVML status {gi_status}/{ci_status}"),
            });
        }
        Ok((gi_id, ci_id))
    }
}

impl MigDevices for NvmlMigDevices {
    fn mig_devices(&mut self, gpu_index: u32) -> Result<Vec<MigDevice>, GpuError> {
        let gpu = self.nvml.device_by_index(gpu_index).map_err(|e| query_error(gpu_index, "device", &e))?;
        let slots = match gpu.mig_device_count() {
            Ok(slots) => slots,
            // A GPU without MIG support has no MIG devices.
            Err(NvmlError::NotSupported) => return Ok(Vec::new()),
            Err(error) => return Err(query_error(gpu_index, "MIG device count", &error)),
        };
        let mut devices = Vec::new();
        for slot in 0..slots {
            let mig = match gpu.mig_device_by_index(slot) {
                Ok(mig) => mig,
                // Slots are sparse: an empty one is NotFound.
                Err(NvmlError::NotFound | NvmlError::InvalidArg) => continue,
                Err(error) => return Err(query_error(gpu_index, &format!("MIG device {slot}"), &error)),
            };
            let uuid = mig.uuid().map_err(|e| query_error(gpu_index, &format!("MIG device {slot} UUID"), &e))?;
            let (gi_id, ci_id) = self.instance_ids(gpu_index, &mig)?;
            devices.push(MigDevice { gi_id, ci_id, uuid });
        }
        devices.sort_by_key(|device| (device.gi_id, device.ci_id));
        Ok(devices)
    }
}

/// This node as Tessera drives it, the one driver of every node operation
/// (deploy, status, segment sweeps): commands run here ([`SystemRunner`]),
/// MIG devices from NVML, loaded at the first lookup so that what needs
/// none works without a driver library.
#[derive(Debug, Default)]
pub struct NodeDriver {
    nvml: Option<NvmlMigDevices>,
}

impl CommandRunner for NodeDriver {
    fn run(&mut self, program: &str, args: &[String]) -> Result<CommandOutput, GpuError> {
        SystemRunner.run(program, args)
    }

    fn run_with(
        &mut self,
        program: &str,
        args: &[String],
        env: &[(String, String)],
        stdin: Option<&str>,
    ) -> Result<CommandOutput, GpuError> {
        SystemRunner.run_with(program, args, env, stdin)
    }
}

impl MigDevices for NodeDriver {
    fn mig_devices(&mut self, gpu_index: u32) -> Result<Vec<MigDevice>, GpuError> {
        let nvml = match self.nvml.take() {
            Some(nvml) => nvml,
            None => NvmlMigDevices::open()?,
        };
        self.nvml.insert(nvml).mig_devices(gpu_index)
    }
}
