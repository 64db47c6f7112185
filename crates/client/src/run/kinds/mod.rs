//! The service kinds of both products, registered once in [`KINDS`]: perf_analyzer mode's
//! `--service-kind` / `-i` and `profile`'s `--endpoint-type` are looked up there
//! ([`registry`]), and everything after asks the chosen [`registry::Kind`] (its names, its
//! [`registry::Caps`], its [`Service`] or its `profile` endpoint) instead of the flags.
//! A perf_analyzer-mode kind sets up the target (readiness, metadata, config), encodes the
//! input data into the engine's plan and wire, reads responses back for validation and the
//! export, and fetches server statistics where the kind has them.
//!
//! A `profile` kind's [`registry::Endpoint`] holds its [`codec::RequestCodec`]: how a prompt
//! becomes a request, how a reply is decoded ([`reply`]), what input the endpoint takes and
//! which report it gets.
//!
//! Adding a kind: one file in this folder holding `pub const KIND: Kind` (and its
//! [`Service`], or its [`registry::Endpoint`] with a [`codec::RequestCodec`]), and its module
//! name added to the `registry!` list below.

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

pub use capi::CapiSetup;

use super::plan::LoadPlan;
use super::setup::Target;
use crate::config::{Config, Protocol};
use crate::engine::slots::OutputSlots;
use crate::engine::window::OutputCheck;
use crate::error::{Error, Result};
use crate::inputs::TensorValue;
use crate::report::console::ClientLibrary;
use crate::run::coordinator::StatsSnapshot;
use crate::service::reply_check::ReplyCheck;
use crate::shm::client::ShmSession;

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

/// One perf_analyzer-mode service kind: what the run asks of the server and how it talks to
/// it. A kind's capabilities are its [`registry::Kind`]'s; the run holds the kind and asks it.
pub trait Service: Sync {
    /// The reports' names and wording for this kind.
    fn labels(&self) -> Labels;

    /// Finds the server and reads what the run needs of the model (setup calls only, never
    /// load).
    fn prepare(&self, cfg: &Config) -> Result<Target>;

    /// The input data encoded as this kind's requests, with the engine's wire.
    fn plan(&self, cfg: &Config, target: &Target) -> Result<Planned>;

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

    /// How the export reads the run's kept response bodies.
    fn export_decoder(
        &self,
        cfg: &Config,
        target: &Target,
        slots: Option<&OutputSlots>,
    ) -> ExportDecoder;

    /// The model's cumulative server statistics (`None`: the kind or server has none).
    fn server_stats(&self, _cfg: &Config, _target: &mut Target) -> Result<Option<StatsSnapshot>> {
        Ok(None)
    }
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

/// The kind's perf_analyzer-mode [`Service`].
pub fn service(kind: &'static registry::Kind) -> Result<&'static dyn Service> {
    kind.service.ok_or_else(|| {
        Error::usage(format!(
            "service kind {}: not available in perf_analyzer mode",
            kind.name
        ))
    })
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
