//! The service-kind registry's entry: one [`Kind`] per kind, with the names both products
//! choose it by (perf_analyzer mode's `--service-kind` / `-i`, `profile`'s
//! `--endpoint-type`), what it can do ([`Caps`]), its one [`Service`] that both products run
//! it through, and `profile`'s paths and names for it ([`Endpoint`]). The table of
//! every kind is `super::KINDS`; the lookups here are the only way either product turns its
//! flags into a kind.

use super::Service;
use crate::config::{Protocol, ServiceKind};
use crate::shm::ShmApi;

/// One service kind.
pub struct Kind {
    /// The registry's name of the kind (unique).
    pub name: &'static str,
    /// The perf_analyzer-mode `--service-kind` value that selects it, with the `-i` it answers
    /// (`None`: any).
    pub service_kind: Option<(&'static str, Option<Protocol>)>,
    /// The `profile --endpoint-type` value that selects it.
    pub endpoint_type: Option<&'static str>,
    /// What the kind can do.
    pub caps: Caps,
    /// How both products talk to it: what to ask the server first, how requests are
    /// encoded, how replies are checked and decoded, how reports label it.
    pub service: &'static dyn Service,
    /// Where `profile` sends its requests and how its reports name them (`None`:
    /// perf_analyzer mode only).
    pub endpoint: Option<Endpoint>,
}

/// What a kind can do, asked instead of matching on the kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Requests go over gRPC (HTTP/2); otherwise HTTP/1.1 or in process.
    pub grpc: bool,
    /// Replies can stream (several responses or events per request).
    pub streaming: bool,
    /// Tensors can travel in `--shared-memory` regions, registered through this API.
    pub shared_memory: Option<ShmApi>,
    /// What the run asks of the server before the load.
    pub before_run: BeforeRun,
}

/// What a kind asks of the server before the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeforeRun {
    /// Readiness, the model's metadata and config, and which statistics it has (Triton's
    /// KServe v2 API).
    TritonModel,
    /// The model's signature (TF Serving's `GetModelMetadata`), once connected.
    Signature,
    /// Only that it accepts a connection within `--ready-timeout` (the target then has no
    /// model description).
    Connect,
    /// Nothing: the server runs in process.
    InProcess,
    /// Nothing: the load starts at once (a refused connection fails its requests).
    Nothing,
}

/// `profile`'s paths and names for a kind (how requests are built and replies read is the
/// kind's [`Service`]).
#[derive(Clone, Copy)]
pub struct Endpoint {
    /// One line for `--help`.
    pub about: &'static str,
    /// The request path when `--endpoint` is not given; `{model}` stands for the model name.
    pub path: &'static str,
    /// The path with `--streaming`, when it differs.
    pub stream_path: Option<&'static str>,
    /// The reply is generated text (so TTFT, ITL and output lengths apply).
    pub generates: bool,
    /// The API family the artifact directory names carry (`openai-chat`, `triton-...`).
    pub family: &'static str,
    /// `--url` when none is given.
    pub default_url: &'static str,
}

impl Endpoint {
    /// The request path for `model`.
    pub fn default_path(&self, model: &str, streaming: bool) -> String {
        let path = match (streaming, self.stream_path) {
            (true, Some(p)) => p,
            _ => self.path,
        };
        path.replace("{model}", model)
    }
}

impl Kind {
    /// The kind's `--endpoint-type` value, or its registry name.
    pub fn label(&self) -> &'static str {
        self.endpoint_type.unwrap_or(self.name)
    }

    /// The kind answers `--service-kind kind -i protocol`.
    fn answers(&self, kind: ServiceKind, protocol: Protocol) -> bool {
        let Some((name, only)) = self.service_kind else {
            return false;
        };
        name == kind.0 && (only.is_none() || only == Some(protocol))
    }
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every `--service-kind` value, in registry order, once each.
pub fn service_kind_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for (name, _) in super::KINDS.iter().filter_map(|k| k.service_kind) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The `--service-kind` value `name`, as the registry spells it.
pub fn service_kind(name: &str) -> Option<ServiceKind> {
    super::KINDS
        .iter()
        .filter_map(|k| k.service_kind)
        .find(|(n, _)| *n == name)
        .map(|(n, _)| ServiceKind(n))
}

/// The perf_analyzer-mode kind for `--service-kind kind -i protocol`.
pub fn for_service(kind: ServiceKind, protocol: Protocol) -> Option<&'static Kind> {
    super::KINDS
        .iter()
        .copied()
        .find(|k| k.answers(kind, protocol))
}

/// The `profile` kind for `--endpoint-type name`.
pub fn for_endpoint(name: &str) -> Option<&'static Kind> {
    super::KINDS
        .iter()
        .copied()
        .find(|k| k.endpoint.is_some() && k.endpoint_type == Some(name))
}

/// Every `--endpoint-type` value, in registry order.
pub fn endpoint_names() -> Vec<&'static str> {
    super::KINDS
        .iter()
        .filter(|k| k.endpoint.is_some())
        .filter_map(|k| k.endpoint_type)
        .collect()
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
