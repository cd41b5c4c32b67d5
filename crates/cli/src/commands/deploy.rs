//! `tessera deploy`: a plan's MIG layout onto one node's GPUs.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_core::Plan;
use tessera_gpu::deploy::{apply, describe, mps_commands, plan_node};
use tessera_gpu::mig::read_live;
use tessera_gpu::runner::{CommandRunner, SystemRunner};
use tessera_gpu::GpuError;
use tessera_store::Store;

use crate::args::{DeployArgs, DeployCommand};
use crate::inputs::store_path;

/// The journal action of one GPU changed by `deploy --apply`.
const JOURNAL_ACTION: &str = "deploy-apply";

pub fn run(args: DeployArgs, store: Option<&Path>) -> Result<()> {
    // Output is collected and written at the end (also after an error), so
    // a closed pipe is an error rather than a panic.
    let mut out = String::new();
    let result = match &args.command {
        Some(DeployCommand::Status { plan, node }) => status(plan, *node, &mut out),
        None => deploy(args, store, &mut out),
    };
    super::emit(out.as_bytes(), None)?;
    result
}

/// Prints (dry run) or applies the plan's layout; `--apply` journals one
/// entry per GPU, with its outcome, in the store.
fn deploy(args: DeployArgs, store: Option<&Path>, out: &mut String) -> Result<()> {
    let (Some(path), Some(node)) = (args.plan, args.node) else {
        bail!("deploy needs PLAN.json and --node N");
    };
    let plan = read_plan(&path)?;
    let mut runner = SystemRunner;
    let deployments = if args.apply {
        plan_node(Some(&mut runner), &plan, node)?
    } else {
        // A dry run reads the live layout when it can, else assumes empty GPUs.
        match plan_node(Some(&mut runner), &plan, node) {
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
    // Opened before any change, so a store that cannot be opened stops the
    // deployment instead of leaving changes unrecorded.
    let mut journal = if args.apply { Some(Store::open(&store_path(store)?)?) } else { None };
    for deployment in &deployments {
        let gpu = deployment.planned.index;
        writeln!(out, "# GPU {gpu} ({}): live {}", deployment.planned.gpu_model, describe(&deployment.live))?;
        if deployment.steps.is_empty() {
            writeln!(out, "# GPU {gpu}: MIG layout already as planned")?;
        }
        if args.apply {
            let model = deployment.planned.gpu_model;
            let applied = apply(&mut runner, gpu, model, &deployment.steps, args.force);
            if let Some(journal) = journal.as_mut() {
                let outcome = match &applied {
                    Ok(after) if deployment.steps.is_empty() => format!("unchanged: {}", describe(after)),
                    Ok(after) => format!("applied {} step(s): now {}", deployment.steps.len(), describe(after)),
                    Err(error) => format!("failed: {error}"),
                };
                let detail = format!("plan={} node={node} gpu={gpu} outcome={outcome}", path.display());
                journal.journal(JOURNAL_ACTION, &detail)?;
            }
            let after = applied?;
            for step in &deployment.steps {
                writeln!(out, "{step}")?;
            }
            writeln!(out, "# GPU {gpu}: now {}", describe(&after))?;
        } else {
            for step in &deployment.steps {
                writeln!(out, "{step}")?;
            }
        }
        writeln!(out, "# GPU {gpu}: MPS daemons (printed only; `--apply` does not start them)")?;
        for line in mps_commands(&deployment.planned, &args.mps_dir) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

fn status(path: &Path, node: u32, out: &mut String) -> Result<()> {
    let plan = read_plan(path)?;
    let mut runner = SystemRunner;
    let runner: &mut dyn CommandRunner = &mut runner;
    let mut gpus: Vec<_> = plan.gpus.iter().filter(|gpu| gpu.node == node).collect();
    if gpus.is_empty() {
        bail!("{}: no GPU on node {node}", path.display());
    }
    gpus.sort_by_key(|gpu| gpu.index);
    let mut differing = 0;
    for planned in gpus {
        let live = read_live(runner, planned.index, planned.gpu_model)?;
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
        if missing.is_empty() && extra.is_empty() && no_ci.is_empty() {
            writeln!(out, "GPU {}: as planned ({})", planned.index, describe(&live))?;
        } else {
            differing += 1;
            writeln!(
                out,
                "GPU {}: differs: missing [{}], extra [{}], without compute instance [{}]",
                planned.index,
                missing.join(", "),
                extra.join(", "),
                no_ci.join(", ")
            )?;
        }
    }
    if differing > 0 {
        bail!("{differing} GPU(s) on node {node} differ from {}", path.display());
    }
    Ok(())
}

fn read_plan(path: &Path) -> Result<Plan> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a Tessera plan", path.display()))
}
