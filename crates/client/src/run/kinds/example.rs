//! The smallest service kind, registered for the tests only, in both products:
//! `--service-kind example` sends `GET /v2/health/ready` over HTTP/1.1 and checks that each
//! reply has the empty body a readiness answer has; `profile --endpoint-type example` posts
//! `{"model", "text", "max_tokens"}` to `v1/example/<model>` and reads the reply's
//! `text_output`. It is this one file plus its name in the `registry!` list, the recipe
//! every kind follows.

use serde_json::{json, Value};

use super::codec::{self, Prompt, RequestCodec};
use super::registry::{BeforeRun, Caps, Endpoint, Kind};
use super::{ExportDecoder, Labels, Planned, Service};
use crate::config::{Config, Protocol};
use crate::engine::slots::OutputSlots;
use crate::engine::wire::Wire;
use crate::error::Result;
use crate::report::console::ClientLibrary;
use crate::run::plan::LoadPlan;
use crate::run::setup::{reach, Target};
use crate::service::reply_check::{Bad, CheckReply, ReplyCheck};

pub struct Example;

/// `--service-kind example` in the registry.
pub const KIND: Kind = Kind {
    name: "example",
    service_kind: Some(("example", None)),
    endpoint_type: Some("example"),
    caps: Caps {
        grpc: false,
        streaming: false,
        shared_memory: None,
        before_run: BeforeRun::Connect,
    },
    service: Some(&Example),
    endpoint: Some(Endpoint {
        about: "The test-only example endpoint: `text` posted to `v1/example/<m>`.",
        path: "v1/example/{model}",
        stream_path: None,
        codec: &Example,
        needs_done: false,
        generates: true,
        family: "example",
        default_url: "localhost:8000",
    }),
};

impl RequestCodec for Example {
    fn body(&self, p: &Prompt<'_>) -> Value {
        let mut obj = codec::with_model(p.model);
        obj.insert("text".into(), json!(p.text));
        codec::add_generation(&mut obj, p, false);
        codec::finish(obj, p)
    }
}

impl Service for Example {
    fn labels(&self) -> Labels {
        Labels {
            banner: "EXAMPLE",
            export: "example",
            library: ClientLibrary::Http,
            always_shows_batch: false,
            framed_streams: false,
        }
    }

    fn prepare(&self, cfg: &Config) -> Result<Target> {
        reach(cfg, Protocol::Http)
    }

    /// One request, sent over and over.
    fn plan(&self, _cfg: &Config, target: &Target) -> Result<Planned> {
        let request = format!("GET /v2/health/ready HTTP/1.1\r\nhost: {}\r\n\r\n", target.host);
        let plan = LoadPlan {
            requests: vec![request.into_bytes()],
            wire: Wire::Http1,
            step_inputs: vec!["{}".into()],
            expected: vec![None],
            timestamps_ms: vec![None],
            sequences: None,
        };
        Ok(plan.into())
    }

    fn reply_check(&self, _cfg: &Config, _target: &Target) -> ReplyCheck {
        ReplyCheck::Kind(std::sync::Arc::new(EmptyBody))
    }

    fn export_decoder(
        &self,
        _cfg: &Config,
        _target: &Target,
        _slots: Option<&OutputSlots>,
    ) -> ExportDecoder {
        Box::new(|body| {
            let text = serde_json::Value::String(String::from_utf8_lossy(body).into_owned());
            format!("{{\"text\":{text}}}")
        })
    }
}

/// A readiness answer carries no body.
#[derive(Debug)]
struct EmptyBody;

impl CheckReply for EmptyBody {
    fn check(&self, reply: &[u8]) -> std::result::Result<(), Bad> {
        if reply.is_empty() {
            return Ok(());
        }
        Err(Bad::invalid(format!(
            "a readiness reply has no body (got {} bytes)",
            reply.len()
        )))
    }
}
