//! The opaque configuration Tessera hands NVIDIA's DRA driver with each
//! claim: a `MigDeviceConfig` (`resource.nvidia.com/v1beta1`) sharing the
//! MIG device among the segment's processes through MPS, each process
//! limited to an equal share of the device's threads.
//!
//! Only the driver's documented fields are written (its API reference:
//! `sharing.strategy`, `sharing.mpsConfig.defaultActiveThreadPercentage`);
//! the test below writes those documented rules down and checks every
//! config against them.

use serde::Serialize;

/// The DRA driver's name, in claims and ResourceSlices.
pub const DRA_DRIVER: &str = "gpu.nvidia.com";
/// The DeviceClass of MIG devices.
pub const MIG_DEVICE_CLASS: &str = "mig.nvidia.com";
/// The API version of the driver's opaque configurations.
const CONFIG_API_VERSION: &str = "resource.nvidia.com/v1beta1";

/// A `MigDeviceConfig` with MPS sharing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigDeviceConfig {
    api_version: &'static str,
    kind: &'static str,
    sharing: Sharing,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Sharing {
    strategy: &'static str,
    mps_config: MpsConfig,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct MpsConfig {
    default_active_thread_percentage: u32,
}

impl MigDeviceConfig {
    /// MPS sharing among `procs` processes, each allowed `100 / procs` per
    /// cent of the device's threads (rounded down; at least 1).
    pub fn mps_for(procs: u32) -> Self {
        MigDeviceConfig {
            api_version: CONFIG_API_VERSION,
            kind: "MigDeviceConfig",
            sharing: Sharing {
                strategy: "MPS",
                mps_config: MpsConfig { default_active_thread_percentage: (100 / procs.max(1)).max(1) },
            },
        }
    }

    /// As JSON, for a claim's opaque parameters.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a MigDeviceConfig always serializes")
    }
}

#[cfg(test)]
pub(crate) mod rules {
    //! The DRA driver's documented rules for a `MigDeviceConfig` (its API
    //! reference, "MigDeviceConfig" and "MPS configuration reference"),
    //! written down independently of its code.

    use serde_json::Value;

    /// Every rule `config` breaks, in words; empty when it keeps them all.
    pub(crate) fn violations(config: &Value) -> Vec<String> {
        let mut broken = Vec::new();
        let Some(object) = config.as_object() else { return vec!["not an object".into()] };
        // Top level: TypeMeta and `sharing` only.
        for key in object.keys() {
            if !["apiVersion", "kind", "sharing"].contains(&key.as_str()) {
                broken.push(format!("unknown field '{key}'"));
            }
        }
        if object.get("apiVersion") != Some(&Value::from("resource.nvidia.com/v1beta1")) {
            broken.push("apiVersion must be resource.nvidia.com/v1beta1".into());
        }
        if object.get("kind") != Some(&Value::from("MigDeviceConfig")) {
            broken.push("kind must be MigDeviceConfig".into());
        }
        // `sharing` is optional; when given, `strategy` is TimeSlicing or MPS.
        let Some(sharing) = object.get("sharing") else { return broken };
        let Some(sharing) = sharing.as_object() else {
            return [broken, vec!["sharing must be an object".into()]].concat();
        };
        for key in sharing.keys() {
            // `timeSlicingConfig` is documented as not available for MIG devices.
            if !["strategy", "mpsConfig"].contains(&key.as_str()) {
                broken.push(format!("unknown field 'sharing.{key}'"));
            }
        }
        let strategy = sharing.get("strategy").and_then(Value::as_str);
        if !matches!(strategy, Some("TimeSlicing" | "MPS")) {
            broken.push("sharing.strategy must be TimeSlicing or MPS".into());
        }
        let Some(mps) = sharing.get("mpsConfig") else { return broken };
        if strategy != Some("MPS") {
            broken.push("sharing.mpsConfig needs strategy MPS".into());
        }
        let Some(mps) = mps.as_object() else { return [broken, vec!["mpsConfig must be an object".into()]].concat() };
        for (key, value) in mps {
            match key.as_str() {
                // An integer from 0 to 100.
                "defaultActiveThreadPercentage" => {
                    if value.as_u64().is_none_or(|percent| percent > 100) {
                        broken.push(format!("defaultActiveThreadPercentage must be an integer 0-100, got {value}"));
                    }
                }
                // Quantities (strings such as "10Gi"), a map of them, a flag.
                "defaultPinnedDeviceMemoryLimit" => {
                    if !value.is_string() {
                        broken.push("defaultPinnedDeviceMemoryLimit must be a quantity".into());
                    }
                }
                "defaultPerDevicePinnedMemoryLimit" => {
                    if !value.as_object().is_some_and(|map| map.values().all(Value::is_string)) {
                        broken.push("defaultPerDevicePinnedMemoryLimit must map devices to quantities".into());
                    }
                }
                "multiUser" => {
                    if !value.is_boolean() {
                        broken.push("multiUser must be a boolean".into());
                    }
                }
                other => broken.push(format!("unknown field 'sharing.mpsConfig.{other}'")),
            }
        }
        broken
    }
}

#[cfg(test)]
mod tests {
    use super::rules::violations;
    use super::*;
    use serde_json::json;

    #[test]
    fn every_config_keeps_the_documented_rules() {
        for procs in 1..=8 {
            let config = MigDeviceConfig::mps_for(procs).to_value();
            assert_eq!(violations(&config), Vec::<String>::new(), "{config}");
        }
        assert_eq!(
            MigDeviceConfig::mps_for(3).to_value(),
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                   "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 33}}})
        );
        assert_eq!(MigDeviceConfig::mps_for(1).sharing.mps_config.default_active_thread_percentage, 100);
        assert_eq!(MigDeviceConfig::mps_for(200).sharing.mps_config.default_active_thread_percentage, 1);
    }

    #[test]
    fn the_rules_refuse_what_the_documentation_does_not_allow() {
        let bad = [
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"}),
            json!({"apiVersion": "resource.nvidia.com/v1", "kind": "MigDeviceConfig"}),
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig", "extra": 1}),
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                   "sharing": {"strategy": "Mps"}}),
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                   "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}}),
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                   "sharing": {"strategy": "TimeSlicing", "mpsConfig": {}}}),
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                   "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 150}}}),
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                   "sharing": {"strategy": "MPS", "mpsConfig": {"activeThreadPercentage": 50}}}),
        ];
        for config in bad {
            assert!(!violations(&config).is_empty(), "{config}");
        }
        let documented = json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
            "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
              "defaultPinnedDeviceMemoryLimit": "10Gi", "defaultPerDevicePinnedMemoryLimit": {"0": "2Gi"},
              "multiUser": false}}});
        assert_eq!(violations(&documented), Vec::<String>::new());
    }
}
