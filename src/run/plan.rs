//! The bytes a run sends: one pre-encoded request per input step, in the run's protocol.

use crate::config::{Config, Protocol};
use crate::engine::wire::{GrpcWire, Wire};
use crate::error::Result;
use crate::protocol::grpc::compress::encoding_name;
use crate::service::{triton_grpc, triton_http};
use crate::tensor::InputTensor;

use super::setup::Target;

/// Requests per input step, how to send them, and the export's view of each step's inputs.
pub struct LoadPlan {
    pub requests: Vec<Vec<u8>>,
    pub wire: Wire,
    pub step_inputs: Vec<String>,
}

pub fn build(cfg: &Config, target: &Target, inputs: &[InputTensor]) -> Result<LoadPlan> {
    let outputs: Vec<String> = target.meta.outputs.iter().map(|o| o.name.clone()).collect();
    let step_inputs = vec![triton_http::inputs_json(inputs)];
    let (request, wire) = match cfg.protocol {
        Protocol::Http => {
            let path = triton_http::infer_path(&cfg.model_name, &cfg.model_version);
            let request = triton_http::encode_infer_request(
                &target.host,
                &path,
                inputs,
                &outputs,
                cfg.input_tensor_format,
                cfg.output_tensor_format,
                &cfg.headers,
            )?;
            (request, Wire::Http1)
        }
        Protocol::Grpc => {
            let request = triton_grpc::encode_infer_request(
                &cfg.model_name,
                &cfg.model_version,
                inputs,
                &outputs,
                &cfg.request_parameters,
                cfg.compression,
            )?;
            let method = if cfg.streaming {
                "ModelStreamInfer"
            } else {
                "ModelInfer"
            };
            let headers = triton_grpc::call_headers(
                &target.host,
                method,
                &cfg.headers,
                cfg.tls.is_some(),
                encoding_name(cfg.compression),
            );
            let wire = Wire::Grpc(GrpcWire {
                headers,
                streaming: cfg.streaming,
                decoupled: target.config.decoupled,
            });
            (request, wire)
        }
    };
    Ok(LoadPlan {
        requests: vec![request],
        wire,
        step_inputs,
    })
}
