//! Kubernetes names for Tessera's services, made deterministically: the
//! same service always gets the same name, and a name that had to change is
//! said in a note; and a plan's id, a stable hash of its JSON.

use std::collections::{BTreeMap, HashMap};

use tessera_core::{GpuModel, InstanceAssignment, Plan};

use crate::labels::SERVICE_LABEL;

/// The longest name part a service contributes, so that object names built
/// from it stay within a label value's 63 characters.
const MAX_SERVICE_CHARS: usize = 40;

/// FNV-1a, 64 bits: a stable hash of `bytes` for name suffixes and plan ids
/// (the same on every machine and every run).
pub fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// `text` as a DNS-1123 label part: lower case, letters, digits and `-`,
/// runs of anything else one `-`, no `-` at either end.
fn label_part(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// How many renamed services a note names before it says how many more.
const NAMED_IN_NOTE: usize = 3;

/// Each service's Kubernetes name, and one note when some names differ
/// from the services' own (how many, the first few): lower-cased, other
/// characters turned into `-`, cut to 40 characters, and given a hash
/// suffix of the original name when it had to be cut or would collide with
/// another service's.
pub fn service_names<'a>(services: impl IntoIterator<Item = &'a str>) -> (BTreeMap<String, String>, Vec<String>) {
    let services: Vec<&str> = services.into_iter().collect();
    let plain: Vec<String> = services.iter().map(|service| label_part(service)).collect();
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for candidate in &plain {
        *uses.entry(candidate.as_str()).or_default() += 1;
    }
    let mut names = BTreeMap::new();
    let mut renamed = Vec::new();
    for (service, candidate) in services.iter().zip(&plain) {
        let collides = uses[candidate.as_str()] > 1;
        let name = if collides || candidate.is_empty() || candidate.len() > MAX_SERVICE_CHARS {
            let suffix = format!("{:06x}", stable_hash(service.as_bytes()) & 0xff_ffff);
            let keep = MAX_SERVICE_CHARS - suffix.len() - 1;
            let head = candidate[..candidate.len().min(keep)].trim_end_matches('-');
            if head.is_empty() {
                format!("s-{suffix}")
            } else {
                format!("{head}-{suffix}")
            }
        } else {
            candidate.clone()
        };
        if name != *service {
            renamed.push(format!("'{service}' is '{name}'"));
        }
        names.insert((*service).to_string(), name);
    }
    let notes = match renamed.len() {
        0 => Vec::new(),
        1 => vec![format!("service {} in Kubernetes (not a valid Kubernetes name)", renamed[0])],
        n => {
            let shown = renamed[..n.min(NAMED_IN_NOTE)].join(", ");
            let more = if n > NAMED_IN_NOTE { format!(", and {} more", n - NAMED_IN_NOTE) } else { String::new() };
            vec![format!(
                "{n} services have other names in Kubernetes (not valid Kubernetes names; each object's {SERVICE_LABEL} label has it): {shown}{more}"
            )]
        }
    };
    (names, notes)
}

/// A MIG profile as a name part: `3g.40gb` → `3g40gb`.
pub fn profile_part(profile: &str) -> String {
    label_part(&profile.replace('.', ""))
}

/// A segment's configuration as a name part and label value, everything its
/// pods' capacity depends on besides the service: the GPU model, the MIG
/// profile, the batch and the processes, `a100-80gb-3g40gb-b8-p2`: at most
/// 42 characters (a model id of 10, a profile of 7, two `u32`s), within a
/// label value's 63.
pub fn config_name(gpu_model: GpuModel, instance: &InstanceAssignment) -> String {
    format!("{gpu_model}-{}-b{}-p{}", profile_part(&instance.profile), instance.batch, instance.procs)
}

/// A plan's id: a stable hash of its JSON, 16 hex digits.
pub fn plan_id(plan: &Plan) -> String {
    format!("{:016x}", stable_hash(&tessera_store::plan_json(plan)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_are_kept_and_others_sanitized_deterministically_with_a_note() {
        let (names, notes) = service_names(["photo-tagging", "Fraud Check", "chat_assist"]);
        assert_eq!(names["photo-tagging"], "photo-tagging");
        assert_eq!(names["Fraud Check"], "fraud-check");
        assert_eq!(names["chat_assist"], "chat-assist");
        assert_eq!(
            notes,
            ["2 services have other names in Kubernetes (not valid Kubernetes names; each object's tessera.io/service label has it): 'Fraud Check' is 'fraud-check', 'chat_assist' is 'chat-assist'"]
        );
        let many: Vec<String> = (0..5).map(|n| format!("S{n}")).collect();
        let (_, notes) = service_names(many.iter().map(String::as_str));
        assert_eq!(notes.len(), 1, "one line however many are renamed");
        assert!(notes[0].starts_with("5 services") && notes[0].ends_with("'S2' is 's2', and 2 more"), "{notes:?}");
        assert_eq!(service_names(["Fraud Check"]).0, service_names(["Fraud Check"]).0, "deterministic");
    }

    #[test]
    fn collisions_long_names_and_empty_names_get_a_hash_suffix() {
        let long = "a".repeat(80);
        let (names, notes) = service_names(["A.B", "a-b", "***", long.as_str()]);
        assert_ne!(names["A.B"], names["a-b"]);
        for name in names.values() {
            assert!(name.len() <= MAX_SERVICE_CHARS, "{name}");
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{name}");
            assert!(!name.starts_with('-') && !name.ends_with('-'), "{name}");
        }
        assert!(names["***"].starts_with("s-"));
        assert!(notes[0].starts_with("4 services"), "{notes:#?}");
        assert_eq!(profile_part("3g.40gb"), "3g40gb");
        assert_eq!(profile_part("1g.10gb+me"), "1g10gb-me");
    }

    #[test]
    fn a_configuration_is_a_label_value_naming_model_profile_batch_and_processes() {
        let instance = InstanceAssignment {
            profile: "7g.141gb".into(),
            size: 7,
            start: 0,
            service: "s".into(),
            model: "m".into(),
            batch: 1024,
            procs: 48,
            throughput_rps: 1.0,
            latency_ms: 1.0,
            capacity_rps: None,
        };
        assert_eq!(config_name(GpuModel::H200_141GB, &instance), "h200-141gb-7g141gb-b1024-p48");
        let largest = InstanceAssignment { batch: u32::MAX, procs: u32::MAX, ..instance };
        let name = config_name(GpuModel::H200_141GB, &largest);
        assert_eq!(name.len(), 42, "{name}");
        assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    }
}
