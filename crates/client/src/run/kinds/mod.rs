//! One value per service kind: [`pick`] turns `--service-kind` and `-i` into a
//! [`Service`] once, when the run is planned; everything after asks that value instead of
//! the flags. A kind sets up the target (readiness, metadata, config), encodes the input data
//! into the engine's plan and wire, reads responses back for validation and the export, and
//! fetches server statistics where the kind has them.

mod capi;
mod dynamic_grpc;
mod openai;
mod pseudo;
mod tfserving;
mod torchserve;
mod triton;
mod triton_grpc;
mod triton_http;

use std::sync::Arc;

pub use capi::CapiSetup;

use super::plan::LoadPlan;
use super::setup::Target;
use crate::config::{Config, Protocol, ServiceKind};
use crate::engine::slots::OutputSlots;
use crate::engine::window::OutputCheck;
use crate::error::Result;
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

/// One service kind: what the run asks of the server and how it talks to it.
pub trait Service {
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

    /// The kind can send tensors through `--shared-memory` regions.
    fn shared_memory(&self) -> bool {
        false
    }

    /// The model's cumulative server statistics (`None`: the kind or server has none).
    fn server_stats(&self, _cfg: &Config, _target: &mut Target) -> Result<Option<StatsSnapshot>> {
        Ok(None)
    }
}

/// The run's service kind, from `--service-kind` and, for Triton, `-i`.
pub fn pick(cfg: &Config) -> Box<dyn Service> {
    match (cfg.service_kind, cfg.protocol) {
        (ServiceKind::Triton, Protocol::Http) => Box::new(triton_http::TritonHttp),
        (ServiceKind::Triton, Protocol::Grpc) => Box::new(triton_grpc::TritonGrpc),
        (ServiceKind::TritonCApi, _) => Box::new(capi::Capi),
        (ServiceKind::OpenAi, _) => Box::new(openai::OpenAi),
        (ServiceKind::TfServing, _) => Box::new(tfserving::TfServing),
        (ServiceKind::TorchServe, _) => Box::new(torchserve::TorchServe),
        (ServiceKind::DynamicGrpc, _) => Box::new(dynamic_grpc::DynamicGrpc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let labels = pick(&cfg).labels();
            assert_eq!(labels.banner, banner, "{service_kind:?}");
            assert_eq!(labels.export, export, "{service_kind:?}");
            assert_eq!(labels.library, library, "{service_kind:?}");
            let triton = matches!(service_kind, ServiceKind::Triton | ServiceKind::TritonCApi);
            assert_eq!(labels.always_shows_batch, triton, "{service_kind:?}");
            let shm = service_kind == ServiceKind::Triton;
            assert_eq!(pick(&cfg).shared_memory(), shm, "{service_kind:?}");
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
