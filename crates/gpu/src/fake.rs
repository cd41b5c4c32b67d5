//! A fake `nvidia-smi` that keeps per-GPU MIG state and rejects what the
//! driver rejects, for testing deployment without a GPU.
//!
//! Understood commands (the ones [`crate::mig`] and [`crate::deploy`] run):
//! `mig -i G -lgi`, `mig -i G -lci`, `mig -i G -cgi PROFILE[:START]`,
//! `mig -i G -gi ID -cci`, `mig -i G -dci -gi ID`, `mig -i G -dgi -gi ID`,
//! `--query-compute-apps=pid --format=csv,noheader -i G` and
//! `--query-gpu=name,memory.total,mig.mode.current --format=csv,noheader,nounits -i G` (each
//! model has the name and memory of a real board, from its row of
//! [`tessera_core::GpuSpec`]).
//! Anything else fails with status 2 ("invalid combination of input
//! arguments").
//!
//! It also plays `nvidia-cuda-mps-control`, with one control daemon per
//! `CUDA_MPS_PIPE_DIRECTORY`: `-d` starts one (refused when one already
//! runs for that pipe directory), and on standard input `quit` stops it and
//! `get_server_list` succeeds, both only when one runs there; see
//! [`FakeNvidiaSmi::daemons`]. A daemon started with `CUDA_VISIBLE_DEVICES`
//! naming a MIG device keeps that device's instance in use (as its MPS
//! server would), so the instance cannot be destroyed while it runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tessera_core::layout::validate_layout;
use tessera_core::{GpuModel, MigProfile, Placement};

use crate::error::GpuError;
use crate::mig::{MigDevice, MigDevices};
use crate::runner::{command_line, CommandOutput, CommandRunner};

/// The driver's status for a rejected request.
const REJECTED: i32 = 6;
/// nvidia-smi's status for bad arguments.
const BAD_ARGS: i32 = 2;
/// nvidia-smi's status when the driver does not answer.
const DRIVER_FAILED: i32 = 9;
/// What nvidia-smi prints then.
pub const DRIVER_FAILED_LINE: &str = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \
     Make sure that the latest NVIDIA driver is installed and running.";

#[derive(Debug, Clone)]
struct FakeGi {
    id: u32,
    profile: &'static MigProfile,
    start: u8,
    compute_instances: Vec<u32>,
}

#[derive(Debug, Clone)]
struct FakeGpu {
    gpu_model: GpuModel,
    instances: Vec<FakeGi>,
    processes: usize,
    mig_enabled: bool,
}

/// The fake. Build it with [`FakeNvidiaSmi::with_gpu`].
#[derive(Debug, Clone, Default)]
pub struct FakeNvidiaSmi {
    gpus: BTreeMap<u32, FakeGpu>,
    /// Every command line run, in order.
    pub log: Vec<String>,
    changes: usize,
    fail_change: Option<usize>,
    /// The running MPS control daemons: pipe directory → the
    /// `CUDA_VISIBLE_DEVICES` each was started with.
    mps_daemons: BTreeMap<String, Option<String>>,
    driver_broken: bool,
}

impl FakeNvidiaSmi {
    /// A machine without GPUs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds GPU `index` of `gpu_model`, in MIG mode with no instances.
    #[must_use]
    pub fn with_gpu(mut self, index: u32, gpu_model: GpuModel) -> Self {
        self.gpus.insert(index, FakeGpu { gpu_model, instances: Vec::new(), processes: 0, mig_enabled: true });
        self
    }

    /// Turns MIG mode off on GPU `index`: `mig -lgi`/`-lci` then print `No
    /// MIG-enabled devices found.` with status 0, as the driver does, and
    /// MIG changes are refused.
    ///
    /// # Panics
    /// If there is no such GPU.
    #[must_use]
    pub fn with_mig_disabled(mut self, index: u32) -> Self {
        self.gpus.get_mut(&index).expect("no such fake GPU").mig_enabled = false;
        self
    }

    /// Breaks the driver: every `nvidia-smi` call then fails with status 9
    /// and [`DRIVER_FAILED_LINE`], as on a node whose kernel module is not
    /// loaded.
    #[must_use]
    pub fn with_broken_driver(mut self) -> Self {
        self.driver_broken = true;
        self
    }

    /// Sets how many compute processes run on GPU `index`.
    ///
    /// # Panics
    /// If there is no such GPU.
    pub fn set_processes(&mut self, index: u32, count: usize) {
        self.gpus.get_mut(&index).expect("no such fake GPU").processes = count;
    }

    /// Makes the `n`-th state-changing command (create or destroy; 1-based,
    /// counted from now) fail as the driver would, without changing state.
    pub fn fail_nth_change(&mut self, n: usize) {
        self.changes = 0;
        self.fail_change = Some(n);
    }

    /// `true` while a (fake) MPS control daemon runs.
    pub fn daemon_running(&self) -> bool {
        !self.mps_daemons.is_empty()
    }

    /// The running MPS control daemons: (pipe directory, the
    /// `CUDA_VISIBLE_DEVICES` it was started with), by pipe directory.
    pub fn daemons(&self) -> Vec<(String, Option<String>)> {
        self.mps_daemons.iter().map(|(pipe, device)| (pipe.clone(), device.clone())).collect()
    }

    fn mps_control(&mut self, args: &[String], env: &[(String, String)], stdin: Option<&str>) -> CommandOutput {
        let pipe_dir = env
            .iter()
            .find(|(key, _)| key == "CUDA_MPS_PIPE_DIRECTORY")
            .map_or_else(|| "/tmp/nvidia-mps".to_string(), |(_, value)| value.clone());
        let fail = |message: &str| CommandOutput { status: 1, stdout: String::new(), stderr: format!("{message}\n") };
        let not_found = "Cannot find MPS control daemon process";
        match (args, stdin.map(str::trim)) {
            ([flag], None) if flag == "-d" => {
                if self.mps_daemons.contains_key(&pipe_dir) {
                    return fail("An instance of this daemon is already running");
                }
                let device = env.iter().find(|(key, _)| key == "CUDA_VISIBLE_DEVICES").map(|(_, value)| value.clone());
                self.mps_daemons.insert(pipe_dir, device);
                CommandOutput::default()
            }
            ([], Some("quit")) => match self.mps_daemons.remove(&pipe_dir) {
                Some(_) => CommandOutput::default(),
                None => fail(not_found),
            },
            // A daemon without clients has no servers to list.
            ([], Some("get_server_list")) if self.mps_daemons.contains_key(&pipe_dir) => CommandOutput::default(),
            ([], Some("get_server_list")) => fail(not_found),
            _ => fail("Invalid command"),
        }
    }

    /// `(profile, start, compute instances)` of GPU `index`, sorted.
    ///
    /// # Panics
    /// If there is no such GPU.
    pub fn layout(&self, index: u32) -> Vec<(String, u8, usize)> {
        let mut layout: Vec<_> = self.gpus[&index]
            .instances
            .iter()
            .map(|gi| (gi.profile.name.to_string(), gi.start, gi.compute_instances.len()))
            .collect();
        layout.sort();
        layout
    }

    fn execute(&mut self, args: &[String]) -> Result<String, (i32, String)> {
        if self.driver_broken {
            return Err((DRIVER_FAILED, DRIVER_FAILED_LINE.to_string()));
        }
        let bad = || {
            (
                BAD_ARGS,
                "ERROR: Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.".to_string(),
            )
        };
        let flag = |name: &str| args.iter().any(|a| a == name);
        let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
        let gpu_index: u32 = value("-i").and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        if !self.gpus.contains_key(&gpu_index) {
            return Err((REJECTED, format!("No GPU with index {gpu_index} found: Not Found")));
        }
        if args.first().is_some_and(|a| a == "--query-gpu=name,memory.total,mig.mode.current")
            && flag("--format=csv,noheader,nounits")
        {
            let gpu = &self.gpus[&gpu_index];
            let spec = gpu.gpu_model.spec();
            let (name, memory_mib) = (spec.board_name, spec.board_memory_mib);
            let mode = if gpu.mig_enabled { "Enabled" } else { "Disabled" };
            return Ok(format!("{name}, {memory_mib}, {mode}\n"));
        }
        if args.first().is_some_and(|a| a.starts_with("--query-compute-apps=pid")) {
            let count = self.gpus[&gpu_index].processes;
            return Ok((0..count).map(|n| format!("{}\n", 4000 + n)).collect());
        }
        if args.first().map(String::as_str) != Some("mig") {
            return Err(bad());
        }
        if !self.gpus[&gpu_index].mig_enabled {
            if flag("-lgi") || flag("-lci") {
                return Ok("No MIG-enabled devices found.\n".to_string());
            }
            return Err((REJECTED, format!("Unable to change MIG configuration of GPU {gpu_index}: Not Supported")));
        }
        if flag("-lgi") {
            return self.list_gpu_instances(gpu_index);
        }
        if flag("-lci") {
            return self.list_compute_instances(gpu_index);
        }
        let gi_arg = value("-gi").map(|v| v.parse::<u32>().map_err(|_| bad())).transpose()?;
        let is_change = flag("-cgi") || flag("-cci") || flag("-dci") || flag("-dgi");
        if !is_change {
            return Err(bad());
        }
        self.changes += 1;
        if self.fail_change == Some(self.changes) {
            return Err((REJECTED, "Failed to perform operation: Unknown Error (injected)".to_string()));
        }
        let gpu = self.gpus.get_mut(&gpu_index).expect("checked above");
        if let Some(spec_arg) = value("-cgi") {
            return gpu.create_gpu_instance(gpu_index, &spec_arg);
        }
        let gi_id = gi_arg.ok_or_else(bad)?;
        if flag("-cci") {
            return gpu.create_compute_instance(gpu_index, gi_id);
        }
        let in_use = self.mps_daemons.values().flatten().any(|device| {
            gpu.instances.iter().any(|gi| {
                gi.id == gi_id && gi.compute_instances.iter().any(|&ci| *device == fake_mig_uuid(gpu_index, gi.id, ci))
            })
        });
        if gpu.processes > 0 || in_use {
            return Err((
                REJECTED,
                format!("Unable to destroy instances on GPU {gpu_index}: In use by another client"),
            ));
        }
        let position = gpu.instances.iter().position(|gi| gi.id == gi_id).ok_or_else(|| {
            (REJECTED, format!("Unable to find GPU instance ID {gi_id} on GPU {gpu_index}: Not Found"))
        })?;
        if flag("-dci") {
            let gi = &mut gpu.instances[position];
            if gi.compute_instances.is_empty() {
                return Err((REJECTED, format!("No compute instances found in GPU instance {gi_id}: Not Found")));
            }
            let mut out = String::new();
            for ci in gi.compute_instances.drain(..) {
                let _ = writeln!(out, "Successfully destroyed compute instance ID {ci:>2} from GPU {gpu_index:>2} GPU instance ID {gi_id:>2}");
            }
            return Ok(out);
        }
        // -dgi
        if !gpu.instances[position].compute_instances.is_empty() {
            return Err((
                REJECTED,
                format!("Unable to destroy GPU instance ID {gi_id} from GPU {gpu_index}: In use by another client"),
            ));
        }
        gpu.instances.remove(position);
        Ok(format!("Successfully destroyed GPU instance ID {gi_id:>2} from GPU {gpu_index:>2}\n"))
    }

    fn list_gpu_instances(&self, gpu_index: u32) -> Result<String, (i32, String)> {
        let gpu = &self.gpus[&gpu_index];
        if gpu.instances.is_empty() {
            return Err((REJECTED, "No GPU instances found: Not Found".to_string()));
        }
        let rule = format!("+{}+\n", "-".repeat(55));
        let mut out = rule.clone();
        out.push_str("| GPU instances:                                        |\n");
        out.push_str("| GPU   Name             Profile  Instance   Placement  |\n");
        out.push_str("|                          ID       ID       Start:Size |\n");
        let _ = writeln!(out, "|{}|", "=".repeat(55));
        for gi in &gpu.instances {
            let name = format!("MIG {}", gi.profile.name);
            let placement = format!("{}:{}", gi.start, gi.profile.memory_slices);
            let _ = writeln!(
                out,
                "| {gpu_index:>3}  {name:<16} {:>3}      {:>3}       {placement:<9}|",
                gi.profile.profile_id, gi.id
            );
            out.push_str(&rule);
        }
        Ok(out)
    }

    fn list_compute_instances(&self, gpu_index: u32) -> Result<String, (i32, String)> {
        let gpu = &self.gpus[&gpu_index];
        if gpu.instances.iter().all(|gi| gi.compute_instances.is_empty()) {
            return Err((REJECTED, "No compute instances found: Not Found".to_string()));
        }
        let rule = format!("+{}+\n", "-".repeat(68));
        let mut out = rule.clone();
        out.push_str("| Compute instances:                                                 |\n");
        out.push_str("| GPU     GPU       Name             Profile   Instance   Placement  |\n");
        out.push_str("|       Instance                       ID        ID       Start:Size |\n");
        out.push_str("|         ID                                                         |\n");
        let _ = writeln!(out, "|{}|", "=".repeat(68));
        for gi in &gpu.instances {
            for &ci in &gi.compute_instances {
                let name = format!("MIG {}", gi.profile.name);
                let _ = writeln!(
                    out,
                    "| {gpu_index:>3}    {:>3}       {name:<16} {:>3}       {ci:>3}       0:{:<7}|",
                    gi.id, gi.profile.compute_profile_id, gi.profile.compute_slices
                );
                out.push_str(&rule);
            }
        }
        Ok(out)
    }
}

impl FakeGpu {
    fn create_gpu_instance(&mut self, gpu_index: u32, spec_arg: &str) -> Result<String, (i32, String)> {
        let spec = self.gpu_model.spec();
        let (name, start) = match spec_arg.split_once(':') {
            Some((name, start)) => (name, Some(start)),
            None => (spec_arg, None),
        };
        let profile = spec.profile_by_name(name).map_err(|_| {
            (
                REJECTED,
                format!("Unable to create a GPU instance on GPU {gpu_index} using profile {name}: Invalid Argument"),
            )
        })?;
        let mut existing: Vec<Placement> =
            self.instances.iter().map(|gi| Placement { profile: gi.profile, start: gi.start }).collect();
        let start = match start {
            Some(start) => start.parse::<u8>().map_err(|_| (BAD_ARGS, format!("Invalid placement '{start}'")))?,
            // Without a placement the driver picks the first free valid one.
            None => *profile
                .starts
                .iter()
                .find(|&&start| {
                    let mut with = existing.clone();
                    with.push(Placement { profile, start });
                    validate_layout(self.gpu_model, &with).is_ok()
                })
                .ok_or_else(|| insufficient(gpu_index, profile))?,
        };
        existing.push(Placement { profile, start });
        if let Err(error) = validate_layout(self.gpu_model, &existing) {
            return Err((
                REJECTED,
                format!("Unable to create a GPU instance on GPU {gpu_index} using profile {} at {start}: Insufficient Resources ({error})", profile.name),
            ));
        }
        let id = (1..).find(|id| self.instances.iter().all(|gi| gi.id != *id)).expect("ids are unbounded");
        self.instances.push(FakeGi { id, profile, start, compute_instances: Vec::new() });
        Ok(format!(
            "Successfully created GPU instance ID {id:>2} on GPU {gpu_index:>2} using profile MIG {} (ID {:>2})\n",
            profile.name, profile.profile_id
        ))
    }

    fn create_compute_instance(&mut self, gpu_index: u32, gi_id: u32) -> Result<String, (i32, String)> {
        let gi = self.instances.iter_mut().find(|gi| gi.id == gi_id).ok_or_else(|| {
            (REJECTED, format!("Unable to find GPU instance ID {gi_id} on GPU {gpu_index}: Not Found"))
        })?;
        // The default compute instance takes the whole GPU instance.
        if !gi.compute_instances.is_empty() {
            return Err((
                REJECTED,
                format!("Unable to create a compute instance on GPU {gpu_index} GPU instance ID {gi_id}: Insufficient Resources"),
            ));
        }
        gi.compute_instances.push(0);
        Ok(format!(
            "Successfully created compute instance ID  0 on GPU {gpu_index:>2} GPU instance ID {gi_id:>2} using profile MIG {} (ID {:>2})\n",
            gi.profile.name,
            gi.profile.compute_profile_id
        ))
    }
}

fn insufficient(gpu_index: u32, profile: &MigProfile) -> (i32, String) {
    (
        REJECTED,
        format!(
            "Unable to create a GPU instance on GPU {gpu_index} using profile {}: Insufficient Resources",
            profile.name
        ),
    )
}

impl CommandRunner for FakeNvidiaSmi {
    fn run_with(
        &mut self,
        program: &str,
        args: &[String],
        env: &[(String, String)],
        stdin: Option<&str>,
    ) -> Result<CommandOutput, GpuError> {
        if program == "nvidia-cuda-mps-control" {
            let line = command_line(program, args);
            self.log.push(match stdin {
                Some(input) => format!("echo {} | {line}", input.trim()),
                None => line,
            });
            return Ok(self.mps_control(args, env, stdin));
        }
        if env.is_empty() && stdin.is_none() {
            return self.run(program, args);
        }
        self.log.push(command_line(program, args));
        Err(GpuError::Spawn {
            program: program.to_string(),
            message: "the fake runs nvidia-smi without env or input".into(),
        })
    }

    fn run(&mut self, program: &str, args: &[String]) -> Result<CommandOutput, GpuError> {
        if program == "nvidia-cuda-mps-control" {
            return self.run_with(program, args, &[], None);
        }
        self.log.push(command_line(program, args));
        if program != "nvidia-smi" {
            return Err(GpuError::ProgramMissing { program: program.to_string() });
        }
        Ok(match self.execute(args) {
            Ok(stdout) => CommandOutput { status: 0, stdout, stderr: String::new() },
            // nvidia-smi prints its errors on stdout.
            Err((status, message)) => CommandOutput { status, stdout: format!("{message}\n"), stderr: String::new() },
        })
    }
}

impl MigDevices for FakeNvidiaSmi {
    /// One device per compute instance, with a made-up but stable UUID
    /// (`MIG-fake-g<gpu>-gi<gi>-ci<ci>`); a missing GPU is an error, as in
    /// NVML.
    fn mig_devices(&mut self, gpu_index: u32) -> Result<Vec<MigDevice>, GpuError> {
        let gpu = self.gpus.get(&gpu_index).ok_or_else(|| GpuError::Nvml {
            message: format!("GPU {gpu_index}: device: the requested GPU is not found"),
        })?;
        let mut devices: Vec<MigDevice> = gpu
            .instances
            .iter()
            .flat_map(|gi| {
                gi.compute_instances.iter().map(move |&ci| MigDevice {
                    gi_id: gi.id,
                    ci_id: ci,
                    uuid: fake_mig_uuid(gpu_index, gi.id, ci),
                })
            })
            .collect();
        devices.sort_by_key(|device| (device.gi_id, device.ci_id));
        Ok(devices)
    }
}

/// The UUID the fake gives compute instance `ci` of GPU instance `gi`.
pub fn fake_mig_uuid(gpu_index: u32, gi: u32, ci: u32) -> String {
    format!("MIG-fake-g{gpu_index}-gi{gi}-ci{ci}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(fake: &mut FakeNvidiaSmi, args: &[&str]) -> CommandOutput {
        let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
        fake.run("nvidia-smi", &args).unwrap()
    }

    #[test]
    fn rejects_what_the_driver_rejects() {
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        assert!(run(&mut fake, &["mig", "-i", "0", "-cgi", "3g.40gb:4"]).success());
        // 1g@6 lies inside 3g@4's memory slices 4..8.
        let overlap = run(&mut fake, &["mig", "-i", "0", "-cgi", "1g.10gb:6"]);
        assert_eq!(overlap.status, REJECTED);
        assert!(overlap.stdout.contains("Insufficient Resources"), "{}", overlap.stdout);
        // Invalid start for the profile.
        assert!(!run(&mut fake, &["mig", "-i", "0", "-cgi", "3g.40gb:2"]).success());
        // Unknown profile and unknown GPU.
        assert!(!run(&mut fake, &["mig", "-i", "0", "-cgi", "5g.50gb:0"]).success());
        assert!(!run(&mut fake, &["mig", "-i", "3", "-lgi"]).success());
        assert_eq!(fake.layout(0), vec![("3g.40gb".to_string(), 4, 0)]);

        // Too many of a profile: 1g.20gb (two slices) at most 4, and 2g at most 3.
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        for start in ["0", "2", "4"] {
            assert!(run(&mut fake, &["mig", "-i", "0", "-cgi", &format!("2g.20gb:{start}")]).success());
        }
        assert!(!run(&mut fake, &["mig", "-i", "0", "-cgi", "2g.20gb:6"]).success());

        // A GI with compute instances, or with processes, cannot be destroyed.
        assert!(run(&mut fake, &["mig", "-i", "0", "-gi", "1", "-cci"]).success());
        assert!(!run(&mut fake, &["mig", "-i", "0", "-dgi", "-gi", "1"]).success());
        fake.set_processes(0, 2);
        assert!(!run(&mut fake, &["mig", "-i", "0", "-dci", "-gi", "1"]).success());
        assert!(!run(&mut fake, &["mig", "-i", "0", "-dgi", "-gi", "2"]).success());
        fake.set_processes(0, 0);
        assert!(run(&mut fake, &["mig", "-i", "0", "-dci", "-gi", "1"]).success());
        assert!(run(&mut fake, &["mig", "-i", "0", "-dgi", "-gi", "1"]).success());
        assert_eq!(fake.layout(0).len(), 2);
    }

    #[test]
    fn mig_devices_are_the_compute_instances() {
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        assert_eq!(fake.mig_devices(0).unwrap(), vec![]);
        assert!(run(&mut fake, &["mig", "-i", "0", "-cgi", "3g.40gb:4"]).success());
        assert!(run(&mut fake, &["mig", "-i", "0", "-cgi", "2g.20gb:0"]).success());
        // A GPU instance without a compute instance is no device yet.
        assert!(run(&mut fake, &["mig", "-i", "0", "-gi", "2", "-cci"]).success());
        let devices = fake.mig_devices(0).unwrap();
        assert_eq!(devices, vec![MigDevice { gi_id: 2, ci_id: 0, uuid: fake_mig_uuid(0, 2, 0) }]);
        assert!(fake.mig_devices(5).is_err());
    }

    #[test]
    fn a_daemon_on_a_mig_device_keeps_its_instance_in_use() {
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A30_24GB);
        assert_eq!(
            run(
                &mut fake,
                &["--query-gpu=name,memory.total,mig.mode.current", "--format=csv,noheader,nounits", "-i", "0"]
            )
            .stdout,
            "NVIDIA A30, 24576, Enabled\n"
        );
        assert!(run(&mut fake, &["mig", "-i", "0", "-cgi", "2g.12gb:0"]).success());
        assert!(run(&mut fake, &["mig", "-i", "0", "-gi", "1", "-cci"]).success());
        let env = |pipe: &str| {
            vec![
                ("CUDA_MPS_PIPE_DIRECTORY".to_string(), pipe.to_string()),
                ("CUDA_VISIBLE_DEVICES".to_string(), fake_mig_uuid(0, 1, 0)),
            ]
        };
        assert!(fake.run_with("nvidia-cuda-mps-control", &["-d".into()], &env("/p"), None).unwrap().success());
        assert_eq!(fake.daemons(), vec![("/p".to_string(), Some(fake_mig_uuid(0, 1, 0)))]);
        let busy = run(&mut fake, &["mig", "-i", "0", "-dci", "-gi", "1"]);
        assert!(busy.stdout.contains("In use by another client"), "{}", busy.stdout);
        assert!(fake.run_with("nvidia-cuda-mps-control", &[], &env("/p"), Some("quit\n")).unwrap().success());
        assert!(run(&mut fake, &["mig", "-i", "0", "-dci", "-gi", "1"]).success());
    }

    #[test]
    fn the_failure_hook_fails_the_nth_change_only() {
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        fake.fail_nth_change(2);
        assert!(run(&mut fake, &["mig", "-i", "0", "-cgi", "1g.10gb:0"]).success());
        assert!(run(&mut fake, &["mig", "-i", "0", "-lgi"]).success());
        assert!(!run(&mut fake, &["mig", "-i", "0", "-cgi", "1g.10gb:1"]).success());
        assert!(run(&mut fake, &["mig", "-i", "0", "-cgi", "1g.10gb:1"]).success());
        assert_eq!(fake.layout(0).len(), 2);
    }
}
