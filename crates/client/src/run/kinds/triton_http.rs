//! `--service-kind triton -i http`: Triton's (KServe v2) HTTP/REST API over HTTP/1.1.

use super::registry::{BeforeRun, Caps, Kind};
use crate::shm::ShmApi;
use super::triton::{self, Responses};
use super::{Expected, ExportDecoder, Labels, Planned, Service};
use crate::config::{Config, Protocol};
use crate::engine::slots::OutputSlots;
use crate::engine::window::OutputCheck;
use crate::engine::wire::Wire;
use crate::error::Result;
use crate::inputs::ResponseFormat;
use crate::report::console::ClientLibrary;
use crate::run::coordinator::StatsSnapshot;
use crate::run::plan::Encoder;
use crate::run::setup::{fetch_stats, Target};
use crate::service::reply_check::ReplyCheck;
use crate::service::seq_patch::{self, SeqTemplate};
use crate::service::triton_http::{self, decode_outputs_json};
use crate::tensor::InputTensor;

pub struct TritonHttp;

/// `--service-kind triton -i http` in the registry.
pub const KIND: Kind = Kind {
    name: "triton_http",
    service_kind: Some(("triton", Some(Protocol::Http))),
    endpoint_type: None,
    caps: Caps {
        grpc: false,
        streaming: false,
        shared_memory: Some(ShmApi::Http),
        before_run: BeforeRun::TritonModel,
    },
    service: &TritonHttp,
    endpoint: None,
};

/// HTTP bodies: the JSON inference header, then binary outputs; one response per request.
const RESPONSES: Responses = Responses {
    format: ResponseFormat::Http,
    framed: false,
    frames_have_outputs: false,
};

impl Service for TritonHttp {
    fn labels(&self) -> Labels {
        Labels {
            banner: "TRITON",
            export: "triton",
            library: ClientLibrary::Http,
            always_shows_batch: true,
            framed_streams: false,
        }
    }

    fn prepare(&self, cfg: &Config) -> Result<Target> {
        // Decoupled models answer over gRPC streams only.
        triton::prepare(cfg, Protocol::Http, false)
    }

    fn plan(&self, cfg: &Config, target: &Target) -> Result<Planned> {
        triton::plan(cfg, target, self, &KIND)
    }

    fn output_check(
        &self,
        _cfg: &Config,
        target: &Target,
        slots: Option<&OutputSlots>,
        expected: Expected,
    ) -> Option<Box<OutputCheck<'static>>> {
        triton::output_check(target, slots, expected, RESPONSES, &KIND)
    }

    fn reply_check(&self, cfg: &Config, target: &Target) -> ReplyCheck {
        ReplyCheck::KserveHttp(triton::expect(cfg, target))
    }

    fn export_decoder(
        &self,
        _cfg: &Config,
        target: &Target,
        slots: Option<&OutputSlots>,
    ) -> ExportDecoder {
        match triton::captured_outputs(target, slots) {
            Some(names) => Box::new(move |body| {
                crate::shm::validate::captured_outputs_json(&names, body, ResponseFormat::Http)
            }),
            None => {
                Box::new(|body| decode_outputs_json(body, None).unwrap_or_else(|_| "{}".into()))
            }
        }
    }

    fn server_stats(&self, cfg: &Config, target: &mut Target) -> Result<Option<StatsSnapshot>> {
        fetch_stats(target, cfg)
    }
}

impl Encoder for TritonHttp {
    fn encode(
        &self,
        cfg: &Config,
        target: &Target,
        inputs: &[InputTensor],
        outputs: &[String],
    ) -> Result<Vec<u8>> {
        triton_http::encode_infer_request(
            &target.host,
            &triton_http::infer_path(&cfg.model_name, &cfg.model_version),
            inputs,
            outputs,
            cfg.input_tensor_format,
            cfg.output_tensor_format,
            &cfg.headers,
        )
    }

    fn template(
        &self,
        cfg: &Config,
        target: &Target,
        inputs: &[InputTensor],
        outputs: &[String],
    ) -> Result<SeqTemplate> {
        seq_patch::http_template(
            &target.host,
            &triton_http::infer_path(&cfg.model_name, &cfg.model_version),
            inputs,
            outputs,
            cfg.input_tensor_format,
            cfg.output_tensor_format,
            &cfg.headers,
        )
    }

    fn wire(&self, _cfg: &Config, _target: &Target) -> Wire {
        Wire::Http1
    }
}
