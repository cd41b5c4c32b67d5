//! The live MIG state of one GPU, read from `nvidia-smi mig -lgi` and
//! `-lci`.

use tessera_core::{GpuModel, MigProfile};

use crate::error::GpuError;
use crate::runner::{command_line, CommandRunner};

/// What `nvidia-smi mig -lgi` prints (with exit status 0) when MIG mode is
/// off.
const MIG_DISABLED: &str = "No MIG-enabled devices found";

/// The program every MIG command runs.
pub const NVIDIA_SMI: &str = "nvidia-smi";

/// One GPU instance as the driver reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveInstance {
    /// GPU-instance id (`-gi`).
    pub gi_id: u32,
    /// Profile name, e.g. `3g.40gb`.
    pub profile: String,
    /// Start memory slice of its placement.
    pub start: u8,
    /// Ids of its compute instances.
    pub compute_instances: Vec<u32>,
}

/// One GPU's live MIG layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveGpu {
    /// GPU index on the node (`-i`).
    pub index: u32,
    /// Its GPU instances, by start slice.
    pub instances: Vec<LiveInstance>,
}

impl LiveGpu {
    /// A GPU without MIG instances.
    pub fn empty(index: u32) -> Self {
        LiveGpu { index, instances: Vec::new() }
    }

    /// `(profile, start, compute instances)` of every instance, sorted: the
    /// layout without the ids the driver happened to assign.
    pub fn layout(&self) -> Vec<(String, u8, usize)> {
        let mut layout: Vec<_> = self
            .instances
            .iter()
            .map(|instance| (instance.profile.clone(), instance.start, instance.compute_instances.len()))
            .collect();
        layout.sort();
        layout
    }
}

/// A MIG compute instance as CUDA sees it: the device a workload is
/// pointed at with `CUDA_VISIBLE_DEVICES=<uuid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigDevice {
    /// Its GPU instance's id (`-gi`).
    pub gi_id: u32,
    /// Its compute instance's id (`-ci`).
    pub ci_id: u32,
    /// `MIG-…`.
    pub uuid: String,
}

/// Looks up the MIG devices (compute instances, with their UUIDs) of a
/// GPU: NVML on a node ([`crate::nvml::NvmlMigDevices`]), the fake driver in
/// tests.
pub trait MigDevices {
    /// Every MIG device of GPU `gpu_index`, by (GPU instance, compute
    /// instance); empty when the GPU has none.
    fn mig_devices(&mut self, gpu_index: u32) -> Result<Vec<MigDevice>, GpuError>;
}

/// Arguments of `nvidia-smi mig -i <gpu> <flag>`.
pub(crate) fn mig_args(gpu: u32, rest: &[&str]) -> Vec<String> {
    let mut args = vec!["mig".to_string(), "-i".to_string(), gpu.to_string()];
    args.extend(rest.iter().map(|s| (*s).to_string()));
    args
}

/// Reads GPU `gpu_index`'s GPU and compute instances and checks every
/// profile and start against `gpu_model`.
pub fn read_live(runner: &mut dyn CommandRunner, gpu_index: u32, gpu_model: GpuModel) -> Result<LiveGpu, GpuError> {
    let spec = gpu_model.spec();
    let args = mig_args(gpu_index, &["-lgi"]);
    let command = command_line(NVIDIA_SMI, &args);
    let text = listing(runner, &args, "No GPU instances found", gpu_index, gpu_model)?;
    let mut instances = Vec::new();
    for (line, fields) in table_rows(&text) {
        let bad = |message: String| GpuError::MigOutput { command: command.clone(), line, message };
        // GPU  MIG <name>  <profile id>  <gi id>  <start>:<size>
        let mig = fields.iter().position(|f| *f == "MIG").ok_or_else(|| bad("no 'MIG <profile>' column".into()))?;
        if mig != 1 || fields.len() < 6 {
            return Err(bad(format!(
                "expected 'GPU MIG name profile-id instance-id start:size', got '{}'",
                fields.join(" ")
            )));
        }
        check_gpu(fields[0], gpu_index).map_err(&bad)?;
        let profile: &MigProfile = spec.profile_by_name(fields[2]).map_err(|e| bad(e.to_string()))?;
        let gi_id = fields[4].parse::<u32>().map_err(|_| bad(format!("bad instance id '{}'", fields[4])))?;
        let start = parse_placement(fields[5]).map_err(&bad)?;
        if !profile.starts.contains(&start) {
            return Err(bad(format!("{} cannot start at memory slice {start} on {}", profile.name, spec.id)));
        }
        instances.push(LiveInstance { gi_id, profile: profile.name.to_string(), start, compute_instances: Vec::new() });
    }
    let args = mig_args(gpu_index, &["-lci"]);
    let command = command_line(NVIDIA_SMI, &args);
    let text = listing(runner, &args, "No compute instances found", gpu_index, gpu_model)?;
    for (line, fields) in table_rows(&text) {
        let bad = |message: String| GpuError::MigOutput { command: command.clone(), line, message };
        // GPU  <gi id>  MIG <name>  <profile id>  <ci id>  <start>:<size>
        if fields.len() < 7 || fields[2] != "MIG" {
            return Err(bad(format!(
                "expected 'GPU gi-id MIG name profile-id ci-id start:size', got '{}'",
                fields.join(" ")
            )));
        }
        check_gpu(fields[0], gpu_index).map_err(&bad)?;
        let gi_id = fields[1].parse::<u32>().map_err(|_| bad(format!("bad GPU instance id '{}'", fields[1])))?;
        let ci_id = fields[5].parse::<u32>().map_err(|_| bad(format!("bad compute instance id '{}'", fields[5])))?;
        let instance = instances
            .iter_mut()
            .find(|instance| instance.gi_id == gi_id)
            .ok_or_else(|| bad(format!("compute instance {ci_id} in unknown GPU instance {gi_id}")))?;
        instance.compute_instances.push(ci_id);
    }
    instances.sort_by_key(|instance| (instance.start, instance.gi_id));
    Ok(LiveGpu { index: gpu_index, instances })
}

/// Number of compute processes on GPU `gpu_index`.
pub fn count_processes(runner: &mut dyn CommandRunner, gpu_index: u32) -> Result<usize, GpuError> {
    let args: Vec<String> = ["--query-compute-apps=pid", "--format=csv,noheader", "-i"]
        .iter()
        .map(|s| (*s).to_string())
        .chain(std::iter::once(gpu_index.to_string()))
        .collect();
    let output = crate::runner::run_checked(runner, NVIDIA_SMI, &args)?;
    Ok(output.stdout.lines().filter(|line| !line.trim().is_empty() && !line.contains("No running")).count())
}

/// Runs a listing of GPU `gpu_index`; "none found" (which nvidia-smi
/// reports with a non-zero status) is an empty listing, and MIG mode off
/// is [`GpuError::MigDisabled`].
fn listing(
    runner: &mut dyn CommandRunner,
    args: &[String],
    none_found: &str,
    gpu_index: u32,
    gpu_model: GpuModel,
) -> Result<String, GpuError> {
    let output = runner.run(NVIDIA_SMI, args)?;
    // With MIG mode off the driver says so, with exit status 0.
    if output.stdout.contains(MIG_DISABLED) || output.stderr.contains(MIG_DISABLED) {
        return Err(GpuError::MigDisabled { gpu: gpu_index, name: gpu_model.spec().display_name.to_string() });
    }
    if output.stdout.contains(none_found) || output.stderr.contains(none_found) {
        return Ok(String::new());
    }
    if !output.success() {
        return Err(GpuError::CommandFailed {
            command: command_line(NVIDIA_SMI, args),
            status: output.status,
            message: output.first_error_line(),
        });
    }
    Ok(output.stdout)
}

/// The data rows of an nvidia-smi box table: `| … |` lines after the `===`
/// rule, split on whitespace, with their 1-based line numbers.
fn table_rows(text: &str) -> Vec<(usize, Vec<&str>)> {
    let mut rows = Vec::new();
    let mut in_body = false;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with("|=") {
            in_body = true;
            continue;
        }
        if !in_body || !line.starts_with('|') {
            continue;
        }
        let fields: Vec<&str> = line.trim_matches('|').split_whitespace().collect();
        if !fields.is_empty() {
            rows.push((number + 1, fields));
        }
    }
    rows
}

fn check_gpu(field: &str, expected: u32) -> Result<(), String> {
    match field.parse::<u32>() {
        Ok(gpu) if gpu == expected => Ok(()),
        _ => Err(format!("row for GPU '{field}', expected GPU {expected}")),
    }
}

fn parse_placement(field: &str) -> Result<u8, String> {
    field
        .split_once(':')
        .and_then(|(start, _size)| start.parse::<u8>().ok())
        .ok_or_else(|| format!("bad placement '{field}' (expected start:size)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::CommandOutput;

    struct Canned(Vec<CommandOutput>);

    impl CommandRunner for Canned {
        fn run(&mut self, _program: &str, _args: &[String]) -> Result<CommandOutput, GpuError> {
            Ok(self.0.remove(0))
        }
    }

    fn ok(stdout: &str) -> CommandOutput {
        CommandOutput { status: 0, stdout: stdout.to_string(), stderr: String::new() }
    }

    #[test]
    fn parses_driver_tables() {
        let lgi = "\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
|   0  MIG 3g.40gb          9        2          4:4     |
+-------------------------------------------------------+
|   0  MIG 2g.20gb         14        3          0:2     |
+-------------------------------------------------------+
";
        let lci = "\
+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
|   0      2       MIG 3g.40gb          2         0          0:3     |
+--------------------------------------------------------------------+
";
        let mut runner = Canned(vec![ok(lgi), ok(lci)]);
        let live = read_live(&mut runner, 0, GpuModel::A100_80GB).unwrap();
        assert_eq!(live.layout(), vec![("2g.20gb".to_string(), 0, 0), ("3g.40gb".to_string(), 4, 1)]);
        assert_eq!(live.instances[1].gi_id, 2);
    }

    #[test]
    fn none_found_is_empty_and_bad_rows_name_the_line() {
        let none =
            CommandOutput { status: 6, stdout: "No GPU instances found: Not Found\n".into(), stderr: String::new() };
        let none_ci = CommandOutput {
            status: 6,
            stdout: "No compute instances found: Not Found\n".into(),
            stderr: String::new(),
        };
        let mut runner = Canned(vec![none, none_ci]);
        assert!(read_live(&mut runner, 1, GpuModel::H100_80GB).unwrap().instances.is_empty());

        // MIG mode off, as an H200's driver (580.159) answered: status 0.
        let off = ok("No MIG-enabled devices found.\n");
        let error = read_live(&mut Canned(vec![off]), 0, GpuModel::H200_141GB).unwrap_err().to_string();
        assert!(error.starts_with("GPU 0 (H200-141GB) is not in MIG mode"), "{error}");

        let bad = "|====|\n|   0  MIG 3g.20gb   9   2   4:4  |\n";
        let error = read_live(&mut Canned(vec![ok(bad)]), 0, GpuModel::A100_80GB).unwrap_err().to_string();
        assert!(error.contains("line 2") && error.contains("3g.20gb"), "{error}");
    }
}
