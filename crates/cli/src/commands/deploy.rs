//! `tessera deploy`: a plan onto one node's GPUs: each GPU's MIG layout,
//! then one MPS control daemon per instance running the registered
//! workload's processes (a shared instance: the `--shared-command`
//! server). The commands come from the registered workloads
//! (resolved before planning); planning, applying and the status are
//! tessera-gpu's node operations, driven by one [`NodeDriver`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tessera_core::text::count;
use tessera_core::Plan;
use tessera_gpu::{
    apply_node, describe, node_status, plan_node, DetachedLauncher, Event, GpuError, GpuPlan, NodeDriver, NodeOptions,
    NodePlan, ServiceCommands,
};
use tessera_store::Store;

use crate::args::{DeployArgs, DeployCommand};
use crate::inputs::store_path;
use crate::terminal::{wrap_command, wrap_words};

pub fn run(args: DeployArgs, store: Option<&Path>) -> Result<()> {
    // Output is collected and written at the end (also after an error),
    // fitted to the terminal: commands wrap with ` \` continuations (they
    // still run when pasted), status lines between words.
    let mut out = String::new();
    let (result, fit): (_, fn(&str) -> String) = match &args.command {
        Some(DeployCommand::Status { plan, node, mps_dir, shared_command }) => {
            let node = NodeArgs { path: plan, node: *node, mps_dir, shared_command: shared_command.as_deref() };
            (status(&node, store, &mut out), |line| {
                let body = line.trim_start();
                let lead = &line[..line.len() - body.len()];
                wrap_words(body, lead, &format!("{lead}    "))
            })
        }
        None => (deploy(args, store, &mut out), wrap_command),
    };
    let fitted: String = out.lines().map(|line| fit(line) + "\n").collect();
    crate::output::emit(fitted.as_bytes(), None)?;
    result
}

/// How to register a workload for `model` at `batch`.
fn registration_hint(model: &str, batch: u32) -> String {
    format!("tessera workload add NAME --family {model} --task inference --batch {batch} --command '…'")
}

/// A node operation's error, with what this command can add: without a
/// driver a deploy can still print its commands; a missing workload can be
/// registered.
fn explained(error: GpuError) -> anyhow::Error {
    match &error {
        GpuError::ProgramMissing { .. } => {
            anyhow::anyhow!("{error} (a deploy without one can still print its commands with --dry-run)")
        }
        GpuError::NoWorkload { model, batch, .. } => {
            anyhow::anyhow!("{error}; register one with `{}`", registration_hint(model, *batch))
        }
        GpuError::NoSharedServer { .. } => anyhow::anyhow!("{error} (give one with --shared-command)"),
        _ => error.into(),
    }
}

/// What a deploy and its status read: the plan, the node, where the MPS
/// state goes and the multi-model server of shared instances.
struct NodeArgs<'a> {
    path: &'a Path,
    node: u32,
    mps_dir: &'a Path,
    shared_command: Option<&'a str>,
}

/// The plan, the node options and the commands of the registered
/// workloads (and the shared instances' server); `journal` is the store
/// opened for writing (an apply), else the store is only read, when it
/// exists.
fn inputs(
    args: &NodeArgs<'_>,
    store_file: &Path,
    journal: Option<&Store>,
    dry_run: bool,
) -> Result<(Plan, NodeOptions, ServiceCommands)> {
    let plan = crate::inputs::read_sound_plan(args.path)?;
    let registered = match journal {
        Some(store) => store.registered_workloads()?,
        None if store_file.exists() => Store::open_read_only(store_file)?.registered_workloads()?,
        None => Vec::new(),
    };
    let commands = ServiceCommands::resolve(&plan, args.node, &registered)
        .with_shared_server(args.shared_command.map(str::to_string));
    let options =
        NodeOptions { node: args.node, mps_root: absolute(args.mps_dir)?, assume_empty_without_driver: dry_run };
    Ok((plan, options, commands))
}

/// Plans the node, naming the plan file when it has no GPU there.
fn planned(
    driver: &mut NodeDriver,
    launcher: &mut DetachedLauncher,
    path: &Path,
    (plan, options, commands): &(Plan, NodeOptions, ServiceCommands),
) -> Result<NodePlan> {
    match plan_node(driver, launcher, plan, commands, options) {
        Err(error @ GpuError::NoGpuOnNode { .. }) => Err(error).with_context(|| path.display().to_string()),
        other => other.map_err(explained),
    }
}

/// `# GPU g (model): live …`.
fn header(gpu: &GpuPlan) -> String {
    let deployment = &gpu.deployment;
    format!("# GPU {} ({}): live {}", gpu.gpu(), deployment.planned.gpu_model, describe(&deployment.live))
}

/// Prints (dry run) or applies the plan on the node; `--apply` journals
/// every action in the store.
fn deploy(args: DeployArgs, store: Option<&Path>, out: &mut String) -> Result<()> {
    let (Some(path), Some(node)) = (args.plan, args.node) else {
        bail!("deploy needs PLAN.json and --node N");
    };
    let store_file = store_path(store)?;
    // Opened before any change, so a store that cannot be opened stops the
    // deployment instead of leaving changes unrecorded.
    let mut journal = if args.apply { Some(Store::open(&store_file)?) } else { None };
    let node_args =
        NodeArgs { path: &path, node, mps_dir: &args.mps_dir, shared_command: args.shared_command.as_deref() };
    let inputs = inputs(&node_args, &store_file, journal.as_ref(), !args.apply)?;
    let mut driver = NodeDriver::default();
    let mut launcher = DetachedLauncher::default();
    let node_plan = planned(&mut driver, &mut launcher, &path, &inputs)?;
    let Some(store) = journal.as_mut() else {
        if node_plan.assumed_empty {
            writeln!(out, "# nvidia-smi not found: the commands assume GPUs in MIG mode without instances")?;
        }
        for (model, batch) in &node_plan.missing_commands {
            writeln!(
                out,
                "# no registered workload for model {model} batch {batch}: `{}`",
                registration_hint(model, *batch)
            )?;
        }
        if node_plan.missing_shared_server.is_some() {
            writeln!(out, "# shared instances run a multi-model server: name its command with --shared-command")?;
        }
        for gpu in &node_plan.gpus {
            writeln!(out, "{}", header(gpu))?;
            if gpu.layout_as_planned() {
                writeln!(out, "# GPU {}: MIG layout already as planned", gpu.gpu())?;
            }
            gpu.lines().iter().try_for_each(|line| writeln!(out, "{line}"))?;
        }
        return Ok(());
    };
    let mut current = None;
    let mut journal_error = None;
    let applied = apply_node(&mut driver, &mut launcher, &node_plan, args.force, &mut |event: Event| {
        if current != Some(event.gpu) {
            current = Some(event.gpu);
            if let Some(gpu) = node_plan.gpus.iter().find(|gpu| gpu.gpu() == event.gpu) {
                let _ = writeln!(out, "{}", header(gpu));
            }
        }
        let _ = writeln!(out, "{event}");
        if let (Some(action), None) = (event.kind.journal_action(), &journal_error) {
            let pid = event.pid.map(|pid| format!(" pid={pid}")).unwrap_or_default();
            let detail = format!("plan={} node={node} gpu={} {}{pid}", path.display(), event.gpu, event.detail);
            journal_error = store.journal(action, &detail).err();
        }
    });
    applied.map_err(explained)?;
    match journal_error {
        Some(error) => Err(error).context("the deployment was applied but not fully journaled"),
        None => Ok(()),
    }
}

/// Compares the node with the plan: the same reading and decisions as a
/// deploy, printed; not as planned is an error.
fn status(args: &NodeArgs<'_>, store: Option<&Path>, out: &mut String) -> Result<()> {
    let (path, node) = (args.path, args.node);
    let store_file = store_path(store)?;
    let (plan, options, commands) = inputs(args, &store_file, None, false)?;
    let mut driver = NodeDriver::default();
    let status = match node_status(&mut driver, &mut DetachedLauncher::default(), &plan, &commands, &options) {
        Err(error @ GpuError::NoGpuOnNode { .. }) => Err(error).with_context(|| path.display().to_string()),
        other => other.map_err(explained),
    }?;
    for gpu in &status.gpus {
        let name = format!("GPU {} ({})", gpu.index, gpu.name);
        if gpu.layout_as_planned {
            writeln!(out, "{name}: as planned ({})", describe(&gpu.live))?;
        } else {
            let layout = &gpu.layout;
            writeln!(
                out,
                "{name}: differs: missing [{}], extra [{}], without compute instance [{}]",
                layout.missing.join(", "),
                layout.extra.join(", "),
                layout.without_compute_instance.join(", ")
            )?;
        }
        for instance in &gpu.instances {
            let state = &instance.state;
            let pids: Vec<String> = state.alive.iter().map(u32::to_string).collect();
            writeln!(
                out,
                "  {} ({}): MPS daemon {}, {} of {} running{}{}",
                instance.dir.instance(),
                instance.serves,
                if state.daemon { "running" } else { "not running" },
                state.alive.len(),
                count(instance.procs, "process"),
                if pids.is_empty() { String::new() } else { format!(" (pids {})", pids.join(", ")) },
                if state.runs(instance.procs) && !instance.as_planned {
                    ", but not as planned (another command, or its GPU's layout changes)"
                } else {
                    ""
                }
            )?;
        }
    }
    if !status.as_planned() {
        let gpus = status.gpus_differing();
        let instances = status.instances_not_as_planned();
        bail!(
            "on node {node}, {} {} from {} and {} {} not run as planned",
            count(gpus, "GPU"),
            if gpus == 1 { "differs" } else { "differ" },
            path.display(),
            count(instances, "instance"),
            if instances == 1 { "does" } else { "do" },
        );
    }
    Ok(())
}

pub(crate) fn absolute(dir: &Path) -> Result<PathBuf> {
    std::path::absolute(dir).with_context(|| format!("--mps-dir {}: cannot make it absolute", dir.display()))
}
