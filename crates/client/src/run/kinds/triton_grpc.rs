//! `--service-kind triton -i grpc`: Triton's `GRPCInferenceService` over HTTP/2, unary
//! `ModelInfer` or, with `--streaming`, `ModelStreamInfer` (the only way to run decoupled
//! models).

use super::registry::{BeforeRun, Caps, Kind};
use crate::shm::ShmApi;
use prost::Message;

use super::triton::{self, Responses};
use super::{Expected, ExportDecoder, Labels, Planned, Service};
use crate::config::{Config, Protocol};
use crate::engine::slots::OutputSlots;
use crate::engine::window::OutputCheck;
use crate::engine::wire::{GrpcWire, Wire};
use crate::error::Result;
use crate::inputs::ResponseFormat;
use crate::protocol::grpc::compress::encoding_name;
use crate::protocol::grpc::pb::inference as pb;
use crate::report::console::ClientLibrary;
use crate::run::coordinator::StatsSnapshot;
use crate::run::plan::Encoder;
use crate::run::setup::{fetch_stats, Target};
use crate::service::reply_check::ReplyCheck;
use crate::service::seq_patch::{self, SeqTemplate};
use crate::service::triton_grpc::{self, outputs_json};
use crate::tensor::InputTensor;

pub struct TritonGrpc;

/// `--service-kind triton -i grpc` in the registry.
pub const KIND: Kind = Kind {
    name: "triton_grpc",
    service_kind: Some(("triton", Some(Protocol::Grpc))),
    endpoint_type: None,
    caps: Caps {
        grpc: true,
        streaming: true,
        shared_memory: Some(ShmApi::Grpc),
        before_run: BeforeRun::TritonModel,
    },
    service: &TritonGrpc,
    endpoint: None,
};

/// Unary bodies are `ModelInferResponse`s; a stream keeps every `ModelStreamInferResponse`
/// of the request as a frame.
fn responses(cfg: &Config) -> Responses {
    Responses {
        format: if cfg.streaming {
            ResponseFormat::GrpcStream
        } else {
            ResponseFormat::Grpc
        },
        framed: cfg.streaming,
        frames_have_outputs: false,
    }
}

impl Service for TritonGrpc {
    fn labels(&self) -> Labels {
        Labels {
            banner: "TRITON",
            export: "triton",
            library: ClientLibrary::Grpc,
            always_shows_batch: true,
            framed_streams: true,
        }
    }

    fn prepare(&self, cfg: &Config) -> Result<Target> {
        triton::prepare(cfg, Protocol::Grpc, cfg.streaming)
    }

    fn plan(&self, cfg: &Config, target: &Target) -> Result<Planned> {
        triton::plan(cfg, target, self, &KIND)
    }

    fn output_check(
        &self,
        cfg: &Config,
        target: &Target,
        slots: Option<&OutputSlots>,
        expected: Expected,
    ) -> Option<Box<OutputCheck<'static>>> {
        triton::output_check(target, slots, expected, responses(cfg), &KIND)
    }

    fn reply_check(&self, cfg: &Config, target: &Target) -> ReplyCheck {
        ReplyCheck::KserveGrpc(triton::expect(cfg, target))
    }

    fn export_decoder(
        &self,
        cfg: &Config,
        target: &Target,
        slots: Option<&OutputSlots>,
    ) -> ExportDecoder {
        if let Some(names) = triton::captured_outputs(target, slots) {
            return Box::new(move |body| {
                crate::shm::validate::captured_outputs_json(&names, body, ResponseFormat::Grpc)
            });
        }
        // A decoupled model's empty final response reads as `{}`.
        let decoded: fn(&[u8]) -> Option<String> = if cfg.streaming {
            |body: &[u8]| {
                pb::ModelStreamInferResponse::decode(body)
                    .ok()
                    .and_then(|r| r.infer_response)
                    .map(|r| outputs_json(&r))
            }
        } else {
            |body: &[u8]| {
                pb::ModelInferResponse::decode(body)
                    .ok()
                    .map(|r| outputs_json(&r))
            }
        };
        Box::new(move |body| decoded(body).unwrap_or_else(|| "{}".into()))
    }

    fn server_stats(&self, cfg: &Config, target: &mut Target) -> Result<Option<StatsSnapshot>> {
        fetch_stats(target, cfg)
    }
}

impl Encoder for TritonGrpc {
    fn encode(
        &self,
        cfg: &Config,
        _target: &Target,
        inputs: &[InputTensor],
        outputs: &[String],
    ) -> Result<Vec<u8>> {
        triton_grpc::encode_infer_request(
            &cfg.model_name,
            &cfg.model_version,
            inputs,
            outputs,
            &cfg.request_parameters,
            cfg.compression,
        )
    }

    fn template(
        &self,
        cfg: &Config,
        _target: &Target,
        inputs: &[InputTensor],
        outputs: &[String],
    ) -> Result<SeqTemplate> {
        seq_patch::grpc_template(
            &cfg.model_name,
            &cfg.model_version,
            inputs,
            outputs,
            &cfg.request_parameters,
            cfg.compression,
        )
    }

    fn wire(&self, cfg: &Config, target: &Target) -> Wire {
        let method = if cfg.streaming {
            "ModelStreamInfer"
        } else {
            "ModelInfer"
        };
        let headers = crate::protocol::grpc::request::call_headers(
            &target.host,
            method,
            &cfg.headers,
            cfg.tls.is_some(),
            encoding_name(cfg.compression),
        );
        Wire::Grpc(GrpcWire {
            headers,
            streaming: cfg.streaming,
            decoupled: target.decoupled(),
        })
    }
}
