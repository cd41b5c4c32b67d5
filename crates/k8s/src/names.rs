//! Kubernetes names for Tessera's services, made deterministically: the
//! same service always gets the same name, and a name that had to change is
//! said in a note.

use std::collections::BTreeMap;

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

/// Each service's Kubernetes name, and a note for every name that differs
/// from the service's own: lower-cased, other characters turned into `-`,
/// cut to 40 characters, and given a hash suffix of the original name when
/// it had to be cut or would collide with another service's.
pub fn service_names<'a>(services: impl IntoIterator<Item = &'a str>) -> (BTreeMap<String, String>, Vec<String>) {
    let services: Vec<&str> = services.into_iter().collect();
    let plain: Vec<String> = services.iter().map(|service| label_part(service)).collect();
    let mut names = BTreeMap::new();
    let mut notes = Vec::new();
    for (service, candidate) in services.iter().zip(&plain) {
        let collides = plain.iter().filter(|other| *other == candidate).count() > 1;
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
            notes.push(format!("service '{service}' is named '{name}' in Kubernetes (not a valid Kubernetes name)"));
        }
        names.insert((*service).to_string(), name);
    }
    (names, notes)
}

/// A MIG profile as a name part: `3g.40gb` → `3g40gb`.
pub fn profile_part(profile: &str) -> String {
    label_part(&profile.replace('.', ""))
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
            [
                "service 'Fraud Check' is named 'fraud-check' in Kubernetes (not a valid Kubernetes name)",
                "service 'chat_assist' is named 'chat-assist' in Kubernetes (not a valid Kubernetes name)",
            ]
        );
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
        assert_eq!(notes.len(), 4, "{notes:#?}");
        assert_eq!(profile_part("3g.40gb"), "3g40gb");
        assert_eq!(profile_part("1g.10gb+me"), "1g10gb-me");
    }
}
