//! `tessera k8s …` and `tessera agent`: a plan on a Kubernetes cluster.
//! The arguments are `args::k8s`'s; every decision is tessera-k8s's.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use tessera_core::text::count;
use tessera_gpu::{plan_node_layouts, NodeDriver};
use tessera_k8s::{
    apply_plan, cluster_status, manifests_with, merge_parts, node_file_name, reconcile_node, recorded_parts, run_agent,
    slo_rules, AgentOptions, ApplyOptions, Cluster, ExportOptions, Manifest, Outcome, PlanObjects, PlanSource,
    Progress,
};

use crate::args::{AgentArgs, K8sCommand};
use crate::output::{note, outln};

/// Runs `tessera k8s …`.
pub fn run(command: K8sCommand) -> Result<()> {
    match command {
        K8sCommand::Inventory { cluster } => inventory(&cluster.connect()?),
        K8sCommand::Export { plan, output, namespace, objects } => {
            let (routes, pods) = objects.resolve()?;
            export(&plan, &output, &ExportOptions { namespace, routes, pods })
        }
        K8sCommand::Apply { plan, dry_run, concurrency, force_conflicts, timeout, namespace, objects, cluster } => {
            let plan = crate::inputs::read_sound_plan(&plan)?;
            let (routes, pods) = objects.resolve()?;
            let options = ApplyOptions {
                routes,
                pods,
                namespace,
                dry_run,
                force_conflicts,
                layout_timeout: Duration::from_secs(timeout),
                poll: Duration::from_secs(2),
                concurrency: concurrency as usize,
            };
            let cluster = cluster.connect()?;
            let mut printed = Ok(());
            let prefix = if dry_run { "(dry run) " } else { "" };
            let actions = apply_plan(&cluster, &plan, &options, &mut |progress| {
                if printed.is_ok() {
                    printed = match progress {
                        Progress::Step { number, of, summary } => outln!("{prefix}step {number} of {of}: {summary}"),
                        Progress::Action(action) if action.change != tessera_k8s::Change::Unchanged => {
                            outln!("{prefix}{action}")
                        }
                        Progress::Action(_) => Ok(()),
                    };
                }
            })?;
            printed?;
            let changed = actions.iter().filter(|a| a.change != tessera_k8s::Change::Unchanged).count();
            note(format_args!(
                "{} of {} changed{}",
                changed,
                count(actions.len(), "object"),
                if dry_run { " (dry run: nothing written)" } else { "" }
            ));
            Ok(())
        }
        K8sCommand::Status { plan, namespace, cluster } => status(plan.as_deref(), &namespace, &cluster.connect()?),
    }
}

fn inventory(cluster: &Cluster) -> Result<()> {
    let found = cluster.inventory()?;
    for line in &found.nodes.left_out {
        note(format_args!("{line}"));
    }
    if found.nodes.nodes.is_empty() {
        bail!("no GPU node with a GPU model Tessera knows in the cluster ({})", cluster.context());
    }
    for node in &found.nodes.nodes {
        let devices = found.mig_devices.get(&node.name).map_or(0, Vec::len);
        outln!(
            "{}  {} × {}  {}  {}",
            node.name,
            node.gpu_count,
            node.gpu_model,
            if node.mig_capable { "MIG-capable" } else { "no MIG" },
            count(devices, "MIG device")
        )?;
    }
    let fleet: Vec<String> = found.nodes.fleet().iter().map(|(model, n)| format!("{model}:count={n}")).collect();
    outln!("fleet: {}", if fleet.is_empty() { "none".to_string() } else { fleet.join(" ") })
}

fn export(plan: &Path, output: &Path, options: &ExportOptions) -> Result<()> {
    let plan = crate::inputs::read_sound_plan(plan)?;
    let no_devices = BTreeMap::new();
    let made = PlanObjects::new(&plan, options, &no_devices)?;
    for line in &made.notes {
        note(format_args!("{line}"));
    }
    if output == Path::new("-") {
        let exported = manifests_with(&plan, options, &no_devices)?;
        return crate::output::emit(exported.yaml_stream().as_bytes(), None);
    }
    std::fs::create_dir_all(output).with_context(|| format!("cannot create {}", output.display()))?;
    // Generated output, rewritten whole by the next export: one file per
    // node, made and written node by node on every core (a fleet's objects
    // are never all in memory), plainly (no sync per file).
    let numbers: Vec<u32> = made.nodes.keys().copied().collect();
    let written: Vec<usize> = numbers
        .par_iter()
        .map(|number| -> Result<usize> {
            let objects = made.node_objects(*number)?;
            let path = output.join(node_file_name(&made.nodes[number]));
            std::fs::write(&path, Manifest::yaml_documents(&objects))
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(objects.len())
        })
        .collect::<Result<_>>()?;
    // The objects of no one node: the Services and the services' routes.
    let routing = made.routing_objects();
    if !routing.is_empty() {
        let path = output.join("cluster.yaml");
        std::fs::write(&path, Manifest::yaml_documents(&routing))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let files = written.len() + usize::from(!routing.is_empty());
    outln!(
        "wrote {} in {} to {}",
        count(written.iter().sum::<usize>() + routing.len(), "manifest"),
        count(files, "file"),
        output.display()
    )?;
    let monitoring = output.join("monitoring");
    std::fs::create_dir_all(&monitoring).with_context(|| format!("cannot create {}", monitoring.display()))?;
    let rules = slo_rules::slo_rules(&plan);
    for (file, yaml) in [
        ("slo-rules.yml", slo_rules::to_yaml(&rules)),
        ("prometheus-rule.yaml", slo_rules::to_yaml(&slo_rules::prometheus_rule(&plan, &options.namespace))),
    ] {
        let path = monitoring.join(file);
        std::fs::write(&path, yaml).with_context(|| format!("cannot write {}", path.display()))?;
    }
    outln!(
        "wrote the SLO rules of {} ({} and 2 alerts) to {}",
        count(plan.services.len(), "service"),
        count(rules.groups.iter().map(|g| g.rules.len()).sum::<usize>() - 2, "recording rule"),
        monitoring.display()
    )
}

fn status(plan: Option<&Path>, namespace: &str, cluster: &Cluster) -> Result<()> {
    let plan = match plan {
        Some(path) => tessera_store::read_plan_file(path, None)?,
        None => match merge_parts(&recorded_parts(cluster, namespace)?) {
            Some(plan) => plan,
            None => {
                bail!("no plan applied in namespace {namespace} (no node's ConfigMap tessera-node-…); pass PLAN.json")
            }
        },
    };
    let status = cluster_status(cluster, &plan, namespace)?;
    outln!("plan {}", status.plan_id)?;
    for node in &status.nodes {
        let state = match (node.current, node.state.as_deref()) {
            (_, None) => "not reported",
            (false, Some(_)) => "of another plan",
            (true, Some(state)) => state,
        };
        let reason = node.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        outln!("{}  layout {state}{reason}", node.node)?;
    }
    for segment in &status.segments {
        outln!(
            "{}  {}  {}/{} ready  {}",
            segment.service,
            segment.deployment,
            segment.ready,
            segment.planned,
            count(segment.restarts as usize, "restart")
        )?;
    }
    let differences = status.differences();
    if !differences.is_empty() {
        bail!("not as planned: {}", differences.join("; "));
    }
    outln!("everything runs as planned")
}

/// Runs `tessera agent`.
pub fn agent(args: AgentArgs) -> Result<()> {
    let mut driver = NodeDriver::default();
    if let (true, Some(path)) = (args.dry_run, &args.plan) {
        let plan = tessera_store::read_plan_file(path, None)?;
        let given = args.node.parse().ok();
        let Some(number) = tessera_plan::node_number(&plan, &args.node, given) else {
            bail!("node '{}' is not among the plan's node names, nor a node number", args.node);
        };
        let layouts = plan_node_layouts(&mut driver, &plan, number)?;
        for gpu in &layouts.gpus {
            let lines = gpu.lines();
            outln!(
                "# GPU {}: {}",
                gpu.gpu(),
                if lines.is_empty() { "MIG layout as planned".to_string() } else { count(lines.len(), "step") }
            )?;
            for line in lines {
                outln!("{line}")?;
            }
        }
        return Ok(());
    }
    let cluster = args.cluster.connect()?;
    let options = AgentOptions {
        node: args.node,
        plan: match args.plan {
            Some(path) => PlanSource::File(path),
            None => PlanSource::Cluster { namespace: args.namespace },
        },
        force: args.force,
        dra_namespace: args.dra_namespace,
        dra_plugin_selector: args.dra_plugin_selector,
        slices_timeout: Duration::from_secs(args.slices_timeout),
    };
    let mut print = |line: String| {
        let _ = outln!("{line}");
    };
    if args.once {
        return match reconcile_node(&cluster, &mut driver, &options, &mut print)? {
            Outcome::Success => outln!("success"),
            Outcome::Idle(why) => outln!("idle: {why}"),
            Outcome::Pending(why) => bail!("pending: {why}"),
            Outcome::Failed(why) => bail!("failed: {why}"),
        };
    }
    run_agent(&cluster, &mut driver, &options, Duration::from_secs(args.interval), &mut print)
}
