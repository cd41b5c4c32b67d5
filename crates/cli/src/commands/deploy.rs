//! `tessera deploy`: a plan onto one node's GPUs: each GPU's MIG layout,
//! then one MPS control daemon per instance running the registered
//! workload's processes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tessera_core::{GpuAssignment, InstanceAssignment, Plan};
use tessera_gpu::deploy::model::check_installed;
use tessera_gpu::deploy::{
    apply_node, describe, plan_gpu, plan_node, DetachedLauncher, Event, GpuDeployment, GpuPlan, InstanceDir,
};
use tessera_gpu::mig::read_live;
use tessera_gpu::nvml::NodeDriver;
use tessera_gpu::runner::SystemRunner;
use tessera_gpu::GpuError;
use tessera_store::{RegisteredWorkload, Store};

use crate::args::{DeployArgs, DeployCommand};
use crate::inputs::store_path;

pub fn run(args: DeployArgs, store: Option<&Path>) -> Result<()> {
    // Output is collected and written at the end (also after an error), so
    // a closed pipe is an error rather than a panic.
    let mut out = String::new();
    let result = match &args.command {
        Some(DeployCommand::Status { plan, node, mps_dir }) => status(plan, *node, mps_dir, &mut out),
        None => deploy(args, store, &mut out),
    };
    crate::output::emit(out.as_bytes(), None)?;
    result
}

/// The registered workload serving `model` at `batch`: of its family and
/// batch, an inference workload before a training one, else the first by
/// name.
fn workload_for<'a>(registered: &'a [RegisteredWorkload], model: &str, batch: u32) -> Option<&'a RegisteredWorkload> {
    registered.iter().filter(|w| w.family == model && w.batch == batch).min_by_key(|w| w.task != "inference")
}

/// The command serving each (model, batch) the deployments need; `None`
/// where no workload is registered for it.
fn commands_for(
    deployments: &[GpuDeployment],
    registered: &[RegisteredWorkload],
) -> BTreeMap<(String, u32), Option<String>> {
    deployments
        .iter()
        .flat_map(|deployment| &deployment.planned.instances)
        .map(|i| {
            let command = workload_for(registered, &i.model, i.batch).map(RegisteredWorkload::command_line);
            ((i.model.clone(), i.batch), command)
        })
        .collect()
}

/// How to register a workload for `model` at `batch`.
fn registration_hint(model: &str, batch: u32) -> String {
    format!("tessera workload add NAME --family {model} --task inference --batch {batch} --command '…'")
}

/// Refuses (`apply`) or notes in `out` (dry run) the (model, batch) pairs
/// without a registered workload.
fn check_missing(commands: &BTreeMap<(String, u32), Option<String>>, apply: bool, out: &mut String) -> Result<()> {
    let missing: Vec<&(String, u32)> = commands.iter().filter(|(_, c)| c.is_none()).map(|(key, _)| key).collect();
    if let (true, Some((model, batch))) = (apply, missing.first()) {
        let others: Vec<String> = missing[1..].iter().map(|(m, b)| format!("{m} batch {b}")).collect();
        let also = if others.is_empty() { String::new() } else { format!(" (also missing: {})", others.join(", ")) };
        bail!(
            "no registered workload for model {model} batch {batch}{also}; nothing was changed; register one with `{}`",
            registration_hint(model, *batch)
        );
    }
    for (model, batch) in missing {
        writeln!(
            out,
            "# no registered workload for model {model} batch {batch}: `{}`",
            registration_hint(model, *batch)
        )?;
    }
    Ok(())
}

/// Prints (dry run) or applies the plan on the node; `--apply` journals
/// every action in the store.
fn deploy(args: DeployArgs, store: Option<&Path>, out: &mut String) -> Result<()> {
    let (Some(path), Some(node)) = (args.plan, args.node) else {
        bail!("deploy needs PLAN.json and --node N");
    };
    let plan = read_plan(&path)?;
    let mut driver = NodeDriver::default();
    let deployments = if args.apply {
        plan_node(Some(&mut driver), &plan, node)?
    } else {
        // A dry run reads the live layout when it can, else assumes empty GPUs.
        match plan_node(Some(&mut driver), &plan, node) {
            Err(GpuError::ProgramMissing { .. }) => {
                writeln!(out, "# nvidia-smi not found: the commands assume GPUs in MIG mode without instances")?;
                plan_node(None, &plan, node)?
            }
            other => other?,
        }
    };
    if deployments.is_empty() {
        bail!("{}: no GPU on node {node}", path.display());
    }
    let store_file = store_path(store)?;
    // Opened before any change, so a store that cannot be opened stops the
    // deployment instead of leaving changes unrecorded.
    let mut journal = if args.apply { Some(Store::open(&store_file)?) } else { None };
    let registered = match &journal {
        Some(store) => store.registered_workloads()?,
        None if store_file.exists() => Store::open_read_only(&store_file)?.registered_workloads()?,
        None => Vec::new(),
    };
    let commands = commands_for(&deployments, &registered);
    check_missing(&commands, args.apply, out)?;
    let mut command_for = |instance: &InstanceAssignment| match commands.get(&(instance.model.clone(), instance.batch))
    {
        Some(Some(command)) => command.clone(),
        _ => format!("<command of a workload for {} batch {}>", instance.model, instance.batch),
    };
    let root = absolute(&args.mps_dir)?;
    let mut launcher = DetachedLauncher::default();
    let plans = deployments
        .into_iter()
        .map(|deployment| plan_gpu(&mut driver, &mut launcher, deployment, &root, &mut command_for))
        .collect::<Result<Vec<GpuPlan>, GpuError>>()?;
    let header = |plan: &GpuPlan| {
        let deployment = &plan.deployment;
        format!("# GPU {} ({}): live {}", plan.gpu(), deployment.planned.gpu_model, describe(&deployment.live))
    };
    let Some(store) = journal.as_mut() else {
        for plan in &plans {
            writeln!(out, "{}", header(plan))?;
            if plan.deployment.steps.is_empty() {
                writeln!(out, "# GPU {}: MIG layout already as planned", plan.gpu())?;
            }
            plan.lines().iter().try_for_each(|line| writeln!(out, "{line}"))?;
        }
        return Ok(());
    };
    let mut current = None;
    let mut journal_error = None;
    let applied = apply_node(&mut driver, &mut launcher, &plans, args.force, &mut |event: Event| {
        if current != Some(event.gpu) {
            current = Some(event.gpu);
            if let Some(plan) = plans.iter().find(|plan| plan.gpu() == event.gpu) {
                let _ = writeln!(out, "{}", header(plan));
            }
        }
        let _ = writeln!(out, "{event}");
        if let (Some(action), None) = (event.kind.journal_action(), &journal_error) {
            let pid = event.pid.map(|pid| format!(" pid={pid}")).unwrap_or_default();
            let detail = format!("plan={} node={node} gpu={} {}{pid}", path.display(), event.gpu, event.detail);
            journal_error = store.journal(action, &detail).err();
        }
    });
    applied?;
    match journal_error {
        Some(error) => Err(error).context("the deployment was applied but not fully journaled"),
        None => Ok(()),
    }
}

fn status(path: &Path, node: u32, mps_dir: &Path, out: &mut String) -> Result<()> {
    let plan = read_plan(path)?;
    let mut gpus: Vec<&GpuAssignment> = plan.gpus.iter().filter(|gpu| gpu.node == node).collect();
    if gpus.is_empty() {
        bail!("{}: no GPU on node {node}", path.display());
    }
    gpus.sort_by_key(|gpu| gpu.index);
    let root = absolute(mps_dir)?;
    let mut runner = SystemRunner;
    let mut launcher = DetachedLauncher::default();
    let (mut differing, mut idle) = (0, 0);
    for planned in gpus {
        let installed = check_installed(&mut runner, planned)?;
        let live = read_live(&mut runner, planned.index, planned.gpu_model)?;
        let mut want: Vec<(String, u8)> = planned.instances.iter().map(|i| (i.profile.clone(), i.start)).collect();
        want.sort();
        let mut have: Vec<(String, u8)> = live.instances.iter().map(|i| (i.profile.clone(), i.start)).collect();
        have.sort();
        let missing: Vec<String> = want.iter().filter(|w| !have.contains(w)).map(|(p, s)| format!("{p}@{s}")).collect();
        let extra: Vec<String> = have.iter().filter(|h| !want.contains(h)).map(|(p, s)| format!("{p}@{s}")).collect();
        let no_ci: Vec<String> = live
            .instances
            .iter()
            .filter(|i| i.compute_instances.is_empty())
            .map(|i| format!("{}@{}", i.profile, i.start))
            .collect();
        let gpu = format!("GPU {} ({})", planned.index, installed.name);
        if missing.is_empty() && extra.is_empty() && no_ci.is_empty() {
            writeln!(out, "{gpu}: as planned ({})", describe(&live))?;
        } else {
            differing += 1;
            writeln!(
                out,
                "{gpu}: differs: missing [{}], extra [{}], without compute instance [{}]",
                missing.join(", "),
                extra.join(", "),
                no_ci.join(", ")
            )?;
        }
        for instance in &planned.instances {
            let dir = InstanceDir::new(&root, planned.index, &instance.profile, instance.start);
            let state = dir.state(&mut runner, &mut launcher)?;
            if !state.runs(instance.procs) {
                idle += 1;
            }
            let pids: Vec<String> = state.alive.iter().map(u32::to_string).collect();
            writeln!(
                out,
                "  {} ({} batch {}): MPS daemon {}, {} of {} process(es) running{}",
                dir.instance(),
                instance.model,
                instance.batch,
                if state.daemon { "running" } else { "not running" },
                state.alive.len(),
                instance.procs,
                if pids.is_empty() { String::new() } else { format!(" (pids {})", pids.join(", ")) }
            )?;
        }
    }
    if differing > 0 || idle > 0 {
        bail!(
            "on node {node}, {differing} GPU(s) differ from {} and {idle} instance(s) do not run their MPS daemon and processes",
            path.display()
        );
    }
    Ok(())
}

fn absolute(dir: &Path) -> Result<PathBuf> {
    std::path::absolute(dir).with_context(|| format!("--mps-dir {}: cannot make it absolute", dir.display()))
}

fn read_plan(path: &Path) -> Result<Plan> {
    Ok(tessera_store::read_plan(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_gpu::mig::LiveGpu;

    fn workload(name: &str, family: &str, task: &str, batch: u32) -> RegisteredWorkload {
        RegisteredWorkload {
            name: name.to_string(),
            family: family.to_string(),
            task: task.to_string(),
            batch,
            command: format!("run {name} --batch {{batch}}"),
            throughput_regex: None,
        }
    }

    #[test]
    fn the_workload_of_the_same_family_and_batch_serves_inference_first() {
        let registered = [
            workload("a-train", "bert-base", "training", 8),
            workload("b-inf", "bert-base", "inference", 8),
            workload("c-inf", "bert-base", "inference", 8),
            workload("d-inf", "bert-base", "inference", 4),
            workload("e-train", "gpt2", "training", 1),
        ];
        let name = |model, batch| workload_for(&registered, model, batch).map(|w| w.name.as_str());
        assert_eq!(name("bert-base", 8), Some("b-inf"));
        assert_eq!(name("bert-base", 4), Some("d-inf"));
        assert_eq!(name("gpt2", 1), Some("e-train"));
        assert_eq!(name("gpt2", 2), None);
        assert_eq!(name("resnet50", 8), None);
    }

    #[test]
    fn commands_are_filled_in_and_missing_ones_are_none() {
        let planned: GpuAssignment = serde_json::from_value(serde_json::json!({
            "node": 0, "index": 1, "gpu_model": "a100-80gb", "instances": [
                {"profile": "3g.40gb", "size": 3, "start": 4, "service": "s", "model": "bert-base", "batch": 8,
                 "procs": 2, "throughput_rps": 1.0, "latency_ms": 1.0},
                {"profile": "1g.10gb", "size": 1, "start": 0, "service": "t", "model": "gpt2", "batch": 1,
                 "procs": 1, "throughput_rps": 1.0, "latency_ms": 1.0}
            ]
        }))
        .unwrap();
        let deployment = GpuDeployment { planned, live: LiveGpu::empty(1), steps: Vec::new() };
        let commands = commands_for(&[deployment], &[workload("b-inf", "bert-base", "inference", 8)]);
        assert_eq!(commands[&("bert-base".to_string(), 8)].as_deref(), Some("run b-inf --batch 8"));
        assert_eq!(commands[&("gpt2".to_string(), 1)], None);
        assert_eq!(
            registration_hint("gpt2", 1),
            "tessera workload add NAME --family gpt2 --task inference --batch 1 --command '…'"
        );
    }
}
