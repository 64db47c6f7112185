//! `profile --endpoint-type chat`: OpenAI `v1/chat/completions`.

use serde_json::{json, Value};

use super::codec::{self, Input, Prompt};
use super::Service;
use super::registry::{BeforeRun, Caps, Endpoint, Kind};

/// `--endpoint-type chat` in the registry.
pub const KIND: Kind = Kind {
    name: "chat",
    service_kind: None,
    endpoint_type: Some("chat"),
    caps: Caps {
        grpc: false,
        streaming: true,
        shared_memory: None,
        before_run: BeforeRun::Nothing,
    },
    service: &Chat,
    endpoint: Some(Endpoint {
        about: "OpenAI `v1/chat/completions`.",
        path: "v1/chat/completions",
        stream_path: None,
        generates: true,
        family: "openai",
        default_url: "localhost:8000",
    }),
};

/// `messages` with one user message.
pub struct Chat;

impl Service for Chat {
    fn body(&self, p: &Prompt<'_>) -> Value {
        let mut obj = codec::with_model(p.model);
        obj.insert(
            "messages".into(),
            json!([{"role": "user", "content": p.text}]),
        );
        codec::add_generation(&mut obj, p, true);
        codec::finish(obj, p)
    }

    /// The only body with roles: system prompts, media and multi-turn history go into its
    /// `messages`.
    fn input(&self) -> Input {
        Input::Messages
    }
}
