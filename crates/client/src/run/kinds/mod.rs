//! The service kinds of both products, registered once in [`KINDS`]: perf_analyzer mode's
//! `--service-kind` / `-i` and `profile`'s `--endpoint-type` are looked up there
//! ([`registry`]), and everything after asks the chosen [`registry::Kind`] (its names, its
//! [`registry::Caps`] and its [`Service`]) instead of the flags.
//!
//! Every kind implements the one trait [`Service`]: what to ask the server before the run,
//! how to encode the requests, how to check and decode a reply, and how the reports label
//! it. perf_analyzer mode encodes the input data's tensors or payloads into a plan
//! ([`Service::plan`]) and reads responses back for validation and the export; `profile`
//! encodes one prompt at a time ([`Service::body`], [`Service::encode`]) and decodes each
//! reply into its output text ([`Service::decode`]). A kind implements the methods of the
//! products its registry entry names; the others keep their defaults, which neither product
//! reaches (the registry only offers a kind to the product it is registered for).
//!
//! Adding a kind: one file in this folder holding `pub const KIND: Kind` and its
//! [`Service`], and its module name added to the `registry!` list below.

pub mod codec;
mod pseudo;
pub mod registry;
pub mod reply;
pub mod reply_error;
mod triton;

/// Declares each kind's module and lists its `KIND` in [`KINDS`], in the order given.
macro_rules! registry {
    ($($(#[$attr:meta])* $kind:ident),* $(,)?) => {
        $($(#[$attr])* mod $kind;)*
        /// Every service kind, in the order `--help` lists them.
        pub static KINDS: &[&registry::Kind] = &[$($(#[$attr])* &$kind::KIND),*];
    };
}

registry! {
    triton_http,
    triton_grpc,
    capi,
    tfserving,
    torchserve,
    openai,
    dynamic_grpc,
    chat,
    completions,
    embeddings,
    rankings,
    kserve_llm,
    generate,
    #[cfg(test)]
    example,
}

use std::sync::Arc;

use serde_json::Value;

pub use capi::CapiSetup;

use super::plan::LoadPlan;
use super::setup::Target;
use crate::config::{Config, Protocol};
use crate::engine::slots::OutputSlots;
use crate::engine::window::OutputCheck;
use crate::engine::wire::Wire;
use crate::error::{Error, Result};
use crate::inputs::TensorValue;
use crate::report::console::ClientLibrary;
use crate::report::llm::ReportKind;
use crate::run::coordinator::StatsSnapshot;
use crate::service::reply_check::ReplyCheck;
use crate::shm::client::ShmSession;
use codec::{Input, Post, Prompt};
use reply::{Parsed, Reply};

/// How the reports name and describe a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Labels {
    /// The banner's `Service Kind:` value.
    pub banner: &'static str,
    /// The profile export's `service_kind` value.
    pub export: &'static str,
    /// The wording of the console's per-point client timing line.
    pub library: ClientLibrary,
    /// The banner shows the batch size even without `-b` (perf_analyzer does for Triton).
    pub always_shows_batch: bool,
    /// With `--streaming`, every response of a request is kept as its own frame.
    pub framed_streams: bool,
}

impl Labels {
    /// The labels of a kind without a perf_analyzer mode (never printed).
    pub const NONE: Labels = Labels {
        banner: "",
        export: "",
        library: ClientLibrary::Http,
        always_shows_batch: false,
        framed_streams: false,
    };
}

/// The pre-encoded requests of a run and, with shared memory, the registered regions
/// (unregistered when dropped) and the output slots.
pub struct Planned {
    pub plan: LoadPlan,
    pub shm: Option<ShmSession>,
    pub slots: Option<Arc<OutputSlots>>,
}

impl From<LoadPlan> for Planned {
    fn from(plan: LoadPlan) -> Planned {
        Planned {
            plan,
            shm: None,
            slots: None,
        }
    }
}

/// Reads one kept response body as the export's `response_outputs` object.
pub type ExportDecoder = Box<dyn Fn(&[u8]) -> String>;

/// Validation data of each planned request (`None`: nothing to check).
pub type Expected = Vec<Option<Vec<TensorValue>>>;

/// One service kind, for both products. The perf_analyzer-mode methods come first
/// (`labels` to `server_stats`), then `profile`'s (`body` to `sends_json`). A kind
/// registered only for `profile` keeps the perf_analyzer-mode defaults, which refuse to run;
/// a `profile` endpoint's defaults are an HTTP/1.1 JSON endpoint of one text per request,
/// replying in the OpenAI layouts, with the text-generation report.
pub trait Service: Sync {
    /// The reports' names and wording for this kind in perf_analyzer mode.
    fn labels(&self) -> Labels {
        Labels::NONE
    }

    /// Finds the server and reads what the run needs of the model (setup calls only, never
    /// load).
    fn prepare(&self, _cfg: &Config) -> Result<Target> {
        Err(not_in_perf_analyzer_mode())
    }

    /// The input data encoded as this kind's requests, with the engine's wire.
    fn plan(&self, _cfg: &Config, _target: &Target) -> Result<Planned> {
        Err(not_in_perf_analyzer_mode())
    }

    /// The check of responses against the input data's expected outputs (`None` when the
    /// data has none or the kind has no validation).
    fn output_check(
        &self,
        _cfg: &Config,
        _target: &Target,
        _slots: Option<&OutputSlots>,
        _expected: Expected,
    ) -> Option<Box<OutputCheck<'static>>> {
        None
    }

    /// What every successful reply must be, checked by the engine as each one completes
    /// (`ReplyCheck::None`: nothing is checked).
    fn reply_check(&self, _cfg: &Config, _target: &Target) -> ReplyCheck {
        ReplyCheck::None
    }

    /// How the export reads the run's kept response bodies (by default as one JSON string).
    fn export_decoder(
        &self,
        _cfg: &Config,
        _target: &Target,
        _slots: Option<&OutputSlots>,
    ) -> ExportDecoder {
        Box::new(|body| Value::String(String::from_utf8_lossy(body).into_owned()).to_string())
    }

    /// The model's cumulative server statistics (`None`: the kind or server has none).
    fn server_stats(&self, _cfg: &Config, _target: &mut Target) -> Result<Option<StatsSnapshot>> {
        Ok(None)
    }

    /// `profile`: the request body for one prompt, as `inputs.json` records it (for an
    /// endpoint that sends no JSON, the JSON view of what it sends). `Null` for a kind
    /// without a `profile` endpoint.
    fn body(&self, _prompt: &Prompt<'_>) -> Value {
        Value::Null
    }

    /// `profile`: the bytes of one request; `payload` is [`body`](Self::body)'s JSON after
    /// any additions (media, system messages, verbatim payloads). By default an HTTP/1.1
    /// POST.
    fn encode(&self, _prompt: &Prompt<'_>, payload: &[u8], post: &Post<'_>) -> Result<Vec<u8>> {
        Ok(crate::service::openai::encode_request(
            post.address,
            post.path,
            post.headers,
            payload,
        ))
    }

    /// `profile`: one reply's output text, usage and error. By default the OpenAI-style
    /// reading ([`reply::decode_openai`]): SSE events, or the whole JSON body of a
    /// successful reply, in the chat, completions and Triton generate layouts.
    fn decode(&self, reply: &Reply<'_>) -> Parsed {
        reply::decode_openai(reply)
    }

    /// `profile`: a streamed reply is complete only at `data: [DONE]` or a finish reason
    /// (the OpenAI APIs); one that stops before was cut off. A kind whose stream just ends
    /// says false.
    fn needs_done(&self) -> bool {
        true
    }

    /// `profile`: the engine's wire for these requests (by default HTTP/1.1).
    fn wire(&self, _authority: &str, _headers: &[(String, String)]) -> Wire {
        Wire::Http1
    }

    /// `profile`: what the requests are made of.
    fn input(&self) -> Input {
        Input::Text
    }

    /// `profile`: the tables and exports the run gets.
    fn report(&self) -> ReportKind {
        ReportKind::Llm
    }

    /// `profile`: a request can carry several texts (`--batch-size-text`).
    fn takes_batches(&self) -> bool {
        false
    }

    /// `profile`: puts the texts of a batch (the request's own first) into `body`; called
    /// only when [`takes_batches`](Self::takes_batches) and the batch has more than one text.
    fn put_batch(&self, _body: &mut Value, _texts: &[&str]) {}

    /// `profile`: the body of one query with its own passages (a rankings dataset:
    /// GenAI-Perf's rankings folder or synthetic `queries,passages`); `None`: the endpoint
    /// has no such body, and the query and passages are sent as one text.
    fn query_body(
        &self,
        _model: &str,
        _query: &str,
        _passages: &[String],
        _extra: &[(String, Value)],
    ) -> Option<Value> {
        None
    }

    /// `profile`: the requests depend on `--backend` (the artifact folder names it).
    fn takes_backend(&self) -> bool {
        false
    }

    /// `profile`: the requests carry a JSON body, so input-file fields can go into it.
    fn sends_json(&self) -> bool {
        true
    }
}

/// What a kind registered only for `profile` answers when perf_analyzer mode asks it to run
/// (the registry never offers it there).
fn not_in_perf_analyzer_mode() -> Error {
    Error::usage("this service kind is a `profile` endpoint, not a perf_analyzer-mode kind")
}

/// The run's service kind, from `--service-kind` and `-i`, through the registry.
pub fn pick(cfg: &Config) -> Result<&'static registry::Kind> {
    registry::for_service(cfg.service_kind, cfg.protocol).ok_or_else(|| {
        let kind = cfg.service_kind.0;
        let protocol = match cfg.protocol {
            Protocol::Http => "http",
            Protocol::Grpc => "grpc",
        };
        Error::usage(format!(
            "--service-kind {kind} -i {protocol}: no such service kind"
        ))
    })
}

/// The kind's [`Service`], for perf_analyzer mode (an error for a `profile`-only kind).
pub fn service(kind: &'static registry::Kind) -> Result<&'static dyn Service> {
    match kind.service_kind {
        Some(_) => Ok(kind.service),
        None => Err(Error::usage(format!(
            "service kind {}: not available in perf_analyzer mode",
            kind.name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServiceKind;

    #[test]
    fn each_kind_has_its_names_and_wording() {
        use ClientLibrary::{Grpc, Http, InProcess};
        let rows = [
            (
                ServiceKind::Triton,
                Protocol::Http,
                "TRITON",
                "triton",
                Http,
            ),
            (
                ServiceKind::Triton,
                Protocol::Grpc,
                "TRITON",
                "triton",
                Grpc,
            ),
            (
                ServiceKind::TritonCApi,
                Protocol::Http,
                "TRITON_C_API",
                "triton_c_api",
                InProcess,
            ),
            (
                ServiceKind::OpenAi,
                Protocol::Http,
                "OPENAI",
                "openai",
                Http,
            ),
            (
                ServiceKind::TfServing,
                Protocol::Grpc,
                "TENSORFLOW_SERVING",
                "tfserving",
                Grpc,
            ),
            (
                ServiceKind::TorchServe,
                Protocol::Http,
                "TORCHSERVE",
                "torchserve",
                Http,
            ),
            (
                ServiceKind::DynamicGrpc,
                Protocol::Grpc,
                "DYNAMIC_GRPC",
                "dynamic_grpc",
                Grpc,
            ),
        ];
        for (service_kind, protocol, banner, export, library) in rows {
            let cfg = Config {
                service_kind,
                protocol,
                ..Config::default()
            };
            let kind = pick(&cfg).unwrap();
            let labels = service(kind).unwrap().labels();
            assert_eq!(labels.banner, banner, "{service_kind:?}");
            assert_eq!(labels.export, export, "{service_kind:?}");
            assert_eq!(labels.library, library, "{service_kind:?}");
            let triton = matches!(service_kind, ServiceKind::Triton | ServiceKind::TritonCApi);
            assert_eq!(labels.always_shows_batch, triton, "{service_kind:?}");
            let shm = service_kind == ServiceKind::Triton;
            assert_eq!(kind.caps.shared_memory.is_some(), shm, "{service_kind:?}");
        }
    }

    #[test]
    fn only_triton_kinds_take_shared_memory_and_others_fail_before_connecting() {
        use crate::config::SharedMemory;
        use crate::error::ErrorKind;
        for service_kind in [ServiceKind::OpenAi, ServiceKind::TorchServe] {
            let cfg = Config {
                service_kind,
                shared_memory: SharedMemory::System,
                // Nothing listens there: the error must come before any connection.
                url: "127.0.0.1:1".into(),
                ..Config::default()
            };
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let err = match crate::run::run(&cfg, &mut Vec::new(), stop) {
                Ok(_) => panic!("{service_kind:?}: --shared-memory accepted"),
                Err(e) => e,
            };
            assert_eq!(err.kind, ErrorKind::Usage, "{}", err.msg);
            assert!(
                err.msg.contains(
                    "--shared-memory system is supported with --service-kind triton only"
                ),
                "{}",
                err.msg
            );
        }
    }
}
