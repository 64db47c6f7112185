//! The fake LLM: exact output lengths and configurable pacing, so LLM-metric clients can be
//! tested against known TTFT, ITL and token counts. It answers through the OpenAI-compatible
//! `/v1/...` endpoints (`openai`) and Triton's generate extension (`generate`); the gRPC
//! stream (`grpc::llm`) uses the same pieces.
//!
//! Layers, top down: `openai` and `generate` (routing, whole answers) use `stream` (the SSE
//! stream and its pacing) and `request` (request bodies, the error body), which reads the
//! images and audio of chat content parts through `media`; `state` (the `--openai-*`
//! settings shared by every thread) uses `log` (when tokens were sent), `load` (requests in
//! flight and their tokens, for `/metrics`) and `media` (what each request carried).

pub mod generate;
pub mod load;
pub mod log;
pub mod media;
pub mod openai;
pub mod request;
pub mod state;
pub mod stream;
pub mod watch;
