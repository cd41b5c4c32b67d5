//! The connection to a cluster's API server: a kube client on a
//! single-threaded runtime of its own, so callers stay synchronous, and
//! every failure turned into one line naming the context, the request and
//! the cause.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::Value;

use crate::error::K8sError;
use crate::inventory::{inventory, ClusterInventory};

/// A bulk request's failure: the object's name and the client's error
/// (boxed: the error is large).
type NamedFailure = Box<(String, kube::Error)>;

/// The field manager of every server-side apply Tessera makes.
pub const FIELD_MANAGER: &str = "tessera";

/// Where the cluster is: a kubeconfig file (else `$KUBECONFIG` or
/// `~/.kube/config`, else the pod's service account) and a context in it
/// (else its current context).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterOptions {
    /// The kubeconfig file.
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The context.
    pub context: Option<String>,
}

/// The kinds of object Tessera reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `v1` Node.
    Node,
    /// `v1` Pod.
    Pod,
    /// `v1` ConfigMap.
    ConfigMap,
    /// `resource.k8s.io/v1` ResourceClaim.
    ResourceClaim,
    /// `resource.k8s.io/v1` ResourceSlice.
    ResourceSlice,
    /// `apps/v1` Deployment.
    Deployment,
    /// `v1` Service.
    Service,
    /// `gateway.networking.k8s.io/v1` HTTPRoute.
    HttpRoute,
    /// `events.k8s.io/v1` Event.
    Event,
    /// `coordination.k8s.io/v1` Lease.
    Lease,
}

impl Kind {
    /// The kind of a manifest by its name.
    pub fn named(kind: &str) -> Option<Kind> {
        [
            Kind::Node,
            Kind::Pod,
            Kind::ConfigMap,
            Kind::ResourceClaim,
            Kind::ResourceSlice,
            Kind::Deployment,
            Kind::Service,
            Kind::HttpRoute,
            Kind::Event,
            Kind::Lease,
        ]
        .into_iter()
        .find(|k| k.resource().kind == kind)
    }

    fn resource(self) -> ApiResource {
        match self {
            Kind::Node => ApiResource::erase::<Node>(&()),
            Kind::Pod => ApiResource::erase::<Pod>(&()),
            Kind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
            Kind::ResourceClaim => ApiResource::erase::<ResourceClaim>(&()),
            Kind::ResourceSlice => ApiResource::erase::<ResourceSlice>(&()),
            Kind::Deployment => ApiResource::erase::<Deployment>(&()),
            Kind::Service => ApiResource::erase::<Service>(&()),
            Kind::HttpRoute => ApiResource::erase::<HttpRoute>(&()),
            Kind::Event => ApiResource::erase::<Event>(&()),
            Kind::Lease => ApiResource::erase::<Lease>(&()),
        }
    }
}

/// What every write must pass first: leader election's fence
/// ([`crate::LeaderElector`] is one).
pub trait WriteFence: Send + Sync {
    /// Renews what the fence rests on when due, and answers whether this
    /// process may write now.
    fn keep(&self, cluster: &Cluster) -> Result<(), K8sError>;
}

/// A connected cluster.
pub struct Cluster {
    runtime: tokio::runtime::Runtime,
    client: Client,
    context: String,
    /// When set, every write but a Lease's passes it first (see
    /// [`Cluster::fenced_by`]).
    fence: Option<Arc<dyn WriteFence>>,
}

/// `error`'s text and its causes', `: `-separated.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

impl Cluster {
    /// Connects to the cluster `options` name (nothing is sent yet).
    pub fn connect(options: &ClusterOptions) -> Result<Cluster, K8sError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            K8sError::Cluster { context: "client".into(), message: format!("cannot start the client's runtime: {e}") }
        })?;
        let kube_options = KubeConfigOptions { context: options.context.clone(), ..Default::default() };
        let kubeconfig = match &options.kubeconfig {
            Some(path) => Some(read_kubeconfig(path)?),
            None => Kubeconfig::read().ok(),
        };
        let context = options
            .context
            .clone()
            .or_else(|| kubeconfig.as_ref().and_then(|k| k.current_context.clone()))
            .unwrap_or_else(|| "in-cluster".to_string());
        let fail = |message: String| K8sError::Cluster { context: format!("context '{context}'"), message };
        let (config, client) = runtime.block_on(async {
            let mut config = match kubeconfig {
                Some(kubeconfig) => Config::from_custom_kubeconfig(kubeconfig, &kube_options)
                    .await
                    .map_err(|e| fail(format!("bad kubeconfig: {}", chain(&e))))?,
                None => Config::infer().await.map_err(|e| fail(format!("no cluster configured: {}", chain(&e))))?,
            };
            config.connect_timeout = Some(Duration::from_secs(10));
            config.read_timeout = Some(Duration::from_secs(60));
            let client = Client::try_from(config.clone()).map_err(|e| fail(chain(&e)))?;
            Ok::<_, K8sError>((config, client))
        })?;
        let context = format!("context '{context}' ({})", config.cluster_url.to_string().trim_end_matches('/'));
        Ok(Cluster { runtime, client, context, fence: None })
    }

    /// This connection with every write fenced by `fence`: before each
    /// write (and each wait between polls) the fence is kept (a leader
    /// elector renews its Lease when due), and a write it refuses fails
    /// with its error ([`K8sError::NotLeading`]). So a replica that loses
    /// the Lease in the middle of a transition stops writing before another
    /// may start. Writes of Leases themselves are not fenced.
    pub fn fenced_by(mut self, fence: Arc<dyn WriteFence>) -> Cluster {
        self.fence = Some(fence);
        self
    }

    /// Before a write of `kind`: whether this process may write.
    fn check_fence(&self, kind: Kind) -> Result<(), K8sError> {
        match &self.fence {
            Some(fence) if kind != Kind::Lease => fence.keep(self),
            _ => Ok(()),
        }
    }

    /// The context's name and API server, for messages.
    pub fn context(&self) -> &str {
        &self.context
    }

    fn api(&self, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = kind.resource();
        match namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// One line for `error` of the request `what`.
    fn error(&self, what: &str, error: kube::Error) -> K8sError {
        let message = match &error {
            kube::Error::Api(status) => {
                let hint = match status.code {
                    401 => " (the credentials were refused)",
                    403 => " (RBAC does not allow it: see deploy/kubernetes/10-rbac.yaml)",
                    409 if what.starts_with("apply") => {
                        " (another field manager owns these fields: rerun with --force-conflicts to take them over)"
                    }
                    _ => "",
                };
                format!("{what}: {} ({} {}){hint}", status.message, status.code, status.reason)
            }
            kube::Error::SerdeError(cause) => format!("{what}: cannot read the API server's answer: {cause}"),
            other => format!("{what}: cannot reach the API server: {}", chain(other)),
        };
        K8sError::Cluster { context: self.context.clone(), message }
    }

    /// Lists objects of `kind` (in `namespace`, or all), with optional
    /// label and field selectors.
    pub fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        labels: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Vec<Value>, K8sError> {
        let mut params = ListParams::default();
        if let Some(labels) = labels {
            params = params.labels(labels);
        }
        if let Some(fields) = fields {
            params = params.fields(fields);
        }
        let api = self.api(kind, namespace);
        let what = format!("list {}", kind.resource().plural);
        let list = self.runtime.block_on(api.list(&params)).map_err(|e| self.error(&what, e))?;
        list.items
            .into_iter()
            .map(|item| serde_json::to_value(item).map_err(|e| self.error(&what, kube::Error::SerdeError(e))))
            .collect()
    }

    /// The object, or `None` when it does not exist.
    pub fn get(&self, kind: Kind, namespace: Option<&str>, name: &str) -> Result<Option<Value>, K8sError> {
        let api = self.api(kind, namespace);
        let what = format!("get {} {name}", kind.resource().kind);
        let found = self.runtime.block_on(api.get_opt(name)).map_err(|e| self.error(&what, e))?;
        found
            .map(|item| serde_json::to_value(item).map_err(|e| self.error(&what, kube::Error::SerdeError(e))))
            .transpose()
    }

    /// Server-side apply of `object` with field manager `tessera`; `force`
    /// takes over fields other managers own.
    pub fn apply(&self, kind: Kind, namespace: &str, name: &str, object: &Value, force: bool) -> Result<(), K8sError> {
        self.check_fence(kind)?;
        let api = self.api(kind, Some(namespace));
        let mut params = PatchParams::apply(FIELD_MANAGER);
        params.force = force;
        let what = format!("apply {} {namespace}/{name}", kind.resource().kind);
        self.runtime.block_on(api.patch(name, &params, &Patch::Apply(object))).map_err(|e| self.error(&what, e))?;
        Ok(())
    }

    /// Server-side applies of many objects of one kind, `concurrency` of
    /// them in flight at a time; the first failure ends it, naming its
    /// object.
    pub fn apply_all(
        &self,
        kind: Kind,
        namespace: &str,
        objects: &[(&str, &Value)],
        force: bool,
        concurrency: usize,
    ) -> Result<(), K8sError> {
        self.check_fence(kind)?;
        let api = self.api(kind, Some(namespace));
        let mut params = PatchParams::apply(FIELD_MANAGER);
        params.force = force;
        let requests =
            objects.iter().map(|(name, object)| {
                let (api, params, name, object) = (api.clone(), params.clone(), name.to_string(), (*object).clone());
                async move {
                    api.patch(&name, &params, &Patch::Apply(&object)).await.map(drop).map_err(|e| Box::new((name, e)))
                }
            });
        self.run_bounded(requests, concurrency).map_err(|failure| {
            let (name, error) = *failure;
            self.error(&format!("apply {} {namespace}/{name}", kind.resource().kind), error)
        })
    }

    /// Deletes many objects of one kind (see [`Cluster::delete`]),
    /// `concurrency` at a time.
    pub fn delete_all(&self, kind: Kind, namespace: &str, names: &[&str], concurrency: usize) -> Result<(), K8sError> {
        self.check_fence(kind)?;
        let api = self.api(kind, Some(namespace));
        let requests = names.iter().map(|name| {
            let (api, name) = (api.clone(), name.to_string());
            async move {
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                    Err(error) => Err(Box::new((name, error))),
                }
            }
        });
        self.run_bounded(requests, concurrency).map_err(|failure| {
            let (name, error) = *failure;
            self.error(&format!("delete {} {namespace}/{name}", kind.resource().kind), error)
        })
    }

    /// Runs `requests` with at most `concurrency` in flight; the first
    /// error, with the name of the object it was about.
    fn run_bounded<F>(&self, requests: impl Iterator<Item = F>, concurrency: usize) -> Result<(), NamedFailure>
    where
        F: std::future::Future<Output = Result<(), NamedFailure>> + Send + 'static,
    {
        self.runtime.block_on(async move {
            let mut requests = requests;
            let mut running = tokio::task::JoinSet::new();
            loop {
                while running.len() < concurrency.max(1) {
                    let Some(request) = requests.next() else { break };
                    running.spawn(request);
                }
                match running.join_next().await {
                    None => return Ok(()),
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(failure))) => return Err(failure),
                    Some(Err(join)) => {
                        return Err(Box::new(("?".to_string(), kube::Error::Service(Box::new(join)))));
                    }
                }
            }
        })
    }

    /// A JSON merge patch (labels and annotations of a node).
    pub fn merge_patch(&self, kind: Kind, namespace: Option<&str>, name: &str, patch: &Value) -> Result<(), K8sError> {
        self.check_fence(kind)?;
        let api = self.api(kind, namespace);
        let what = format!("patch {} {name}", kind.resource().kind);
        self.runtime
            .block_on(api.patch(name, &PatchParams::default(), &Patch::Merge(patch)))
            .map_err(|e| self.error(&what, e))?;
        Ok(())
    }

    /// Deletes the object (its dependents in the background); one already
    /// gone is fine.
    pub fn delete(&self, kind: Kind, namespace: &str, name: &str) -> Result<(), K8sError> {
        self.check_fence(kind)?;
        let api = self.api(kind, Some(namespace));
        let what = format!("delete {} {namespace}/{name}", kind.resource().kind);
        match self.runtime.block_on(api.delete(name, &DeleteParams::background())) {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(self.error(&what, error)),
        }
    }

    /// The GPU nodes and the DRA driver's MIG devices.
    pub fn inventory(&self) -> Result<ClusterInventory, K8sError> {
        let nodes: Vec<Node> = typed(self.list(Kind::Node, None, None, None)?, self)?;
        let slices: Vec<ResourceSlice> = typed(self.list(Kind::ResourceSlice, None, None, None)?, self)?;
        Ok(inventory(&nodes, &slices))
    }

    /// Creates `object` of `kind` in `namespace`; `false` when an object
    /// of its name exists (409).
    pub fn create(&self, kind: Kind, namespace: &str, object: &Value) -> Result<bool, K8sError> {
        self.check_fence(kind)?;
        let api = self.api(kind, Some(namespace));
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let what = format!("create {} {namespace}/{name}", kind.resource().kind);
        let object: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| self.error(&what, kube::Error::SerdeError(e)))?;
        match self.runtime.block_on(api.create(&PostParams::default(), &object)) {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(self.error(&what, error)),
        }
    }

    /// Replaces the object `name` of `kind` with `object`, whose
    /// `metadata.resourceVersion` must be the stored one; `false` when it
    /// is not (409: someone wrote it since it was read).
    pub fn replace(&self, kind: Kind, namespace: &str, name: &str, object: &Value) -> Result<bool, K8sError> {
        self.check_fence(kind)?;
        let api = self.api(kind, Some(namespace));
        let what = format!("replace {} {namespace}/{name}", kind.resource().kind);
        let object: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| self.error(&what, kube::Error::SerdeError(e)))?;
        match self.runtime.block_on(api.replace(name, &PostParams::default(), &object)) {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(self.error(&what, error)),
        }
    }

    /// Waits `duration` (between polls), renewing the fencing Lease first
    /// when it is due (a failure shows at the next write).
    pub fn sleep(&self, duration: Duration) {
        if let Some(fence) = &self.fence {
            let _ = fence.keep(self);
        }
        self.runtime.block_on(async move { tokio::time::sleep(duration).await });
    }
}

/// Reads the kubeconfig at `path`.
fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, K8sError> {
    Kubeconfig::read_from(path).map_err(|e| K8sError::Cluster {
        context: format!("kubeconfig {}", path.display()),
        message: format!("cannot read it: {}", chain(&e)),
    })
}

/// JSON objects as their typed form.
pub fn typed<T: serde::de::DeserializeOwned>(values: Vec<Value>, cluster: &Cluster) -> Result<Vec<T>, K8sError> {
    values
        .into_iter()
        .map(|value| {
            serde_json::from_value(value).map_err(|e| K8sError::Cluster {
                context: cluster.context.clone(),
                message: format!("the API server sent an object Tessera cannot read: {e}"),
            })
        })
        .collect()
}
