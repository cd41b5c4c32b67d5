//! Tessera's plan files, the one place they are read and written.
//!
//! - JSON ([`plan_json`], [`parse_plan`]): the whole [`Plan`] with a
//!   `version` field ([`PLAN_VERSION`]) first. Reading refuses another
//!   version and any field the format does not know; a plan without
//!   `version` (written before the field existed) is read as version 1,
//!   whose fields it has.
//! - CSV ([`write_plan_csv`]): one row per MIG instance,
//!   [`PLAN_CSV_HEADER`], with what it takes to verify or deploy the plan
//!   again (GPU and instance, segment, profiled numbers, the plan's latency
//!   rule on every row); a shared instance is one row per member, the
//!   instance's columns repeated, its discipline in `sharing` and the
//!   member's memory in `memory_gb`. Columns are found by name, in any
//!   order.
//!
//! Files are read by content, whichever their format, in `plan_file`.

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use tessera_core::plan::MAX_MARGIN;
use tessera_core::{GpuAssignment, GpuModel, InstanceAssignment, Plan, SharedInstance, SharedMember, Sharing};

use crate::error::StoreError;
use crate::formats::table::{Cell, Table};

/// The plan JSON version this build writes. Version 2 added the traffic a
/// plan was proven under, each segment's routed capacity and each
/// service's percentile and predicted attainment; version 3 the robustness
/// margin. This build reads versions 1 to 3.
pub const PLAN_VERSION: u32 = 3;

/// The oldest plan JSON version this build reads.
const OLDEST_PLAN_VERSION: u32 = 1;

/// The columns of Tessera's plan CSV, in the order they are written.
pub const PLAN_CSV_HEADER: [&str; 17] = [
    "node",
    "gpu_index",
    "gpu_model",
    "profile",
    "size_gpcs",
    "start",
    "service",
    "model",
    "batch",
    "procs",
    "throughput_rps",
    "latency_ms",
    "latency_rule",
    "capacity_rps",
    "margin",
    "sharing",
    "memory_gb",
];

/// The columns of [`PLAN_CSV_HEADER`] a plan CSV may leave out (files
/// written before they existed).
const OPTIONAL_PLAN_CSV_COLUMNS: [&str; 4] = ["capacity_rps", "margin", "sharing", "memory_gb"];

/// What a plan read from a CSV file says produced it: the CSV does not
/// record the strategy.
const UNRECORDED_STRATEGY: &str = "unrecorded";

/// A plan as its JSON document: `"version": PLAN_VERSION` first, then the
/// plan's own fields. Serialize it into any JSON (an API body) to carry a
/// plan without a detour through text.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PlanDocument<'a> {
    version: u32,
    #[serde(flatten)]
    plan: &'a Plan,
}

impl<'a> PlanDocument<'a> {
    /// The document of `plan`, at this build's [`PLAN_VERSION`].
    pub fn new(plan: &'a Plan) -> PlanDocument<'a> {
        PlanDocument { version: PLAN_VERSION, plan }
    }
}

/// `plan` as the plan JSON document (pretty, ending in a newline), with
/// `"version": PLAN_VERSION` first.
pub fn plan_json(plan: &Plan) -> Vec<u8> {
    let mut json = serde_json::to_vec_pretty(&PlanDocument::new(plan))
        .unwrap_or_else(|_| unreachable!("a plan has string keys and finite numbers"));
    json.push(b'\n');
    json
}

/// Parses plan JSON `bytes` that came from `source` (a file name or a
/// description, e.g. `request body`, which error messages start with).
pub fn parse_plan(source: &str, bytes: &[u8]) -> Result<Plan, StoreError> {
    parse_plan_json(Path::new(source), bytes)
}

/// Parses plan JSON `bytes` read from `path`.
pub(crate) fn parse_plan_json(path: &Path, bytes: &[u8]) -> Result<Plan, StoreError> {
    let not_a_plan = |detail: String| StoreError::PlanFormat { path: path.to_path_buf(), detail };
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|error| not_a_plan(error.to_string()))?;
    let serde_json::Value::Object(mut fields) = value else {
        return Err(not_a_plan("expected a JSON object".to_string()));
    };
    match fields.remove("version") {
        None => {}
        Some(version) => match version.as_u64() {
            Some(found) if (u64::from(OLDEST_PLAN_VERSION)..=u64::from(PLAN_VERSION)).contains(&found) => {}
            Some(found) => {
                return Err(StoreError::PlanVersion {
                    path: path.to_path_buf(),
                    found,
                    oldest: OLDEST_PLAN_VERSION,
                    newest: PLAN_VERSION,
                })
            }
            None => return Err(not_a_plan(format!("field 'version': expected a whole number, got {version}"))),
        },
    }
    serde_json::from_value(serde_json::Value::Object(fields)).map_err(|error| not_a_plan(error.to_string()))
}

/// Writes `plan` as Tessera's plan CSV: [`PLAN_CSV_HEADER`], then one row
/// per MIG instance in plan order (a shared instance: one row per member,
/// after the GPU's dedicated instances), numbers in Rust's shortest
/// round-trip notation (reading the file back gives the same values).
pub fn write_plan_csv<W: Write>(out: W, plan: &Plan) -> Result<(), StoreError> {
    let write_error = |cause: std::io::Error| StoreError::Write { what: "plan CSV".to_string(), cause };
    let margin = plan.margin.map_or_else(String::new, |margin| margin.to_string());
    let row = |gpu: &GpuAssignment, instance: &InstanceAssignment, shared: Option<(Sharing, f64)>| {
        [
            gpu.node.to_string(),
            gpu.index.to_string(),
            gpu.gpu_model.id().to_string(),
            instance.profile.clone(),
            instance.size.to_string(),
            instance.start.to_string(),
            instance.service.clone(),
            instance.model.clone(),
            instance.batch.to_string(),
            instance.procs.to_string(),
            instance.throughput_rps.to_string(),
            instance.latency_ms.to_string(),
            plan.latency_rule.clone(),
            instance.capacity_rps.map_or_else(String::new, |capacity| capacity.to_string()),
            margin.clone(),
            shared.map_or_else(String::new, |(sharing, _)| sharing.to_string()),
            shared.map_or_else(String::new, |(_, memory_gb)| memory_gb.to_string()),
        ]
    };
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record(PLAN_CSV_HEADER).map_err(|error| write_error(error.into()))?;
    for gpu in &plan.gpus {
        for instance in &gpu.instances {
            writer.write_record(row(gpu, instance, None)).map_err(|error| write_error(error.into()))?;
        }
        for shared in &gpu.shared {
            for member in &shared.members {
                let as_row = member_row(shared, member);
                let record = row(gpu, &as_row, Some((shared.sharing, member.memory_gb)));
                writer.write_record(record).map_err(|error| write_error(error.into()))?;
            }
        }
    }
    writer.flush().map_err(write_error)
}

/// A member of `shared` in the columns of a dedicated instance: its
/// service, model and batch, one process, its profiled numbers and its
/// routed rate as the capacity.
fn member_row(shared: &SharedInstance, member: &SharedMember) -> InstanceAssignment {
    InstanceAssignment {
        profile: shared.profile.clone(),
        size: shared.size,
        start: shared.start,
        service: member.service.clone(),
        model: member.model.clone(),
        batch: member.batch,
        procs: 1,
        throughput_rps: member.throughput_rps,
        latency_ms: member.latency_ms,
        capacity_rps: Some(member.capacity_rps),
    }
}

/// Writes `header`, then `row` of every MIG instance of `plan` in plan
/// order, as CSV called `what` in error messages.
pub(crate) fn write_instance_rows<W: Write, const N: usize>(
    out: W,
    what: &str,
    plan: &Plan,
    header: [&str; N],
    row: impl Fn(&GpuAssignment, &InstanceAssignment) -> [String; N],
) -> Result<(), StoreError> {
    let write_error = |cause: std::io::Error| StoreError::Write { what: what.to_string(), cause };
    if let Some((gpu, shared)) = plan.shared_instances().next() {
        return Err(StoreError::Unwritable {
            what: what.to_string(),
            detail: format!(
                "node {} gpu {} {}@{} is shared by {} services and a {what} row holds one; write the plan as JSON",
                gpu.node,
                gpu.index,
                shared.profile,
                shared.start,
                shared.members.len()
            ),
        });
    }
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record(header).map_err(|error| write_error(error.into()))?;
    for gpu in &plan.gpus {
        for instance in &gpu.instances {
            writer.write_record(row(gpu, instance)).map_err(|error| write_error(error.into()))?;
        }
    }
    writer.flush().map_err(write_error)
}

/// Tessera's plan CSV in `table`. Rows of one (node, gpu_index) form
/// one GPU, in the order they first appear; its rows must name one GPU
/// model, and every row the same latency rule. The plan's fleet counts the
/// GPUs of each model at cost 1 (the CSV records no cost or limit), its
/// strategy is `unrecorded`, its GPUs per node the highest index + 1, and
/// it has no service report (the verifier recomputes it).
pub(crate) fn plan_from_table(table: &Table) -> Result<Plan, StoreError> {
    let path = table.path.as_path();
    table.reject_unknown_columns(&PLAN_CSV_HEADER)?;
    let columns = PLAN_CSV_HEADER
        .iter()
        .filter(|name| !OPTIONAL_PLAN_CSV_COLUMNS.contains(name))
        .map(|name| table.require(name))
        .collect::<Result<Vec<_>, _>>()?;
    let capacity = table.optional("capacity_rps")?;
    let margin_column = table.optional("margin")?;
    let sharing_column = table.optional("sharing")?;
    let memory_column = table.optional("memory_gb")?;
    let [node, index, gpu_model, profile, size, start, service, model, batch, procs, throughput, latency, rule] =
        columns[..]
    else {
        unreachable!("one column per header name")
    };
    let mut gpus: Vec<GpuAssignment> = Vec::new();
    let mut latency_rule: Option<(&str, u64)> = None;
    let mut margin: Option<(Option<f64>, u64)> = None;
    for record in &table.rows {
        let cell = |column| Cell::of(path, record, column);
        if let Some(margin_cell) = margin_column.map(cell) {
            let read = match margin_cell.text.is_empty() {
                true => None,
                false => match margin_cell.non_negative()? {
                    share if share <= MAX_MARGIN => Some(share),
                    _ => return Err(margin_cell.error(format!("not a share in [0, {MAX_MARGIN}]"))),
                },
            };
            match margin {
                None => margin = Some((read, record.line)),
                Some((first, line)) if first != read => {
                    return Err(margin_cell.error(format!(
                        "'{}' differs from '{}' on line {line}",
                        margin_cell.text,
                        first.map_or_else(String::new, |first| first.to_string())
                    )))
                }
                Some(_) => {}
            }
        }
        let rule_cell = cell(rule);
        match latency_rule {
            None => latency_rule = Some((rule_cell.name()?, record.line)),
            Some((first, line)) if first != rule_cell.text => {
                return Err(rule_cell.error(format!("'{}' differs from '{first}' on line {line}", rule_cell.text)))
            }
            Some(_) => {}
        }
        let (node, index) = (cell(node).whole()?, cell(index).whole()?);
        let gpu_cell = cell(gpu_model);
        let gpu: GpuModel = gpu_cell.text.parse().map_err(|error| gpu_cell.domain(error))?;
        let instance = InstanceAssignment {
            profile: cell(profile).name()?.to_string(),
            size: cell(size).whole()?,
            start: cell(start).whole()?,
            service: cell(service).name()?.to_string(),
            model: cell(model).name()?.to_string(),
            batch: cell(batch).whole()?,
            procs: cell(procs).whole()?,
            throughput_rps: cell(throughput).non_negative()?,
            latency_ms: cell(latency).non_negative()?,
            capacity_rps: match capacity.map(cell).filter(|cell| !cell.text.is_empty()) {
                Some(cell) => Some(cell.non_negative()?),
                None => None,
            },
        };
        let at = match gpus.iter().position(|g| g.node == node && g.index == index) {
            Some(at) if gpus[at].gpu_model != gpu => {
                return Err(gpu_cell
                    .error(format!("node {node} gpu {index} is {} on an earlier line, not {gpu}", gpus[at].gpu_model)))
            }
            Some(at) => at,
            None => {
                gpus.push(GpuAssignment::dedicated(node, index, gpu, Vec::new()));
                gpus.len() - 1
            }
        };
        let sharing_cell = sharing_column.map(cell).filter(|cell| !cell.text.is_empty());
        let Some(sharing_cell) = sharing_cell else {
            gpus[at].instances.push(instance);
            continue;
        };
        // A member of a shared instance.
        let sharing: Sharing = sharing_cell.text.parse().map_err(|error: String| sharing_cell.error(error))?;
        if instance.procs != 1 {
            return Err(cell(procs).error("a member of a shared instance runs in its one process: procs must be 1"));
        }
        let memory_gb = match memory_column.map(cell) {
            Some(memory_cell) if !memory_cell.text.is_empty() => memory_cell.non_negative()?,
            _ => return Err(sharing_cell.error("a member of a shared instance needs its memory_gb")),
        };
        let member = SharedMember {
            service: instance.service,
            model: instance.model,
            batch: instance.batch,
            latency_ms: instance.latency_ms,
            throughput_rps: instance.throughput_rps,
            capacity_rps: instance
                .capacity_rps
                .ok_or_else(|| sharing_cell.error("a member of a shared instance needs its capacity_rps (its rate)"))?,
            memory_gb,
        };
        let shared = &mut gpus[at].shared;
        match shared.iter_mut().find(|s| s.profile == instance.profile && s.start == instance.start) {
            Some(existing) if existing.sharing != sharing => {
                return Err(sharing_cell.error(format!(
                    "{}@{} is shared {} on an earlier line, not {sharing}",
                    existing.profile, existing.start, existing.sharing
                )))
            }
            Some(existing) => existing.members.push(member),
            None => shared.push(SharedInstance {
                profile: instance.profile,
                size: instance.size,
                start: instance.start,
                sharing,
                members: vec![member],
            }),
        }
    }
    let latency_rule = latency_rule.map_or_else(String::new, |(rule, _)| rule.to_string());
    let gpus_per_node = gpus.iter().map(|gpu| gpu.index.saturating_add(1)).max().unwrap_or(1);
    let margin = margin.and_then(|(margin, _)| margin);
    Ok(Plan { margin, ..Plan::from_gpus(gpus, UNRECORDED_STRATEGY, latency_rule, gpus_per_node) })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use tessera_core::{FleetUse, Optimality, ServiceReport};

    use super::*;
    use crate::formats::plan_file::{read_plan_file, MapProfiles};

    fn instance(service: &str, size: u8, start: u8) -> InstanceAssignment {
        InstanceAssignment {
            profile: format!("{size}g.{}gb", 10 * u32::from(size)),
            size,
            start,
            service: service.to_string(),
            model: "bert, \"base\"".to_string(),
            batch: 8,
            procs: 2,
            throughput_rps: 0.1 + 0.2,
            latency_ms: 12.345678901234567,
            capacity_rps: (size == 3).then_some(0.25),
        }
    }

    fn plan() -> Plan {
        Plan {
            gpu_count: 2,
            total_cost: 2.6,
            strategy: "optimal".into(),
            latency_rule: "queueing".into(),
            gpus_per_node: 8,
            fleet: vec![
                FleetUse { gpu_model: GpuModel::A100_80GB, cost_per_gpu: 1.0, limit: None, gpus: 1 },
                FleetUse { gpu_model: GpuModel::H100_80GB, cost_per_gpu: 1.6, limit: Some(4), gpus: 1 },
            ],
            gpus: vec![
                GpuAssignment {
                    node: 0,
                    index: 0,
                    gpu_model: GpuModel::A100_80GB,
                    instances: vec![instance("chat, eu", 4, 0), instance("search", 3, 4)],
                    shared: Vec::new(),
                },
                GpuAssignment {
                    node: 1,
                    index: 2,
                    gpu_model: GpuModel::H100_80GB,
                    instances: vec![instance("search", 7, 0)],
                    shared: Vec::new(),
                },
            ],
            services: vec![ServiceReport {
                service: "search".into(),
                model: "bert".into(),
                rate_rps: 10.0,
                latency_slo_ms: 100.0,
                provisioned_rps: 1.0 / 3.0,
                worst_latency_ms: 50.0,
                segments: 2,
                met: true,
                percentile: Some(99.5),
                predicted_attainment: Some(0.997),
                tolerance: Some(0.071),
                busiest_load: Some(0.93),
            }],
            optimality: Some(Optimality {
                objective: "cost".into(),
                value: 2.6,
                lower_bound: 2.0,
                proven_optimal: false,
                gap: 0.3,
            }),
            notes: vec!["profiles of bert on h100-80gb are estimated".into()],
            node_names: vec!["gpu-a".into(), "gpu-b".into()],
            images: [(
                "search".to_string(),
                tessera_core::ServiceImage { image: "serve:1".into(), args: vec!["--batch={batch}".into()] },
            )]
            .into(),
            traffic: Some(tessera_core::Traffic { arrivals: "poisson".into(), discipline: "random".into() }),
            margin: Some(0.06),
        }
    }

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn json_with(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        let mut value: serde_json::Value = serde_json::from_slice(&plan_json(&plan())).unwrap();
        edit(&mut value);
        serde_json::to_vec(&value).unwrap()
    }

    #[test]
    fn json_round_trips_exactly_with_the_version_first() {
        let dir = tempfile::tempdir().unwrap();
        let json = plan_json(&plan());
        assert!(String::from_utf8_lossy(&json).starts_with("{\n  \"version\": 3,\n  \"gpu_count\": 2,"));
        assert!(json.ends_with(b"}\n"));
        let path = write(dir.path(), "plan.json", &json);
        assert_eq!(read_plan_file(&path, None).unwrap(), plan());
        assert_eq!(read_plan_file(&path, None).unwrap(), plan());
    }

    #[test]
    fn a_plan_without_a_version_is_read_as_version_1() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = json_with(|value| {
            value.as_object_mut().unwrap().remove("version");
        });
        assert_eq!(read_plan_file(&write(dir.path(), "old.json", &bytes), None).unwrap(), plan());
    }

    #[test]
    fn another_version_and_unknown_fields_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let error_of =
            |name: &str, bytes: &[u8]| read_plan_file(&write(dir.path(), name, bytes), None).unwrap_err().to_string();
        let message = error_of("v4.json", &json_with(|value| value["version"] = 4.into()));
        assert!(
            message.ends_with("v4.json: plan version 4 is not supported (this build reads versions 1 to 3)"),
            "{message}"
        );
        let message = error_of("text.json", &json_with(|value| value["version"] = "1".into()));
        assert!(message.ends_with("text.json: not a Tessera plan: field 'version': expected a whole number, got \"1\""));
        let message = error_of("extra.json", &json_with(|value| value["colour"] = "blue".into()));
        assert!(message.contains("extra.json: not a Tessera plan: unknown field `colour`"), "{message}");
        let message = error_of("deep.json", &json_with(|value| value["gpus"][1]["instances"][0]["mig"] = 1.into()));
        assert!(message.contains("deep.json: not a Tessera plan: unknown field `mig`, expected one of"), "{message}");
        let message = error_of("list.json", b"[1, 2]");
        assert!(message.ends_with("list.json: not a Tessera plan: expected a JSON object"), "{message}");
        let message = error_of("broken.json", b"{\n\"gpu_count\": ");
        assert!(message.contains("broken.json: not a Tessera plan: EOF while parsing a value at line 2"), "{message}");
        let message = read_plan_file(&dir.path().join("absent.json"), None).unwrap_err().to_string();
        assert!(message.ends_with("absent.json: No such file or directory (os error 2)"), "{message}");
        for (name, bytes) in [("empty.json", &b""[..]), ("blank.csv", b"\xef\xbb\xbf \n\n")] {
            let message = error_of(name, bytes);
            assert!(message.contains(&format!("{name}: not a Tessera plan: the file is empty")), "{message}");
        }
    }

    #[test]
    fn shared_instances_round_trip_through_the_csv_one_row_per_member() {
        let dir = tempfile::tempdir().unwrap();
        let member = |service: &str, memory_gb: f64| SharedMember {
            service: service.to_string(),
            model: "resnet50".to_string(),
            batch: 1,
            latency_ms: 4.75,
            throughput_rps: 210.5,
            capacity_rps: 3.0,
            memory_gb,
        };
        let mut shared = plan();
        shared.gpus[0].instances.truncate(1);
        shared.gpus[0].shared = vec![SharedInstance {
            profile: "1g.10gb".into(),
            size: 1,
            start: 5,
            sharing: Sharing::Serialized,
            members: vec![member("a", 2.0), member("b, c", 2.5)],
        }];
        let mut bytes = Vec::new();
        write_plan_csv(&mut bytes, &shared).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains(",1g.10gb,1,5,a,resnet50,1,1,210.5,4.75,queueing,3,0.06,serialized,2\n"), "{text}");
        let read = read_plan_file(&write(dir.path(), "shared.csv", &bytes), None).unwrap();
        assert_eq!(read.gpus, shared.gpus);

        let refused = |edit: &dyn Fn(&str) -> String| {
            let path = write(dir.path(), "bad.csv", edit(&text).as_bytes());
            read_plan_file(&path, None).unwrap_err().to_string()
        };
        let message = refused(&|t| t.replacen(",serialized,2\n", ",mps,2\n", 1));
        assert!(message.contains("bad.csv:3: field 'sharing': unknown sharing 'mps'"), "{message}");
        let message = refused(&|t| t.replacen(",serialized,2\n", ",serialized,\n", 1));
        assert!(message.contains("a member of a shared instance needs its memory_gb"), "{message}");
        let message = refused(&|t| t.replacen("resnet50,1,1,", "resnet50,1,2,", 1));
        assert!(message.contains("procs must be 1"), "{message}");
    }

    #[test]
    fn csv_round_trips_what_verifying_and_deploying_need() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        write_plan_csv(&mut bytes, &plan()).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with(&(PLAN_CSV_HEADER.join(",") + "\n")), "{text}");
        assert!(text.contains("0,0,a100-80gb,4g.40gb,4,0,\"chat, eu\",\"bert, \"\"base\"\"\",8,2,0.30000000000000004,"));
        let path = write(dir.path(), "plan.csv", &bytes);
        let read = read_plan_file(&path, None).unwrap();
        assert_eq!(read.gpus, plan().gpus);
        assert_eq!(
            (read.gpu_count, read.latency_rule.as_str(), read.strategy.as_str(), read.gpus_per_node),
            (2, "queueing", "unrecorded", 3)
        );
        let fleet: Vec<(GpuModel, u64)> = read.fleet.iter().map(|f| (f.gpu_model, f.gpus)).collect();
        assert_eq!(fleet, [(GpuModel::A100_80GB, 1), (GpuModel::H100_80GB, 1)]);
        assert_eq!(read.margin, Some(0.06), "the margin travels in its column");
        assert_eq!(read_plan_file(&path, None).unwrap(), read);
    }

    #[test]
    fn bad_csv_plans_name_file_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        write_plan_csv(&mut bytes, &plan()).unwrap();
        let good = String::from_utf8(bytes).unwrap();
        let error_of =
            |text: String| read_plan_file(&write(dir.path(), "p.csv", text.as_bytes()), None).unwrap_err().to_string();
        let message = error_of(good.replacen("queueing", "parva", 2).replacen("parva", "queueing", 1));
        assert!(
            message.contains("p.csv:3: field 'latency_rule': 'parva' differs from 'queueing' on line 2"),
            "{message}"
        );
        let message = error_of(good.replacen("0,0,a100-80gb,3g", "0,0,h100-80gb,3g", 1));
        assert!(
            message.contains("p.csv:3: field 'gpu_model': node 0 gpu 0 is a100-80gb on an earlier line"),
            "{message}"
        );
        let message = error_of(good.replacen(",0.06,,\n", ",0.05,,\n", 2).replacen(",0.05,,\n", ",0.06,,\n", 1));
        assert!(message.contains("p.csv:3: field 'margin': '0.05' differs from '0.06' on line 2"), "{message}");
        // A margin out of [0, 1] would have the checks search without end.
        let message = error_of(good.replace(",0.06,,\n", ",1.5,,\n"));
        assert!(message.contains("p.csv:2: field 'margin': not a share in [0, 1]"), "{message}");
        let json = |margin: f64| json_with(|plan| plan["margin"] = serde_json::json!(margin));
        let message = read_plan_file(&write(dir.path(), "p.json", &json(-5.89e18)), None).unwrap_err().to_string();
        assert!(message.contains("p.json: not a Tessera plan: margin: -5.89e18 is not a share in [0, 1]"), "{message}");
        assert_eq!(read_plan_file(&write(dir.path(), "p.json", &json(1.0)), None).unwrap().margin, Some(1.0));
        let message = error_of(good.replacen(",8,2,", ",eight,2,", 1));
        assert!(message.contains("p.csv:2: field 'batch': expected a whole number, got 'eight'"), "{message}");
        let message = error_of(good.replacen("a100-80gb", "v100", 1));
        assert!(message.contains("p.csv:2: field 'gpu_model': unknown GPU model 'v100'"), "{message}");
        let message = error_of(good.replacen("latency_rule", "rule", 1));
        assert!(message.contains("p.csv:1: unknown column 'rule'"), "{message}");
    }

    #[test]
    fn a_parvagpu_deployment_map_is_told_by_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let text = "Num instance,Num GPU,Model,Placement,Instance size,Batch size,Num proc\r\n0,0,m,0,7,8,2\r\n";
        let path = write(dir.path(), "SLO1_deploy.csv", text.as_bytes());
        let catalog = tessera_core::ProfileCatalog::new();
        let profiles = MapProfiles { gpu: GpuModel::A100_80GB, catalog: &catalog };
        let plan = read_plan_file(&path, Some(profiles)).unwrap();
        assert_eq!((plan.gpu_count, plan.strategy.as_str(), plan.latency_rule.as_str()), (1, "parvagpu", ""));
        assert_eq!(plan.gpus[0].instances[0].profile, "7g.80gb");
        let error = read_plan_file(&path, None).unwrap_err().to_string();
        assert!(
            error.ends_with(
                "it is ParvaGPU's deployment map, which names models only and no numbers; read it \
                                 where profiles are given (`tessera verify`, `tessera plan --from`)"
            ),
            "{error}"
        );
    }
}
