//! An in-process fake of the Kubernetes API server, for tests: plain HTTP
//! on 127.0.0.1 (one request per connection), objects kept as JSON. It does
//! what Tessera's requests need, the way the real server does: get, list
//! (label and field selectors), delete, JSON merge patch, server-side
//! apply with field ownership (a field another manager owns with another
//! value is a 409 conflict unless forced; an unchanged object keeps its
//! resourceVersion), create (409 when it exists) and replace (409 when the
//! resourceVersion given is not the stored one). Faults can be injected: a status for the n-th request
//! of a method and resource, or a resource RBAC forbids. Deleting a pod of
//! the DRA plugin recreates it (as its DaemonSet would) and is recorded.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use serde_json::{json, Value};
use tessera_core::Plan;

mod objects;

use objects::{at, decode, fields_match, labels_match, leaves, merge_patch, remove, set, shown_path, SEP};
use tessera_gpu::{plan_node_layouts, FakeNvidiaSmi, MigDevices};

/// One stored object and who owns its fields.
#[derive(Debug, Clone)]
struct Stored {
    object: Value,
    /// Field path (`.spec.replicas`) → field manager.
    owners: BTreeMap<String, String>,
}

/// A fault to inject.
#[derive(Debug, Clone)]
struct Fault {
    method: String,
    plural: String,
    /// Fails the n-th matching request (1-based); 0 = every one.
    nth: usize,
    seen: usize,
    status: u16,
}

#[derive(Debug, Default)]
struct State {
    objects: BTreeMap<(String, String, String), Stored>,
    version: u64,
    requests: Vec<String>,
    faults: Vec<Fault>,
    plugin: Option<(String, String, String)>,
    plugin_restarts: Vec<String>,
    /// Deployments are ready as soon as they are applied.
    ready_on_apply: bool,
    /// After every write, when kept: the request and the objects of the
    /// kinds in [`HISTORY_PLURALS`].
    history: Option<Vec<(String, Vec<Value>)>>,
}

/// The resources whose objects the history keeps after every write: what
/// says where traffic goes (Deployments with their readiness, Services,
/// HTTPRoutes) and what the agents are told and report (ConfigMaps, Nodes).
const HISTORY_PLURALS: [&str; 5] = ["deployments", "services", "httproutes", "configmaps", "nodes"];

/// The fake API server; stops when dropped.
pub struct FakeApiServer {
    address: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// (apiVersion, kind, namespaced) of a resource plural.
fn resource(plural: &str) -> Option<(&'static str, &'static str, bool)> {
    Some(match plural {
        "nodes" => ("v1", "Node", false),
        "pods" => ("v1", "Pod", true),
        "configmaps" => ("v1", "ConfigMap", true),
        "deployments" => ("apps/v1", "Deployment", true),
        "resourceclaims" => ("resource.k8s.io/v1", "ResourceClaim", true),
        "resourceslices" => ("resource.k8s.io/v1", "ResourceSlice", false),
        "services" => ("v1", "Service", true),
        "httproutes" => ("gateway.networking.k8s.io/v1", "HTTPRoute", true),
        "leases" => ("coordination.k8s.io/v1", "Lease", true),
        "events" => ("events.k8s.io/v1", "Event", true),
        _ => return None,
    })
}

/// The plural of a kind.
fn plural_of(kind: &str) -> &'static str {
    match kind {
        "Node" => "nodes",
        "Pod" => "pods",
        "ConfigMap" => "configmaps",
        "Deployment" => "deployments",
        "ResourceClaim" => "resourceclaims",
        "Service" => "services",
        "HTTPRoute" => "httproutes",
        "Event" => "events",
        "Lease" => "leases",
        _ => "resourceslices",
    }
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message}),
    )
}

impl State {
    fn handle(&mut self, method: &str, target: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
        let answer = self.answer(method, target, content_type, body);
        if method != "GET" && answer.0 < 300 {
            self.record(format!("{method} {}", target.split('?').next().unwrap_or_default()));
        }
        answer
    }

    /// Keeps the objects of [`HISTORY_PLURALS`] after a write, when asked
    /// to.
    fn record(&mut self, what: String) {
        if self.history.is_none() {
            return;
        }
        let kept: Vec<Value> = self
            .objects
            .iter()
            .filter(|((plural, _, _), _)| HISTORY_PLURALS.contains(&plural.as_str()))
            .map(|(_, stored)| stored.object.clone())
            .collect();
        if let Some(history) = self.history.as_mut() {
            history.push((what, kept));
        }
    }

    fn answer(&mut self, method: &str, target: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let query: BTreeMap<String, String> =
            query.split('&').filter_map(|pair| pair.split_once('=')).map(|(k, v)| (k.to_string(), decode(v))).collect();
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let rest = match parts.as_slice() {
            ["api", "v1", rest @ ..] => rest,
            ["apis", _, _, rest @ ..] => rest,
            _ => return status(404, "NotFound", "no such path"),
        };
        let (namespace, rest) = match rest {
            ["namespaces", namespace, rest @ ..] if !rest.is_empty() => (namespace.to_string(), rest),
            rest => (String::new(), rest),
        };
        let (plural, name) = match rest {
            [plural] => (plural.to_string(), None),
            [plural, name] => (plural.to_string(), Some(name.to_string())),
            _ => return status(404, "NotFound", "no such path"),
        };
        let Some((api_version, kind, _)) = resource(&plural) else {
            return status(404, "NotFound", &format!("the server could not find the requested resource ({plural})"));
        };
        let shown = match &name {
            Some(name) if namespace.is_empty() => name.clone(),
            Some(name) => format!("{namespace}/{name}"),
            None if namespace.is_empty() => String::new(),
            None => format!("{namespace}/"),
        };
        self.requests.push(format!("{method} {plural} {shown}").trim_end().to_string());
        for fault in &mut self.faults {
            if fault.method == method && fault.plural == plural {
                fault.seen += 1;
                if fault.nth == 0 || fault.nth == fault.seen {
                    let group = api_version.split_once('/').map_or("", |(g, _)| g);
                    return match fault.status {
                        403 => status(
                            403,
                            "Forbidden",
                            &format!(
                                "{plural}.{group} \"{}\" is forbidden: User \"system:serviceaccount:tessera:tessera\" cannot {} resource \"{plural}\" in API group \"{group}\" in the namespace \"{namespace}\"",
                                name.clone().unwrap_or_default(),
                                method.to_lowercase()
                            ),
                        ),
                        401 => status(401, "Unauthorized", "Unauthorized"),
                        code => status(code, "InternalError", "an error on the server (\"etcdserver: request timed out\") has prevented the request from succeeding"),
                    };
                }
            }
        }
        let key = |name: &str| (plural.clone(), namespace.clone(), name.to_string());
        match (method, name) {
            ("GET", None) => {
                let labels = query.get("labelSelector").cloned().unwrap_or_default();
                let fields = query.get("fieldSelector").cloned().unwrap_or_default();
                let items: Vec<Value> = self
                    .objects
                    .iter()
                    .filter(|((p, ns, _), _)| *p == plural && (namespace.is_empty() || *ns == namespace))
                    .map(|(_, stored)| stored.object.clone())
                    .filter(|object| labels_match(object, &labels) && fields_match(object, &fields))
                    .collect();
                (
                    200,
                    json!({"apiVersion": api_version, "kind": format!("{kind}List"),
                    "metadata": {"resourceVersion": self.version.to_string()}, "items": items}),
                )
            }
            ("GET", Some(name)) => match self.objects.get(&key(&name)) {
                Some(stored) => (200, stored.object.clone()),
                None => status(404, "NotFound", &format!("{plural} \"{name}\" not found")),
            },
            ("DELETE", Some(name)) => match self.objects.remove(&key(&name)) {
                Some(stored) => {
                    self.after_delete(&stored.object);
                    (200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}))
                }
                None => status(404, "NotFound", &format!("{plural} \"{name}\" not found")),
            },
            ("PATCH", Some(name)) => {
                let Ok(patch) = serde_json::from_slice::<Value>(body) else {
                    return status(400, "BadRequest", "the body is not JSON");
                };
                if content_type.starts_with("application/apply-patch") {
                    let manager = query.get("fieldManager").cloned().unwrap_or_default();
                    if manager.is_empty() {
                        return status(422, "Invalid", "fieldManager is required for apply requests");
                    }
                    let force = query.get("force").is_some_and(|f| f == "true");
                    self.apply(key(&name), patch, &manager, force, api_version, kind)
                } else {
                    let Some(stored) = self.objects.get_mut(&key(&name)) else {
                        return status(404, "NotFound", &format!("{plural} \"{name}\" not found"));
                    };
                    let before = stored.object.clone();
                    merge_patch(&mut stored.object, &patch);
                    if stored.object != before {
                        self.version += 1;
                        stored.object["metadata"]["resourceVersion"] = self.version.to_string().into();
                    }
                    (200, stored.object.clone())
                }
            }
            ("POST", None) => {
                let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
                    return status(400, "BadRequest", "the body is not JSON");
                };
                let Some(name) = object["metadata"]["name"].as_str().map(str::to_string) else {
                    return status(422, "Invalid", "metadata.name: Required value");
                };
                if self.objects.contains_key(&key(&name)) {
                    return status(409, "AlreadyExists", &format!("{plural} \"{name}\" already exists"));
                }
                self.version += 1;
                object["metadata"]["resourceVersion"] = self.version.to_string().into();
                if !namespace.is_empty() {
                    object["metadata"]["namespace"] = namespace.clone().into();
                }
                self.objects.insert(key(&name), Stored { object: object.clone(), owners: BTreeMap::new() });
                (201, object)
            }
            // A replace whose resourceVersion is not the stored one is a
            // conflict: what optimistic concurrency rests on.
            ("PUT", Some(name)) => {
                let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
                    return status(400, "BadRequest", "the body is not JSON");
                };
                let Some(stored) = self.objects.get_mut(&key(&name)) else {
                    return status(404, "NotFound", &format!("{plural} \"{name}\" not found"));
                };
                let expected = &stored.object["metadata"]["resourceVersion"];
                let given = &object["metadata"]["resourceVersion"];
                if !given.is_null() && given != expected {
                    return status(
                        409,
                        "Conflict",
                        &format!(
                            "Operation cannot be fulfilled on {plural} \"{name}\": the object has been modified; \
                             please apply your changes to the latest version and try again"
                        ),
                    );
                }
                self.version += 1;
                object["metadata"]["resourceVersion"] = self.version.to_string().into();
                stored.object = object.clone();
                (200, object)
            }
            _ => status(405, "MethodNotAllowed", "not supported by the fake"),
        }
    }

    fn apply(
        &mut self,
        key: (String, String, String),
        applied: Value,
        manager: &str,
        force: bool,
        api_version: &str,
        kind: &str,
    ) -> (u16, Value) {
        let mut fields = BTreeMap::new();
        leaves(&applied, "", &mut fields);
        for identity in [".apiVersion", ".kind", ".metadata.name", ".metadata.namespace"] {
            fields.remove(&identity.replace('.', &SEP.to_string()));
        }
        let existing = self.objects.get(&key).cloned();
        let mut stored = existing.clone().unwrap_or_else(|| Stored {
            object: json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": key.2,
                "uid": format!("uid-{}", self.version + 1), "creationTimestamp": "2026-01-01T00:00:00Z"}}),
            owners: BTreeMap::new(),
        });
        if !key.1.is_empty() {
            stored.object["metadata"]["namespace"] = key.1.clone().into();
        }
        let conflicts: Vec<String> = fields
            .iter()
            .filter(|(path, value)| {
                stored.owners.get(*path).is_some_and(|owner| owner != manager)
                    && at(&stored.object, path) != Some(value)
            })
            .map(|(path, _)| format!("conflict with \"{}\": {}", stored.owners[path], shown_path(path)))
            .collect();
        if !conflicts.is_empty() && !force {
            return status(
                409,
                "Conflict",
                &format!("Apply failed with {} conflict(s): {}", conflicts.len(), conflicts.join(", ")),
            );
        }
        let before = stored.object.clone();
        let dropped: Vec<String> = stored
            .owners
            .iter()
            .filter(|(path, owner)| *owner == manager && !fields.contains_key(*path))
            .map(|(p, _)| p.clone())
            .collect();
        for path in dropped {
            remove(&mut stored.object, &path);
            stored.owners.remove(&path);
        }
        for (path, value) in fields {
            set(&mut stored.object, &path, value);
            stored.owners.insert(path, manager.to_string());
        }
        let created = existing.is_none();
        if created || stored.object != before {
            self.version += 1;
            stored.object["metadata"]["resourceVersion"] = self.version.to_string().into();
        }
        if self.ready_on_apply && kind == "Deployment" {
            let replicas = stored.object["spec"]["replicas"].as_u64().unwrap_or(1);
            stored.object["status"] = json!({"replicas": replicas, "readyReplicas": replicas});
        }
        let object = stored.object.clone();
        self.objects.insert(key, stored);
        (if created { 201 } else { 200 }, object)
    }

    /// A deleted pod of the DRA plugin comes back (its DaemonSet).
    fn after_delete(&mut self, object: &Value) {
        let Some((namespace, label, value)) = self.plugin.clone() else { return };
        let node = object["spec"]["nodeName"].as_str().unwrap_or_default().to_string();
        if object["kind"] != "Pod"
            || object["metadata"]["namespace"] != namespace.as_str()
            || object["metadata"]["labels"][&label] != value.as_str()
        {
            return;
        }
        self.plugin_restarts.push(node.clone());
        let name = format!("kubelet-plugin-{node}-{}", self.plugin_restarts.len());
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
            "labels": {label: value}}, "spec": {"nodeName": node, "containers": []}});
        self.put(pod);
    }

    fn put(&mut self, object: Value) {
        let plural = plural_of(object["kind"].as_str().unwrap_or_default()).to_string();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        self.version += 1;
        let mut object = object;
        object["metadata"]["resourceVersion"] = self.version.to_string().into();
        self.objects.insert((plural, namespace, name), Stored { object, owners: BTreeMap::new() });
    }
}

/// Reads one HTTP/1.1 request and answers it.
fn serve(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or_default().to_string(), words.next().unwrap_or_default().to_string());
    let (mut length, mut content_type) = (0usize, String::new());
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "content-type" => content_type = value.trim().to_string(),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let (code, answer) = lock(state).handle(&method, &target, &content_type, &body);
    let bytes = serde_json::to_vec(&answer).unwrap_or_default();
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        bytes.len()
    )?;
    stream.write_all(&bytes)?;
    stream.flush()
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl FakeApiServer {
    /// Starts it on a free port of 127.0.0.1.
    ///
    /// # Panics
    /// When no port can be bound.
    pub fn start() -> FakeApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = listener.local_addr().expect("a bound address");
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (state, stop) = (Arc::clone(&state), Arc::clone(&stop));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        let state = Arc::clone(&state);
                        std::thread::spawn(move || {
                            let _ = serve(stream, &state);
                        });
                    }
                }
            })
        };
        FakeApiServer { address, state, stop, thread: Some(thread) }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Writes a kubeconfig whose context `fake` points at it into `dir`.
    ///
    /// # Panics
    /// When the file cannot be written.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\nusers:\n- name: fake\n  user:\n    token: fake-token\n",
            self.url()
        );
        std::fs::write(&path, text).expect("a writable test directory");
        path
    }

    /// Stores `object` as it is (no field manager).
    pub fn put(&self, object: Value) {
        lock(&self.state).put(object);
    }

    /// The object, if stored.
    pub fn get(&self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.state).objects.get(&(plural.into(), namespace.into(), name.into())).map(|s| s.object.clone())
    }

    /// Every object of a resource.
    pub fn list(&self, plural: &str) -> Vec<Value> {
        lock(&self.state).objects.iter().filter(|((p, _, _), _)| p == plural).map(|(_, s)| s.object.clone()).collect()
    }

    /// Every request so far, as `METHOD plural namespace/name`.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.state).requests.clone()
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        lock(&self.state).requests.clear();
    }

    /// Answers the `nth` (1-based; 0: every) `method` request of `plural`
    /// with `status` (403 and 401 as RBAC and authentication do).
    pub fn fail(&self, method: &str, plural: &str, nth: usize, status: u16) {
        lock(&self.state).faults.push(Fault { method: method.into(), plural: plural.into(), nth, seen: 0, status });
    }

    /// Removes the injected faults.
    pub fn heal(&self) {
        lock(&self.state).faults.clear();
    }

    /// Takes over `path` of the object with `value` as field manager
    /// `manager` (someone else editing it, e.g. `kubectl scale`).
    pub fn edit_as(&self, manager: &str, plural: &str, namespace: &str, name: &str, path: &str, value: Value) {
        let mut state = lock(&self.state);
        let stored = state.objects.get_mut(&(plural.into(), namespace.into(), name.into())).expect("the object exists");
        let path = path.replace('.', &SEP.to_string());
        set(&mut stored.object, &path, value);
        stored.owners.insert(path, manager.to_string());
    }

    /// Pods in `namespace` labelled `label=value` are the DRA plugin's: one
    /// is put on each of `nodes`, and a deleted one comes back.
    pub fn run_dra_plugin(&self, namespace: &str, label: &str, value: &str, nodes: &[&str]) {
        let mut state = lock(&self.state);
        state.plugin = Some((namespace.into(), label.into(), value.into()));
        for node in nodes {
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("kubelet-plugin-{node}"),
                "namespace": namespace, "labels": {label: value}}, "spec": {"nodeName": node, "containers": []}});
            state.put(pod);
        }
    }

    /// Plays the DRA driver's kubelet plugin restarting on `node`: one
    /// ResourceSlice with the MIG devices `driver` has on the GPUs of
    /// `part` (node `number` of the plan).
    ///
    /// # Panics
    /// When `driver` has no layout for `part` (a test's mistake).
    pub fn publish_mig_slices(&self, node: &str, driver: &mut FakeNvidiaSmi, part: &Plan, number: u32) {
        let layouts = plan_node_layouts(driver, part, number).expect("the fake driver lays the part out");
        let mut devices = Vec::new();
        for gpu in &layouts.gpus {
            let index = gpu.gpu();
            for device in driver.mig_devices(index).expect("the fake driver lists its MIG devices") {
                let live = gpu.deployment.live.instances.iter().find(|i| i.gi_id == device.gi_id);
                let live = live.expect("every MIG device is an instance of the layout");
                devices.push(
                    json!({"name": format!("gpu-{index}-mig-{}-{}", live.profile.replace('.', ""), live.start),
                    "attributes": {"type": {"string": "mig"}, "profile": {"string": live.profile},
                        "uuid": {"string": device.uuid}, "parentUUID": {"string": format!("GPU-fake-{node}-{index}")},
                        "productName": {"string": "NVIDIA A100-SXM4-80GB"}}}),
                );
            }
        }
        self.put(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-gpu.nvidia.com")},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}));
    }

    /// The nodes whose DRA plugin pod was deleted, in order.
    pub fn plugin_restarts(&self) -> Vec<String> {
        lock(&self.state).plugin_restarts.clone()
    }

    /// Plays the Deployment controller the quick way: a Deployment applied
    /// from now on has all its replicas ready at once.
    pub fn ready_on_apply(&self) {
        lock(&self.state).ready_on_apply = true;
    }

    /// Keeps, from now on, the Deployments, Services, HTTPRoutes,
    /// ConfigMaps and Nodes after every write (and every
    /// [`FakeApiServer::set_ready`]), starting with those there now.
    pub fn keep_history(&self) {
        let mut state = lock(&self.state);
        state.history = Some(Vec::new());
        state.record("start".into());
    }

    /// What [`FakeApiServer::keep_history`] kept: per write, the request
    /// (`METHOD path`) and every object of those kinds after it.
    pub fn history(&self) -> Vec<(String, Vec<Value>)> {
        lock(&self.state).history.clone().unwrap_or_default()
    }

    /// Plays the Deployment controller for one Deployment: its replicas
    /// are all ready (a write in the history).
    pub fn set_ready(&self, namespace: &str, name: &str) {
        let mut state = lock(&self.state);
        let Some(stored) = state.objects.get_mut(&("deployments".into(), namespace.into(), name.into())) else {
            return;
        };
        let replicas = stored.object["spec"]["replicas"].as_u64().unwrap_or(1);
        stored.object["status"] = json!({"replicas": replicas, "readyReplicas": replicas});
        state.record(format!("ready {namespace}/{name}"));
    }

    /// Plays the Deployment controller and kubelet: every Deployment's pods
    /// run and are ready, with `restarts` restarts each.
    pub fn run_deployments(&self, restarts: u64) {
        let mut state = lock(&self.state);
        let deployments: Vec<Value> =
            state.objects.iter().filter(|((p, _, _), _)| p == "deployments").map(|(_, s)| s.object.clone()).collect();
        for deployment in deployments {
            let replicas = deployment["spec"]["replicas"].as_u64().unwrap_or(1);
            let namespace = deployment["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
            let name = deployment["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let labels = deployment["spec"]["template"]["metadata"]["labels"].clone();
            for k in 0..replicas {
                state.put(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("{name}-{k}"),
                    "namespace": namespace, "labels": labels},
                    "status": {"containerStatuses": [{"name": "serve", "ready": true, "restartCount": restarts}]}}));
            }
            if let Some(stored) = state.objects.get_mut(&("deployments".into(), namespace, name)) {
                stored.object["status"] = json!({"replicas": replicas, "readyReplicas": replicas});
            }
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
