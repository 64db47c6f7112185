//! The smallest service kind, registered for the tests only, in both products:
//! `--service-kind example` sends `GET /v2/health/ready` over HTTP/1.1 and checks that each
//! reply has the empty body a readiness answer has; `profile --endpoint-type example` posts
//! `{"model", "text", "max_tokens"}` to `v1/example/<model>` and decodes its own reply
//! shape, `{"words": [..]}`. It is this one file plus its name in the `registry!` list, the
//! recipe every kind follows.

use serde_json::{json, Value};

use super::codec::{self, Prompt};
use super::registry::{BeforeRun, Caps, Endpoint, Kind};
use super::reply::{self, Parsed, Reply};
use super::reply_error::ReplyError;
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
    service: &Example,
    endpoint: Some(Endpoint {
        about: "The test-only example endpoint: `text` posted to `v1/example/<m>`.",
        path: "v1/example/{model}",
        stream_path: None,
        generates: true,
        family: "example",
        default_url: "localhost:8000",
    }),
};

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

    fn body(&self, p: &Prompt<'_>) -> Value {
        let mut obj = codec::with_model(p.model);
        obj.insert("text".into(), json!(p.text));
        codec::add_generation(&mut obj, p, false);
        codec::finish(obj, p)
    }

    /// A successful reply is `{"words": ["a", "b"]}`: its text is the words joined by
    /// spaces, read when the reply completed (other members are not output). Streams and
    /// failed replies are read the default way.
    fn decode(&self, r: &Reply<'_>) -> Parsed {
        if r.sse || !r.ok {
            return reply::decode_openai(r);
        }
        let mut out = Parsed::default();
        let Ok(v) = serde_json::from_slice::<Value>(r.body) else {
            out.error = Some(ReplyError::not_json(r.body));
            return out;
        };
        let words = v.get("words").and_then(Value::as_array);
        let words: Vec<&str> = words.into_iter().flatten().filter_map(Value::as_str).collect();
        if !words.is_empty() {
            out.chunks.push((r.end_ns, words.join(" ")));
            out.first_output_ns = Some(r.end_ns);
        }
        out.finished = true;
        out
    }

    /// A reply is one body.
    fn needs_done(&self) -> bool {
        false
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
