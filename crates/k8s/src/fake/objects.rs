//! JSON objects as the fake API server handles them: leaf field paths
//! (for server-side apply's field ownership), RFC 7386 merge patches, label
//! and field selectors, and percent-decoded query values.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// The separator of a field path's keys inside the fake (keys such as
/// `app.kubernetes.io/name` hold dots); shown as `.`.
pub(super) const SEP: char = '\u{1f}';

/// A path as the real server writes it: `.spec.replicas`.
pub(super) fn shown_path(path: &str) -> String {
    path.replace(SEP, ".")
}

/// Every leaf of `value` by path; lists are leaves (owned whole).
pub(super) fn leaves(value: &Value, path: &str, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                leaves(child, &format!("{path}{SEP}{key}"), out);
            }
        }
        other => {
            out.insert(path.to_string(), other.clone());
        }
    }
}

/// The value at a leaf path.
pub(super) fn at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split(SEP).skip(1).try_fold(value, |v, key| v.get(key))
}

/// Removes a leaf path (and maps it leaves empty).
pub(super) fn remove(value: &mut Value, path: &str) {
    let keys: Vec<&str> = path.split(SEP).skip(1).collect();
    fn go(value: &mut Value, keys: &[&str]) {
        let Some(map) = value.as_object_mut() else { return };
        if keys.len() == 1 {
            map.remove(keys[0]);
        } else if let Some(child) = map.get_mut(keys[0]) {
            go(child, &keys[1..]);
            if child.as_object().is_some_and(Map::is_empty) {
                map.remove(keys[0]);
            }
        }
    }
    go(value, &keys);
}

/// Sets a leaf path.
pub(super) fn set(value: &mut Value, path: &str, leaf: Value) {
    let keys: Vec<&str> = path.split(SEP).skip(1).collect();
    let mut current = value;
    for key in &keys[..keys.len() - 1] {
        if !current.get(*key).is_some_and(Value::is_object) {
            current[*key] = json!({});
        }
        current = current.get_mut(*key).expect("just made");
    }
    current[keys[keys.len() - 1]] = leaf;
}

/// RFC 7386 JSON merge patch.
pub(super) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let map = target.as_object_mut().expect("made an object");
    for (key, value) in patch {
        if value.is_null() {
            map.remove(key);
        } else {
            merge_patch(map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// `true` when `object` matches a `k=v,k=v` label selector.
pub(super) fn labels_match(object: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| match term.split_once('=') {
        Some((key, value)) => object["metadata"]["labels"][key].as_str() == Some(value),
        None => object["metadata"]["labels"][term].is_string(),
    })
}

/// `true` when `object` matches a `spec.nodeName=x,spec.driver=y` field
/// selector.
pub(super) fn fields_match(object: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (path, value) = term.split_once('=').unwrap_or((term, ""));
        at(object, &format!("{SEP}{}", path.replace('.', &SEP.to_string()))).and_then(Value::as_str) == Some(value)
    })
}

/// Percent-decodes a query value.
pub(super) fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
