//! Turning a GPU's live MIG layout into a plan's: the steps (as exact
//! `nvidia-smi` command lines), and applying them with rollback.
//!
//! Instances whose (profile, start) already match the plan are kept, so
//! applying a plan twice changes nothing the second time.

use std::fmt;

use tessera_core::layout::validate_layout;
use tessera_core::{GpuAssignment, GpuModel, Placement};

use crate::error::GpuError;
use crate::mig::{count_processes, mig_args, read_live, LiveGpu, NVIDIA_SMI};
use crate::runner::{command_line, run_checked, CommandRunner};

/// One change to a GPU's MIG layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Destroy every compute instance of a GPU instance.
    DestroyComputeInstances {
        /// GPU index.
        gpu: u32,
        /// GPU-instance id.
        gi_id: u32,
    },
    /// Destroy a GPU instance (without compute instances).
    DestroyGpuInstance {
        /// GPU index.
        gpu: u32,
        /// GPU-instance id.
        gi_id: u32,
    },
    /// Create a GPU instance at an explicit placement.
    CreateGpuInstance {
        /// GPU index.
        gpu: u32,
        /// Profile name.
        profile: String,
        /// Start memory slice.
        start: u8,
    },
    /// Create the default compute instance in the GPU instance at
    /// (profile, start); its id is looked up when the step runs.
    CreateComputeInstance {
        /// GPU index.
        gpu: u32,
        /// Profile of the GPU instance.
        profile: String,
        /// Start of the GPU instance.
        start: u8,
        /// Its id, when known at planning time.
        gi_id: Option<u32>,
    },
}

impl Step {
    /// The GPU the step changes.
    pub fn gpu(&self) -> u32 {
        match self {
            Step::DestroyComputeInstances { gpu, .. }
            | Step::DestroyGpuInstance { gpu, .. }
            | Step::CreateGpuInstance { gpu, .. }
            | Step::CreateComputeInstance { gpu, .. } => *gpu,
        }
    }

    /// The `nvidia-smi` arguments; `gi` names the GPU instance of a
    /// compute-instance creation.
    fn args(&self, gi: &str) -> Vec<String> {
        match self {
            Step::DestroyComputeInstances { gpu, gi_id } => mig_args(*gpu, &["-dci", "-gi", &gi_id.to_string()]),
            Step::DestroyGpuInstance { gpu, gi_id } => mig_args(*gpu, &["-dgi", "-gi", &gi_id.to_string()]),
            Step::CreateGpuInstance { gpu, profile, start } => mig_args(*gpu, &["-cgi", &format!("{profile}:{start}")]),
            Step::CreateComputeInstance { gpu, .. } => mig_args(*gpu, &["-gi", gi, "-cci"]),
        }
    }
}

impl fmt::Display for Step {
    /// The command line; a GPU instance not yet created shows as
    /// `<gi:PROFILE@START>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gi = match self {
            Step::CreateComputeInstance { gi_id: Some(id), .. } => id.to_string(),
            Step::CreateComputeInstance { profile, start, .. } => format!("<gi:{profile}@{start}>"),
            _ => String::new(),
        };
        f.write_str(&command_line(NVIDIA_SMI, &self.args(&gi)))
    }
}

/// A wanted instance: (profile, start, with a compute instance?).
type Target = (String, u8, bool);

/// The steps that turn `live` into `targets`. Live instances matching a
/// target's (profile, start) are kept; the rest are destroyed first, then
/// the missing instances created.
fn diff(live: &LiveGpu, targets: &[Target]) -> Vec<Step> {
    let gpu = live.index;
    let mut unmatched: Vec<&Target> = targets.iter().collect();
    let mut destroys = Vec::new();
    let mut fixes = Vec::new();
    for instance in &live.instances {
        let found =
            unmatched.iter().position(|(profile, start, _)| *profile == instance.profile && *start == instance.start);
        match found {
            Some(position) => {
                let (_, _, want_ci) = unmatched.remove(position);
                let has_ci = !instance.compute_instances.is_empty();
                if *want_ci && !has_ci {
                    fixes.push(Step::CreateComputeInstance {
                        gpu,
                        profile: instance.profile.clone(),
                        start: instance.start,
                        gi_id: Some(instance.gi_id),
                    });
                } else if !*want_ci && has_ci {
                    fixes.push(Step::DestroyComputeInstances { gpu, gi_id: instance.gi_id });
                }
            }
            None => {
                if !instance.compute_instances.is_empty() {
                    destroys.push(Step::DestroyComputeInstances { gpu, gi_id: instance.gi_id });
                }
                destroys.push(Step::DestroyGpuInstance { gpu, gi_id: instance.gi_id });
            }
        }
    }
    let mut steps = destroys;
    steps.extend(fixes);
    for (profile, start, want_ci) in unmatched {
        steps.push(Step::CreateGpuInstance { gpu, profile: profile.clone(), start: *start });
        if *want_ci {
            steps.push(Step::CreateComputeInstance { gpu, profile: profile.clone(), start: *start, gi_id: None });
        }
    }
    steps
}

/// Checks a planned GPU's layout against its model's placement rules.
fn check_planned(planned: &GpuAssignment) -> Result<(), GpuError> {
    let spec = planned.gpu_model.spec();
    let bad = |message: String| GpuError::PlanGpu { gpu: planned.index, message };
    let placements = planned
        .layout()
        .map(|(profile, _, start)| {
            spec.profile_by_name(profile).map(|profile| Placement { profile, start }).map_err(|e| bad(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    validate_layout(planned.gpu_model, &placements).map_err(|e| bad(e.to_string()))
}

/// The steps that turn GPU `live` into the plan's GPU `planned`: every
/// planned instance, dedicated or shared, gets its GPU instance at its
/// start and the default compute instance.
pub fn plan_steps(live: &LiveGpu, planned: &GpuAssignment) -> Result<Vec<Step>, GpuError> {
    check_planned(planned)?;
    let targets: Vec<Target> = planned.layout().map(|(profile, _, start)| (profile.to_string(), start, true)).collect();
    Ok(diff(live, &targets))
}

/// Runs `steps` on GPU `gpu` (of `gpu_model`), refusing a GPU with running
/// compute processes unless `force`; `on_step` gets the command line of
/// each step that ran (with the ids it used). On a failing step it stops, restores
/// the layout the GPU had before (destroying what was created and
/// recreating what was destroyed at the same placements) and returns
/// [`GpuError::ApplyFailed`]. On success it returns the new live layout.
pub fn apply(
    runner: &mut dyn CommandRunner,
    gpu: u32,
    gpu_model: GpuModel,
    steps: &[Step],
    force: bool,
    on_step: &mut dyn FnMut(&str),
) -> Result<LiveGpu, GpuError> {
    let before = read_live(runner, gpu, gpu_model)?;
    if steps.is_empty() {
        return Ok(before);
    }
    if let Some(step) = steps.iter().find(|step| step.gpu() != gpu) {
        return Err(GpuError::PlanGpu { gpu, message: format!("step `{step}` is for GPU {}", step.gpu()) });
    }
    let processes = count_processes(runner, gpu)?;
    if processes > 0 && !force {
        return Err(GpuError::ProcessesRunning { gpu, count: processes });
    }
    for step in steps {
        match run_step(runner, gpu_model, step) {
            Ok(line) => on_step(&line),
            Err((line, cause)) => {
                let rollback = match rollback(runner, gpu_model, &before) {
                    Ok(()) => format!("rolled back to the previous layout ({})", describe(&before)),
                    Err(error) => format!("ROLLBACK FAILED, the GPU is left partly changed: {error}"),
                };
                return Err(GpuError::ApplyFailed { gpu, step: line, cause, rollback });
            }
        }
    }
    read_live(runner, gpu, gpu_model)
}

/// Runs one step and returns its command line; on failure, the line and the
/// cause.
fn run_step(runner: &mut dyn CommandRunner, gpu_model: GpuModel, step: &Step) -> Result<String, (String, String)> {
    let gi = match step {
        Step::CreateComputeInstance { gi_id: Some(id), .. } => id.to_string(),
        Step::CreateComputeInstance { gpu, profile, start, gi_id: None } => {
            let live = read_live(runner, *gpu, gpu_model).map_err(|e| (step.to_string(), e.to_string()))?;
            match live.instances.iter().find(|i| i.profile == *profile && i.start == *start) {
                Some(instance) => instance.gi_id.to_string(),
                None => return Err((step.to_string(), format!("no GPU instance {profile}@{start} to hold it"))),
            }
        }
        _ => String::new(),
    };
    let args = step.args(&gi);
    let line = command_line(NVIDIA_SMI, &args);
    match run_checked(runner, NVIDIA_SMI, &args) {
        Ok(_) => Ok(line),
        Err(GpuError::CommandFailed { message, .. }) => Err((line, message)),
        Err(other) => Err((line, other.to_string())),
    }
}

/// Restores `before`'s layout on its GPU.
fn rollback(runner: &mut dyn CommandRunner, gpu_model: GpuModel, before: &LiveGpu) -> Result<(), GpuError> {
    let now = read_live(runner, before.index, gpu_model)?;
    let targets: Vec<Target> = before
        .instances
        .iter()
        .map(|instance| (instance.profile.clone(), instance.start, !instance.compute_instances.is_empty()))
        .collect();
    for step in diff(&now, &targets) {
        run_step(runner, gpu_model, &step).map_err(|(line, cause)| GpuError::CommandFailed {
            command: line,
            status: -1,
            message: cause,
        })?;
    }
    let after = read_live(runner, before.index, gpu_model)?;
    if after.layout() != before.layout() {
        return Err(GpuError::PlanGpu {
            gpu: before.index,
            message: format!("layout after rollback is {}, expected {}", describe(&after), describe(before)),
        });
    }
    Ok(())
}

/// `3g.40gb@0, 1g.10gb@4` or `no instances`.
pub fn describe(live: &LiveGpu) -> String {
    if live.instances.is_empty() {
        return "no instances".to_string();
    }
    live.instances.iter().map(|i| format!("{}@{}", i.profile, i.start)).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::plan_layouts;
    use crate::deploy::test_plans::{expected, gpu, plan};
    use crate::fake::FakeNvidiaSmi;
    use tessera_core::Plan;

    fn plan_node(
        runner: Option<&mut dyn CommandRunner>,
        plan: &Plan,
        node: u32,
    ) -> Result<Vec<crate::deploy::GpuDeployment>, GpuError> {
        plan_layouts(runner, plan, node)
    }

    fn apply_node(fake: &mut FakeNvidiaSmi, plan: &Plan, node: u32, force: bool) -> Result<(), GpuError> {
        for deployment in plan_node(Some(fake), plan, node)? {
            apply(fake, deployment.planned.index, deployment.planned.gpu_model, &deployment.steps, force, &mut |_| {})?;
        }
        Ok(())
    }

    const LAYOUT_A: &[(&str, u8)] = &[("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3)];
    const LAYOUT_B: &[(&str, u8)] = &[("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)];

    #[test]
    fn dry_run_steps_on_empty_gpus_build_exactly_the_plan() {
        let plan = plan(vec![gpu(0, 0, LAYOUT_A), gpu(0, 1, LAYOUT_B), gpu(1, 0, &[("7g.80gb", 0)])]);
        let deployments = plan_node(None, &plan, 0).unwrap();
        assert_eq!(deployments.len(), 2);
        let lines: Vec<String> = deployments[0].steps.iter().map(ToString::to_string).collect();
        assert_eq!(lines[0], "nvidia-smi mig -i 0 -cgi 3g.40gb:4");
        assert_eq!(lines[1], "nvidia-smi mig -i 0 -gi <gi:3g.40gb@4> -cci");
        assert_eq!(lines.len(), 8);

        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB).with_gpu(1, GpuModel::A100_80GB);
        for deployment in &deployments {
            apply(&mut fake, deployment.planned.index, GpuModel::A100_80GB, &deployment.steps, false, &mut |_| {})
                .unwrap();
        }
        assert_eq!(fake.layout(0), expected(LAYOUT_A));
        assert_eq!(fake.layout(1), expected(LAYOUT_B));
    }

    #[test]
    fn applying_twice_changes_nothing_the_second_time() {
        let plan = plan(vec![gpu(0, 0, LAYOUT_A)]);
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        apply_node(&mut fake, &plan, 0, false).unwrap();
        let deployments = plan_node(Some(&mut fake), &plan, 0).unwrap();
        assert!(deployments[0].steps.is_empty(), "{:?}", deployments[0].steps);
        let changes_before = fake
            .log
            .iter()
            .filter(|l| [" -cgi", " -cci", " -dci", " -dgi"].iter().any(|flag| l.contains(flag)))
            .count();
        apply_node(&mut fake, &plan, 0, false).unwrap();
        let changes_after = fake
            .log
            .iter()
            .filter(|l| [" -cgi", " -cci", " -dci", " -dgi"].iter().any(|flag| l.contains(flag)))
            .count();
        assert_eq!(changes_before, changes_after);
        assert_eq!(fake.layout(0), expected(LAYOUT_A));
    }

    #[test]
    fn replaces_only_what_differs() {
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        apply_node(&mut fake, &plan(vec![gpu(0, 0, LAYOUT_A)]), 0, false).unwrap();
        let target = plan(vec![gpu(0, 0, &[("3g.40gb", 4), ("3g.40gb", 0)])]);
        let steps = &plan_node(Some(&mut fake), &target, 0).unwrap()[0].steps;
        // Three instances go (each CI then GI), one is created; 3g@4 stays.
        assert_eq!(steps.len(), 3 * 2 + 2, "{steps:?}");
        assert!(steps.iter().all(|s| !matches!(s, Step::CreateGpuInstance { start: 4, .. })));
        apply_node(&mut fake, &target, 0, false).unwrap();
        assert_eq!(fake.layout(0), expected(&[("3g.40gb", 4), ("3g.40gb", 0)]));
    }

    #[test]
    fn a_gpu_with_processes_is_refused_without_force() {
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        apply_node(&mut fake, &plan(vec![gpu(0, 0, LAYOUT_A)]), 0, false).unwrap();
        fake.set_processes(0, 3);
        let target = plan(vec![gpu(0, 0, LAYOUT_B)]);
        let error = apply_node(&mut fake, &target, 0, false).unwrap_err();
        assert!(matches!(error, GpuError::ProcessesRunning { gpu: 0, count: 3 }), "{error}");
        assert!(error.to_string().contains("--force"));
        assert_eq!(fake.layout(0), expected(LAYOUT_A));
        // With force the driver itself refuses to destroy instances in use,
        // and the GPU is left as it was.
        let error = apply_node(&mut fake, &target, 0, true).unwrap_err().to_string();
        assert!(error.contains("In use") && error.contains("rolled back"), "{error}");
        assert_eq!(fake.layout(0), expected(LAYOUT_A));
    }

    #[test]
    fn a_failure_mid_apply_rolls_back_exactly() {
        for fail_at in 1..=10 {
            let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
            apply_node(&mut fake, &plan(vec![gpu(0, 0, LAYOUT_A)]), 0, false).unwrap();
            let before = fake.layout(0);
            let target = plan(vec![gpu(0, 0, LAYOUT_B)]);
            let deployment = plan_node(Some(&mut fake), &target, 0).unwrap().remove(0);
            assert_eq!(deployment.steps.len(), 4 * 2 + 3 * 2);
            fake.fail_nth_change(fail_at);
            let error = apply(&mut fake, 0, GpuModel::A100_80GB, &deployment.steps, false, &mut |_| {}).unwrap_err();
            let message = error.to_string();
            assert!(matches!(error, GpuError::ApplyFailed { .. }), "{message}");
            assert!(
                message.contains("injected") && message.contains("rolled back to the previous layout"),
                "{message}"
            );
            assert_eq!(fake.layout(0), before, "failing change {fail_at}");
        }
    }

    #[test]
    fn rejects_a_plan_the_driver_would_reject() {
        let bad = plan(vec![gpu(0, 0, &[("3g.40gb", 4), ("1g.10gb", 6)])]);
        let error = plan_node(None, &bad, 0).unwrap_err().to_string();
        assert!(error.contains("GPU 0") && error.contains("share memory slices"), "{error}");
        // The fake rejects the same placement when asked directly.
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        let steps = [
            Step::CreateGpuInstance { gpu: 0, profile: "3g.40gb".into(), start: 4 },
            Step::CreateGpuInstance { gpu: 0, profile: "1g.10gb".into(), start: 6 },
        ];
        let error = apply(&mut fake, 0, GpuModel::A100_80GB, &steps, false, &mut |_| {}).unwrap_err().to_string();
        assert!(error.contains("-cgi 1g.10gb:6") && error.contains("Insufficient Resources"), "{error}");
        assert!(fake.layout(0).is_empty());
    }
}
