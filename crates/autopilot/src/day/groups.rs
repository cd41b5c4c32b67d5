//! The groups a day's fleet is measured in: services that wait behind
//! each other on a shared executor together, every other alone, each set
//! up as a serving system of its own.

use tessera_serving::{ServedSegment, ServedService, ServingSystem};

use crate::error::AutopilotError;

/// The services of `system` that are measured together: each alone, but
/// those sharing an executor together, with every other executor that
/// serves one of them (by their indices in `system`, in order).
pub(super) fn groups(system: &ServingSystem) -> Vec<Vec<usize>> {
    // Union-find over the services, joined by the executors they share.
    let mut parent: Vec<usize> = (0..system.services().len()).collect();
    fn root(parent: &mut [usize], mut service: usize) -> usize {
        while parent[service] != service {
            parent[service] = parent[parent[service]];
            service = parent[service];
        }
        service
    }
    for shared in system.shared() {
        let mut services = shared.iter().map(|&segment| system.segments()[segment].service);
        let Some(first) = services.next() else { continue };
        for service in services {
            let (a, b) = (root(&mut parent, first), root(&mut parent, service));
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut position: Vec<Option<usize>> = vec![None; parent.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for service in 0..parent.len() {
        let group = root(&mut parent, service);
        match position[group] {
            Some(at) => groups[at].push(service),
            None => {
                position[group] = Some(groups.len());
                groups.push(vec![service]);
            }
        }
    }
    groups
}

/// The services `served` (indices in `system`) alone with their segments
/// and shared instances, in that order, the `k`th of them at
/// `rate_rps(k)`.
pub(super) fn group_alone(
    system: &ServingSystem,
    served: &[usize],
    rate_rps: impl Fn(usize) -> f64,
) -> Result<ServingSystem, AutopilotError> {
    // The members' segments in the system's order, each with its member.
    let mut kept: Vec<(usize, usize)> = (served.iter().enumerate())
        .flat_map(|(member, &service)| system.segments_of(service).iter().map(move |&k| (k, member)))
        .collect();
    kept.sort_unstable();
    let segments: Vec<ServedSegment> =
        (kept.iter()).map(|&(k, service)| ServedSegment { service, ..system.segments()[k].clone() }).collect();
    let renumbered = |segment: usize| kept.binary_search_by_key(&segment, |&(k, _)| k).ok();
    let shared = system
        .shared()
        .iter()
        .filter_map(|group| group.iter().map(|&segment| renumbered(segment)).collect::<Option<Vec<usize>>>())
        .collect();
    let services = (served.iter().enumerate())
        .map(|(member, &service)| ServedService { rate_rps: rate_rps(member), ..system.services()[service].clone() })
        .collect();
    Ok(ServingSystem::new(services, segments)?.with_shared(shared)?)
}
