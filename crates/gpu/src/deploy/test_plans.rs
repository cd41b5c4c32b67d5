//! Plans for the deployment tests: A100-80GB GPUs whose instances serve
//! resnet50 at batch 8 with two processes each, and shared instances.

use tessera_core::{GpuAssignment, GpuModel, InstanceAssignment, Plan, SharedInstance, SharedMember, Sharing};

/// Instance `profile@start`.
pub fn instance(profile: &str, start: u8) -> InstanceAssignment {
    InstanceAssignment {
        profile: profile.to_string(),
        size: profile[..1].parse().unwrap(),
        start,
        service: format!("svc-{profile}-{start}"),
        model: "resnet50".to_string(),
        batch: 8,
        procs: 2,
        throughput_rps: 100.0,
        latency_ms: 10.0,
        capacity_rps: None,
    }
}

/// GPU `index` of `node` with instances at `layout`'s (profile, start).
pub fn gpu(node: u32, index: u32, layout: &[(&str, u8)]) -> GpuAssignment {
    GpuAssignment {
        node,
        index,
        gpu_model: GpuModel::A100_80GB,
        instances: layout.iter().map(|(p, s)| instance(p, *s)).collect(),
        shared: Vec::new(),
    }
}

/// A plan of `gpus`.
pub fn plan(gpus: Vec<GpuAssignment>) -> Plan {
    Plan::from_gpus(gpus, "test", "parva", 8)
}

/// What the fake's layout looks like once `layout` is applied: each
/// instance with its compute instance, sorted.
pub fn expected(layout: &[(&str, u8)]) -> Vec<(String, u8, usize)> {
    let mut v: Vec<_> = layout.iter().map(|(p, s)| ((*p).to_string(), *s, 1)).collect();
    v.sort();
    v
}

/// A `1g.10gb` instance at `start` shared by `services`, each running
/// resnet50 at batch 1.
pub fn shared(start: u8, services: &[&str]) -> SharedInstance {
    let member = |service: &&str| SharedMember {
        service: service.to_string(),
        model: "resnet50".to_string(),
        batch: 1,
        latency_ms: 5.0,
        throughput_rps: 200.0,
        capacity_rps: 4.0,
        memory_gb: 2.0,
    };
    SharedInstance {
        profile: "1g.10gb".to_string(),
        size: 1,
        start,
        sharing: Sharing::Serialized,
        members: services.iter().map(member).collect(),
    }
}
