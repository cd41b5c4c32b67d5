//! A node compared with a plan, as data: the same [`NodePlan`] a deploy
//! would apply, read as "what is not as planned". A GPU is as planned when
//! its layout needs no step; an instance's service when a deploy would
//! leave it alone.

use tessera_core::Plan;

use super::{plan_node, GpuPlan, NodeOptions, NodePlan, Service, ServiceCommands, ServiceLauncher, Step};
use crate::deploy::services::{InstanceDir, InstanceState};
use crate::error::GpuError;
use crate::mig::{LiveGpu, MigDevices};
use crate::runner::CommandRunner;

/// How a GPU's live layout differs from its plan, by `PROFILE@START`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LayoutDifferences {
    /// Planned instances that do not exist.
    pub missing: Vec<String>,
    /// Live instances the plan does not have.
    pub extra: Vec<String>,
    /// Planned instances that exist without a compute instance.
    pub without_compute_instance: Vec<String>,
}

impl LayoutDifferences {
    /// The differences the steps from `live` to a plan stand for.
    fn of(live: &LiveGpu, steps: &[Step]) -> Self {
        let name_of = |gi: u32| {
            live.instances
                .iter()
                .find(|i| i.gi_id == gi)
                .map_or_else(|| format!("GPU instance {gi}"), |i| format!("{}@{}", i.profile, i.start))
        };
        let mut differences = Self::default();
        for step in steps {
            match step {
                Step::CreateGpuInstance { profile, start, .. } => {
                    differences.missing.push(format!("{profile}@{start}"))
                }
                Step::DestroyGpuInstance { gi_id, .. } => differences.extra.push(name_of(*gi_id)),
                Step::CreateComputeInstance { gi_id: Some(gi), .. } => {
                    differences.without_compute_instance.push(name_of(*gi));
                }
                Step::CreateComputeInstance { gi_id: None, .. } | Step::DestroyComputeInstances { .. } => {}
            }
        }
        for list in [&mut differences.missing, &mut differences.extra, &mut differences.without_compute_instance] {
            list.sort();
        }
        differences
    }
}

/// One planned instance and what runs there.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceStatus {
    /// What it serves, in words ([`super::InstanceService::serves`]).
    pub serves: String,
    /// The processes it runs as planned.
    pub procs: u32,
    /// Its state directory.
    pub dir: InstanceDir,
    /// What runs there.
    pub state: InstanceState,
    /// `true` when it runs as planned (a deploy would leave it alone).
    pub as_planned: bool,
}

/// One GPU of the node compared with the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuStatus {
    /// The GPU index.
    pub index: u32,
    /// The driver's name for it, e.g. `NVIDIA A100-SXM4-80GB`.
    pub name: String,
    /// Its live layout.
    pub live: LiveGpu,
    /// How the layout differs; empty when as planned.
    pub layout: LayoutDifferences,
    /// `true` when its layout is as planned.
    pub layout_as_planned: bool,
    /// Each planned instance, in the plan's order (dedicated, then shared).
    pub instances: Vec<InstanceStatus>,
}

impl GpuStatus {
    fn of(gpu: &GpuPlan) -> Self {
        let deployment = &gpu.deployment;
        let instances = gpu
            .services
            .iter()
            .map(|service| {
                let (state, as_planned) = match service {
                    Service::Keep { pids, .. } => {
                        let state =
                            InstanceState { daemon: true, pids: pids.clone(), alive: pids.clone(), command: None };
                        (state, true)
                    }
                    Service::Start { state, .. } => (state.clone(), false),
                };
                let planned = service.service();
                InstanceStatus {
                    serves: planned.serves.clone(),
                    procs: planned.procs,
                    dir: planned.dir.clone(),
                    state,
                    as_planned,
                }
            })
            .collect();
        GpuStatus {
            index: gpu.gpu(),
            name: deployment
                .installed
                .as_ref()
                .map_or_else(|| deployment.planned.gpu_model.to_string(), |i| i.name.clone()),
            live: deployment.live.clone(),
            layout: LayoutDifferences::of(&deployment.live, &deployment.steps),
            layout_as_planned: gpu.layout_as_planned(),
            instances,
        }
    }
}

/// A node compared with a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStatus {
    /// The node.
    pub node: u32,
    /// Its planned GPUs, by index.
    pub gpus: Vec<GpuStatus>,
}

impl NodeStatus {
    /// How many GPUs' layouts differ from the plan.
    pub fn gpus_differing(&self) -> usize {
        self.gpus.iter().filter(|gpu| !gpu.layout_as_planned).count()
    }

    /// How many planned instances do not run as planned.
    pub fn instances_not_as_planned(&self) -> usize {
        self.gpus.iter().flat_map(|gpu| &gpu.instances).filter(|i| !i.as_planned).count()
    }

    /// `true` when every GPU and instance is as planned.
    pub fn as_planned(&self) -> bool {
        self.gpus_differing() == 0 && self.instances_not_as_planned() == 0
    }

    /// The status of the node `plan` describes.
    pub fn of(plan: &NodePlan) -> Self {
        NodeStatus { node: plan.node, gpus: plan.gpus.iter().map(GpuStatus::of).collect() }
    }
}

/// Compares the node of `options` with `plan`, through [`plan_node`]: the
/// same reading and the same decisions as a deploy, changing nothing.
pub fn node_status<N: CommandRunner + MigDevices>(
    driver: &mut N,
    launcher: &mut dyn ServiceLauncher,
    plan: &Plan,
    commands: &ServiceCommands,
    options: &NodeOptions,
) -> Result<NodeStatus, GpuError> {
    let options = NodeOptions { assume_empty_without_driver: false, ..options.clone() };
    Ok(NodeStatus::of(&plan_node(driver, launcher, plan, commands, &options)?))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::deploy::test_plans::{gpu, plan};
    use crate::deploy::{apply_node, FakeServiceLauncher};
    use crate::fake::FakeNvidiaSmi;
    use tessera_core::{GpuModel, InstanceAssignment};

    /// The directory of `instance` of GPU `gpu` under `root`.
    fn dir_of(root: &Path, gpu: u32, instance: &InstanceAssignment) -> InstanceDir {
        InstanceDir::new(root, gpu, &instance.profile, instance.start)
    }

    const LAYOUT: &[(&str, u8)] = &[("3g.40gb", 4), ("2g.20gb", 0)];

    fn options(root: &Path) -> NodeOptions {
        NodeOptions { node: 0, mps_root: root.to_path_buf(), assume_empty_without_driver: false }
    }

    fn commands() -> ServiceCommands {
        ServiceCommands::new([(("resnet50".to_string(), 8), "serve resnet50".to_string())])
    }

    #[test]
    fn status_and_apply_agree_on_what_is_as_planned() {
        let root = tempfile::tempdir().unwrap();
        let plan = plan(vec![gpu(0, 0, LAYOUT)]);
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        let mut launcher = FakeServiceLauncher::new();
        let before = node_status(&mut fake, &mut launcher, &plan, &commands(), &options(root.path())).unwrap();
        assert_eq!((before.gpus_differing(), before.instances_not_as_planned()), (1, 2));
        assert_eq!(before.gpus[0].name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(before.gpus[0].layout.missing, ["2g.20gb@0", "3g.40gb@4"]);

        let node_plan = plan_node(&mut fake, &mut launcher, &plan, &commands(), &options(root.path())).unwrap();
        apply_node(&mut fake, &mut launcher, &node_plan, false, &mut |_| {}).unwrap();
        let after = node_status(&mut fake, &mut launcher, &plan, &commands(), &options(root.path())).unwrap();
        assert!(after.as_planned(), "{after:#?}");
        let first = &after.gpus[0].instances[0];
        let planned = &plan.gpus[0].instances[0];
        assert_eq!((first.state.alive.len(), first.dir.clone()), (2, dir_of(root.path(), 0, planned)));
        assert_eq!((first.serves.as_str(), first.procs), ("resnet50 batch 8", 2));

        // Another command for the same model is not as planned: a deploy would restart it.
        let other = ServiceCommands::new([(("resnet50".to_string(), 8), "serve other".to_string())]);
        let changed = node_status(&mut fake, &mut launcher, &plan, &other, &options(root.path())).unwrap();
        assert_eq!((changed.gpus_differing(), changed.instances_not_as_planned()), (0, 2));
        // A crashed process, only its instance.
        launcher.crash(1000);
        let crashed = node_status(&mut fake, &mut launcher, &plan, &commands(), &options(root.path())).unwrap();
        assert_eq!(crashed.instances_not_as_planned(), 1);
        let broken = &crashed.gpus[0].instances[0];
        assert_eq!((broken.state.daemon, broken.state.alive.clone()), (true, vec![1001]));
    }

    #[test]
    fn extra_instances_and_missing_compute_instances_are_named() {
        let root = tempfile::tempdir().unwrap();
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        for args in ["mig -i 0 -cgi 3g.40gb:4", "mig -i 0 -cgi 1g.10gb:0", "mig -i 0 -gi 2 -cci"] {
            let args: Vec<String> = args.split(' ').map(String::from).collect();
            assert!(fake.run("nvidia-smi", &args).unwrap().success());
        }
        let mut launcher = FakeServiceLauncher::new();
        let plan = plan(vec![gpu(0, 0, LAYOUT)]);
        let status = node_status(&mut fake, &mut launcher, &plan, &commands(), &options(root.path())).unwrap();
        let layout = &status.gpus[0].layout;
        assert_eq!(layout.missing, ["2g.20gb@0"]);
        assert_eq!(layout.extra, ["1g.10gb@0"]);
        assert_eq!(layout.without_compute_instance, ["3g.40gb@4"]);
    }

    #[test]
    fn a_shared_instance_runs_one_server_process_restarted_only_when_its_members_change() {
        use crate::deploy::test_plans::shared;
        use crate::deploy::EventKind;
        let root = tempfile::tempdir().unwrap();
        let mut plan = plan(vec![gpu(0, 0, LAYOUT)]);
        plan.gpus[0].shared = vec![shared(2, &["a", "b"])];
        let mut fake = FakeNvidiaSmi::new().with_gpu(0, GpuModel::A100_80GB);
        let mut launcher = FakeServiceLauncher::new();

        // Without a server command: a placeholder, and an apply refuses.
        let node_plan = plan_node(&mut fake, &mut launcher, &plan, &commands(), &options(root.path())).unwrap();
        assert_eq!(node_plan.missing_shared_server, Some((0, "1g.10gb@2".to_string())));
        assert!(node_plan.gpus[0].lines().iter().any(|line| line.contains("<command of a multi-model server")));
        let refused = apply_node(&mut fake, &mut launcher, &node_plan, false, &mut |_| {}).unwrap_err();
        assert!(matches!(refused, GpuError::NoSharedServer { gpu: 0, .. }), "{refused}");

        let commands = commands().with_shared_server(Some("serve-many".to_string()));
        let node_plan = plan_node(&mut fake, &mut launcher, &plan, &commands, &options(root.path())).unwrap();
        apply_node(&mut fake, &mut launcher, &node_plan, false, &mut |_| {}).unwrap();
        let status = node_status(&mut fake, &mut launcher, &plan, &commands, &options(root.path())).unwrap();
        assert!(status.as_planned(), "{status:#?}");
        let executor = &status.gpus[0].instances[2];
        assert_eq!((executor.serves.as_str(), executor.procs), ("a serialized executor of a, b", 1));
        let recorded = std::fs::read_to_string(executor.dir.path.join("command")).unwrap();
        assert!(
            recorded.starts_with("TESSERA_SHARING=serialized TESSERA_MEMBERS=") && recorded.ends_with(" serve-many")
        );

        // A member joins: only the executor restarts.
        plan.gpus[0].shared = vec![shared(2, &["a", "b", "c"])];
        let status = node_status(&mut fake, &mut launcher, &plan, &commands, &options(root.path())).unwrap();
        assert_eq!((status.gpus_differing(), status.instances_not_as_planned()), (0, 1));
        let node_plan = plan_node(&mut fake, &mut launcher, &plan, &commands, &options(root.path())).unwrap();
        let mut events = Vec::new();
        apply_node(&mut fake, &mut launcher, &node_plan, false, &mut |event| events.push(event)).unwrap();
        let stopped = events.iter().filter(|e| e.kind == EventKind::ProcessStop).count();
        let started: Vec<&str> =
            events.iter().filter(|e| e.kind == EventKind::ProcessStart).map(|e| e.detail.as_str()).collect();
        assert_eq!((stopped, started.len()), (1, 1), "{events:#?}");
        assert!(started[0].contains(r#""service":"c""#), "{started:?}");
        let status = node_status(&mut fake, &mut launcher, &plan, &commands, &options(root.path())).unwrap();
        assert!(status.as_planned(), "{status:#?}");
    }
}
