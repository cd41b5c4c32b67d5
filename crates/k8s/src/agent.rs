//! The node agent: applies its node's part of the plan (the MIG layout with
//! explicit placements, through `tessera-gpu`'s deploy operations) and
//! reports progress as a node label state machine, the way mig-manager does:
//! `tessera.io/mig.state` = `pending` → `success` | `failed`, the reason in
//! `tessera.io/mig.reason`, the plan it is about in `tessera.io/plan-id`.
//!
//! The DRA driver, in the mode that allows MPS, only sees the MIG devices
//! that exist when its kubelet plugin starts: after changing a layout the
//! agent deletes the plugin's pod on its node (its DaemonSet recreates it),
//! and reports `success` only once the node's ResourceSlices list exactly
//! the planned MIG devices — then it also reports each device's UUID
//! (`tessera.io/mig.devices`), which `tessera k8s apply` pins the claims to.
//!
//! The agent reads its node's part of the plan, its node's ConfigMap, through
//! the API (or a plan file), and reports the part's id: see
//! [`crate::node_plan`]. A GPU the part lists without instances is to be
//! emptied (a plan change no longer uses it, see [`crate::transition`]): its
//! MIG instances are destroyed like any other layout change, and the plugin
//! restarted so that the driver stops publishing them. One that is not on
//! the node any more (lost) or not in MIG mode has nothing to destroy and is
//! passed over, with an event.
//!
//! Each call of [`reconcile_node`] is one pass, without waiting: the agent's
//! loop calls it again and again. An agent that died mid-layout left its
//! node `pending` for the plan; the next pass says it resumes and applies
//! the steps from whatever the GPUs now have to the plan (a layout is
//! diffed from the live one), so nothing stays half-done or unreported.
//! A failed step is rolled back by the deploy code and reported `failed`;
//! the next pass tries again (a GPU that still runs processes, e.g. pods of
//! the previous plan still terminating, is refused until they are gone).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tessera_core::text::count;
use tessera_core::Plan;
use tessera_gpu::{
    apply_node, installed_gpu, plan_node_layouts, CommandRunner, DetachedLauncher, GpuError, MigDevices,
};
use tessera_plan::NodeRef;

use crate::cluster::{typed, Cluster, Kind};
use crate::error::K8sError;
use crate::inventory::{mig_devices, SliceDevice};
use crate::labels::{DEVICES_ANNOTATION, NODE_NUMBER_LABEL, PLAN_ID, REASON_ANNOTATION, STATE_LABEL};
use crate::mig_config::DRA_DRIVER;
use crate::names::plan_id;
use crate::node_plan::{node_config_map_name, read_node_part};
use crate::segment_objects::NodeDevice;

/// The plan whose ResourceSlices the agent restarted the DRA driver's
/// plugin for, and when (`<plan id>@<unix seconds>`).
const RESTARTED_ANNOTATION: &str = "tessera.io/dra-restarted";

/// How an agent runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOptions {
    /// Its node's name.
    pub node: String,
    /// Where its node's part of the plan is.
    pub plan: PlanSource,
    /// Change the layout of GPUs that run processes.
    pub force: bool,
    /// The DRA driver's namespace.
    pub dra_namespace: String,
    /// The label selector of the DRA driver's kubelet plugin pods.
    pub dra_plugin_selector: String,
    /// How long to wait for the ResourceSlices after restarting the plugin.
    pub slices_timeout: Duration,
}

/// Where an agent finds the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanSource {
    /// Its node's ConfigMap in this namespace, read through the API (what
    /// `tessera k8s apply` writes: `tessera-node-NAME`, or `tessera-node-nN`
    /// for a node labelled `tessera.io/node=N`).
    Cluster {
        /// The namespace of the plan's objects.
        namespace: String,
    },
    /// A plan file: a whole plan, or a node's part.
    File(PathBuf),
}

/// The plan the agent is to apply: (plan, node number when the source
/// says it), or why there is none yet.
fn load_plan(
    cluster: &Cluster,
    node: &Value,
    options: &AgentOptions,
) -> Result<Result<(Plan, Option<u32>), Loaded>, K8sError> {
    match &options.plan {
        PlanSource::File(path) => {
            if !path.exists() {
                return Ok(Err(Loaded::Absent(format!("no plan at {} yet", path.display()))));
            }
            Ok(tessera_store::read_plan_file(path, None)
                .map(|plan| (plan, None))
                .map_err(|error| Loaded::Unreadable(error.to_string())))
        }
        PlanSource::Cluster { namespace } => {
            let mut names = vec![node_config_map_name(&NodeRef::Named(options.node.clone()))];
            if let Some(number) = node["metadata"]["labels"][NODE_NUMBER_LABEL].as_str().and_then(|n| n.parse().ok()) {
                names.push(node_config_map_name(&NodeRef::Numbered(number)));
            }
            for name in &names {
                if let Some(config_map) = cluster.get(Kind::ConfigMap, Some(namespace), name)? {
                    return Ok(read_node_part(&config_map)
                        .map(|part| (part.plan, Some(part.number)))
                        .map_err(|error| Loaded::Unreadable(error.to_string())));
                }
            }
            Ok(Err(Loaded::Absent(format!(
                "no part of the plan for this node yet (no ConfigMap {namespace}/{})",
                names.join(" or ")
            ))))
        }
    }
}

/// Why there is no plan to apply.
enum Loaded {
    /// None published yet.
    Absent(String),
    /// One that cannot be read.
    Unreadable(String),
}

/// Where a pass left the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to do: no plan yet, or no GPUs planned on this node.
    Idle(String),
    /// The layout is as planned and the DRA driver shows it.
    Success,
    /// Waiting (for the DRA driver's ResourceSlices).
    Pending(String),
    /// The layout could not be applied (rolled back) or shown.
    Failed(String),
}

/// The node's labels and annotations the agent writes.
#[derive(Debug, Clone, PartialEq)]
struct Report {
    state: &'static str,
    reason: Option<String>,
    devices: Option<String>,
    restarted: Option<String>,
}

/// The plan's node number of this node: its place among the plan's node
/// names, or its `tessera.io/node` label for a plan without names.
fn plan_node_number(plan: &Plan, node: &Value, name: &str) -> Option<u32> {
    let given = node["metadata"]["labels"][NODE_NUMBER_LABEL].as_str().and_then(|n| n.parse().ok());
    tessera_plan::node_number(plan, name, given)
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Writes `report` for plan `id` on the node, unless it is there already.
fn write_report(cluster: &Cluster, node: &Value, name: &str, id: &str, report: &Report) -> Result<(), K8sError> {
    let metadata = &node["metadata"];
    let current = |key: &str| metadata["annotations"][key].as_str().map(str::to_string);
    let same = metadata["labels"][STATE_LABEL].as_str() == Some(report.state)
        && current(PLAN_ID).as_deref() == Some(id)
        && current(REASON_ANNOTATION) == report.reason
        && current(DEVICES_ANNOTATION) == report.devices
        && current(RESTARTED_ANNOTATION) == report.restarted;
    if same {
        return Ok(());
    }
    let patch = json!({"metadata": {
        "labels": {STATE_LABEL: report.state},
        "annotations": {
            PLAN_ID: id,
            REASON_ANNOTATION: report.reason,
            DEVICES_ANNOTATION: report.devices,
            RESTARTED_ANNOTATION: report.restarted,
        },
    }});
    cluster.merge_patch(Kind::Node, None, name, &patch)
}

/// One pass of the agent on its node: see the module docs. Errors are the
/// API's (the node's state could not be read or written); a layout that
/// fails is an [`Outcome::Failed`], reported on the node.
pub fn reconcile_node<N: CommandRunner + MigDevices>(
    cluster: &Cluster,
    driver: &mut N,
    options: &AgentOptions,
    on_event: &mut dyn FnMut(String),
) -> Result<Outcome, K8sError> {
    if let PlanSource::File(path) = &options.plan {
        if !path.exists() {
            return Ok(Outcome::Idle(format!("no plan at {} yet", path.display())));
        }
    }
    let name = options.node.as_str();
    let node = cluster.get(Kind::Node, None, name)?.ok_or_else(|| K8sError::Cluster {
        context: cluster.context().to_string(),
        message: format!("node '{name}' does not exist (pass the pod's spec.nodeName as --node)"),
    })?;
    let (plan, part_number) = match load_plan(cluster, &node, options)? {
        Ok(loaded) => loaded,
        Err(Loaded::Absent(why)) => return Ok(Outcome::Idle(why)),
        Err(Loaded::Unreadable(error)) => {
            let reason = format!("cannot read the plan: {error}");
            let report = Report { state: "failed", reason: Some(reason.clone()), devices: None, restarted: None };
            write_report(cluster, &node, name, "unreadable", &report)?;
            return Ok(Outcome::Failed(reason));
        }
    };
    let id = plan_id(&plan);
    let fail = |reason: String, restarted: Option<String>| -> Result<Outcome, K8sError> {
        let report = Report { state: "failed", reason: Some(reason.clone()), devices: None, restarted };
        write_report(cluster, &node, name, &id, &report)?;
        Ok(Outcome::Failed(reason))
    };
    let Some(number) = part_number.or_else(|| plan_node_number(&plan, &node, name)) else {
        let report = Report {
            state: "success",
            reason: Some("no GPUs of the plan on this node".into()),
            devices: None,
            restarted: None,
        };
        write_report(cluster, &node, name, &id, &report)?;
        return Ok(Outcome::Idle("no GPUs of the plan on this node".into()));
    };
    let restarted = node["metadata"]["annotations"][RESTARTED_ANNOTATION].as_str().map(str::to_string);
    let plan = match without_nothing_to_destroy(driver, plan, number, on_event) {
        Ok(plan) => plan,
        Err(error) => return fail(error.to_string(), restarted),
    };
    if !plan.gpus.iter().any(|gpu| gpu.node == number) {
        let report = Report { state: "success", reason: None, devices: Some("[]".into()), restarted };
        write_report(cluster, &node, name, &id, &report)?;
        return Ok(Outcome::Success);
    }
    let layouts = match plan_node_layouts(driver, &plan, number) {
        Ok(layouts) => layouts,
        Err(error) => return fail(error.to_string(), restarted),
    };
    let steps: usize = layouts.gpus.iter().map(|gpu| gpu.deployment.steps.len()).sum();
    let mut restart = false;
    if steps > 0 {
        let interrupted = node["metadata"]["labels"][STATE_LABEL].as_str() == Some("pending")
            && node["metadata"]["annotations"][PLAN_ID].as_str() == Some(id.as_str());
        let reason = format!(
            "{}applying the MIG layout of plan {id}: {}",
            if interrupted { "resuming an interrupted run: " } else { "" },
            count(steps, "step")
        );
        on_event(reason.clone());
        let report = Report { state: "pending", reason: Some(reason), devices: None, restarted: restarted.clone() };
        write_report(cluster, &node, name, &id, &report)?;
        let mut launcher = DetachedLauncher::default();
        if let Err(error) =
            apply_node(driver, &mut launcher, &layouts, options.force, &mut |event| on_event(event.to_string()))
        {
            return fail(error.to_string(), restarted);
        }
        restart = true;
    }
    let planned = match planned_devices(driver, &plan, number) {
        Ok(planned) => planned,
        Err(error) => return fail(error.to_string(), restarted),
    };
    let slices: Vec<k8s_openapi::api::resource::v1::ResourceSlice> = typed(
        cluster.list(
            Kind::ResourceSlice,
            None,
            None,
            Some(&format!("spec.nodeName={name},spec.driver={DRA_DRIVER}")),
        )?,
        cluster,
    )?;
    let shown = mig_devices(&slices).remove(name).unwrap_or_default();
    // After a change the driver must publish the layout again: instances
    // destroyed on a GPU now empty would otherwise stay listed.
    let compared = match compare(&planned, &shown) {
        Ok(_) if restart => Err("the layout changed".to_string()),
        compared => compared,
    };
    match compared {
        Ok(devices) => {
            let devices = serde_json::to_string(&devices).expect("devices serialize");
            let report = Report { state: "success", reason: None, devices: Some(devices), restarted };
            write_report(cluster, &node, name, &id, &report)?;
            Ok(Outcome::Success)
        }
        Err(difference) => {
            let since = restarted
                .as_deref()
                .and_then(|r| r.strip_prefix(&format!("{id}@")))
                .and_then(|s| s.parse::<u64>().ok());
            let restarted = match since {
                Some(since) if !restart => {
                    if now_s().saturating_sub(since) > options.slices_timeout.as_secs() {
                        return fail(
                            format!(
                                "the DRA driver's ResourceSlices still do not show the planned MIG devices {} s after its plugin restarted: {difference}",
                                options.slices_timeout.as_secs()
                            ),
                            restarted,
                        );
                    }
                    restarted
                }
                _ => {
                    let pods = restart_plugin(cluster, options)?;
                    if pods == 0 {
                        return fail(
                            format!(
                                "no DRA kubelet plugin pod ({}) on this node in namespace {}; the MIG devices cannot be published",
                                options.dra_plugin_selector, options.dra_namespace
                            ),
                            restarted,
                        );
                    }
                    on_event(format!("restarted the DRA driver's kubelet plugin ({})", count(pods, "pod")));
                    Some(format!("{id}@{}", now_s()))
                }
            };
            let reason = format!("waiting for the DRA driver's ResourceSlices: {difference}");
            let report = Report { state: "pending", reason: Some(reason.clone()), devices: None, restarted };
            write_report(cluster, &node, name, &id, &report)?;
            Ok(Outcome::Pending(reason))
        }
    }
}

/// `plan` without the GPUs of node `number` it empties that have no layout
/// to destroy: not on the node (lost) or not in MIG mode (each said in an
/// event). A driver that does not answer is an error.
fn without_nothing_to_destroy<R: CommandRunner>(
    driver: &mut R,
    mut plan: Plan,
    number: u32,
    on_event: &mut dyn FnMut(String),
) -> Result<Plan, K8sError> {
    let mut passed = Vec::new();
    for gpu in plan.gpus.iter().filter(|gpu| gpu.node == number && gpu.is_empty()) {
        match installed_gpu(driver, gpu.index) {
            Ok(installed) if !installed.mig_enabled => {
                on_event(format!("GPU {} is to be emptied and is not in MIG mode: nothing to destroy", gpu.index));
                passed.push(gpu.index);
            }
            Ok(_) => {}
            Err(GpuError::PlanGpu { message, .. }) => {
                on_event(format!(
                    "GPU {} is to be emptied but is not there ({message}): nothing to destroy",
                    gpu.index
                ));
                passed.push(gpu.index);
            }
            Err(error) => return Err(error.into()),
        }
    }
    plan.gpus.retain(|gpu| gpu.node != number || !passed.contains(&gpu.index));
    Ok(plan)
}

/// The MIG device of each planned instance of node `number`: (GPU, profile,
/// start) → UUID, read from the driver after the layout is in place.
fn planned_devices<N: CommandRunner + MigDevices>(
    driver: &mut N,
    plan: &Plan,
    number: u32,
) -> Result<Vec<(u32, String, u8, String)>, K8sError> {
    let layouts = plan_node_layouts(driver, plan, number)?;
    let mut planned = Vec::new();
    for gpu in &layouts.gpus {
        let devices = driver.mig_devices(gpu.gpu())?;
        // Dedicated and shared instances alike: each has its claim.
        for (profile, _, start) in gpu.deployment.planned.layout() {
            let live = gpu.deployment.live.instances.iter().find(|i| i.profile == profile && i.start == start);
            let uuid = live.and_then(|live| devices.iter().find(|d| d.gi_id == live.gi_id)).map(|d| d.uuid.clone());
            let uuid = uuid.ok_or_else(|| {
                K8sError::Plan(format!("GPU {} {profile}@{start}: no MIG device after the layout", gpu.gpu()))
            })?;
            planned.push((gpu.gpu(), profile.to_string(), start, uuid));
        }
    }
    Ok(planned)
}

/// The planned devices with their parent UUIDs when the slices show exactly
/// them (on the GPUs they are on), else what differs.
fn compare(planned: &[(u32, String, u8, String)], shown: &[SliceDevice]) -> Result<Vec<NodeDevice>, String> {
    let by_uuid: BTreeMap<&str, &SliceDevice> = shown.iter().map(|d| (d.uuid.as_str(), d)).collect();
    let missing: Vec<String> = planned
        .iter()
        .filter(|(_, profile, _, uuid)| by_uuid.get(uuid.as_str()).is_none_or(|d| d.profile != *profile))
        .map(|(gpu, profile, start, _)| format!("GPU {gpu} {profile}@{start}"))
        .collect();
    let parents: Vec<&str> = planned
        .iter()
        .filter_map(|(_, _, _, uuid)| by_uuid.get(uuid.as_str()).map(|d| d.parent_uuid.as_str()))
        .collect();
    let extra: Vec<String> = shown
        .iter()
        .filter(|d| parents.contains(&d.parent_uuid.as_str()) && !planned.iter().any(|p| p.3 == d.uuid))
        .map(|d| format!("{} ({})", d.name, d.profile))
        .collect();
    if missing.is_empty() && extra.is_empty() {
        return Ok(planned
            .iter()
            .map(|(gpu, profile, start, uuid)| NodeDevice {
                gpu: *gpu,
                profile: profile.clone(),
                start: *start,
                uuid: uuid.clone(),
                parent_uuid: by_uuid[uuid.as_str()].parent_uuid.clone(),
            })
            .collect());
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        parts.push(format!("not planned {}", extra.join(", ")));
    }
    Err(parts.join("; "))
}

/// Deletes the DRA kubelet plugin's pods on the node (their DaemonSet
/// recreates them); how many.
fn restart_plugin(cluster: &Cluster, options: &AgentOptions) -> Result<usize, K8sError> {
    let pods = cluster.list(
        Kind::Pod,
        Some(&options.dra_namespace),
        Some(&options.dra_plugin_selector),
        Some(&format!("spec.nodeName={}", options.node)),
    )?;
    for pod in &pods {
        if let Some(name) = pod["metadata"]["name"].as_str() {
            cluster.delete(Kind::Pod, &options.dra_namespace, name)?;
        }
    }
    Ok(pods.len())
}

/// The agent's loop: a pass every `interval`, for ever; each outcome (and
/// each error of the API, which ends no loop) is passed to `on_outcome`.
pub fn run_agent<N: CommandRunner + MigDevices>(
    cluster: &Cluster,
    driver: &mut N,
    options: &AgentOptions,
    interval: Duration,
    on_event: &mut dyn FnMut(String),
) -> ! {
    loop {
        let outcome = reconcile_node(cluster, driver, options, on_event);
        on_event(match outcome {
            Ok(Outcome::Success) => "success".to_string(),
            Ok(Outcome::Idle(why)) => format!("idle: {why}"),
            Ok(Outcome::Pending(why)) => format!("pending: {why}"),
            Ok(Outcome::Failed(why)) => format!("failed: {why}"),
            Err(error) => format!("error: {error}"),
        });
        cluster.sleep(interval);
    }
}
