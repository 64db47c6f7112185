//! The fake LLM's settings (`--openai-*` flags) and the state every server thread shares for
//! it: the served model name and the token send log. The OpenAI endpoints, Triton's generate
//! extension and the gRPC stream all answer from it.

use std::sync::Arc;
use std::time::Duration;

use super::log::{TokenLog, TOKEN_LOG_REQUESTS};
pub use super::watch::Busy;
use super::watch::LoadWatch;
use crate::delay::Delay;
use inferperf_wire::error::{Error, Result};

/// Model name `/v1/models` lists and requests must use, unless configured.
pub const DEFAULT_OPENAI_MODEL: &str = "inferperf-llm";

/// How the fake LLM behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// The one served model name.
    pub model: String,
    /// Time from the request to the first content chunk.
    pub ttft: Delay,
    /// Gap between consecutive content chunks.
    pub itl: Delay,
    /// Tokens per content chunk (the last one may have fewer); at least 1.
    pub tokens_per_chunk: u32,
    /// Put a stream's usage on its last content chunk instead of a final `choices: []` chunk.
    pub usage_on_last: bool,
    /// A slower first token above a number of streams generating at once.
    pub busy: Option<Busy>,
    /// Keep a copy of every generation request body (tests read them back).
    pub keep_bodies: bool,
    /// LoRA adapter names answered besides `model` (vLLM's `--lora-modules`).
    pub adapters: Vec<String>,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            model: DEFAULT_OPENAI_MODEL.to_string(),
            ttft: Delay::Fixed(Duration::ZERO),
            itl: Delay::Fixed(Duration::ZERO),
            tokens_per_chunk: 1,
            usage_on_last: false,
            busy: None,
            keep_bodies: false,
            adapters: Vec::new(),
        }
    }
}

impl OpenAiConfig {
    /// The default model answering with a fixed time to first token and a fixed gap
    /// between tokens.
    pub fn paced(ttft: Duration, itl: Duration) -> OpenAiConfig {
        OpenAiConfig {
            ttft: Delay::Fixed(ttft),
            itl: Delay::Fixed(itl),
            ..OpenAiConfig::default()
        }
    }
}

/// The OpenAI settings and token log every server thread shares.
#[derive(Debug)]
pub struct OpenAiState {
    pub cfg: OpenAiConfig,
    /// The served model name (`cfg.model`), shared by every answer.
    pub model: Arc<str>,
    /// The names requests may ask for: `model` and the adapters.
    pub names: Vec<String>,
    pub log: TokenLog,
    /// Streams generating and abandoned, bodies kept.
    pub watch: Arc<LoadWatch>,
    /// Generation requests in flight and ended, and their tokens (the `/metrics` pages).
    pub load: Arc<super::load::LlmLoad>,
    /// The images and audio clips of each chat request that carried any.
    pub media: super::media::MediaLog,
}

impl Default for OpenAiState {
    fn default() -> Self {
        OpenAiState {
            cfg: OpenAiConfig::default(),
            model: Arc::from(DEFAULT_OPENAI_MODEL),
            names: vec![DEFAULT_OPENAI_MODEL.to_string()],
            log: TokenLog::new(TOKEN_LOG_REQUESTS),
            watch: Arc::default(),
            load: Default::default(),
            media: Default::default(),
        }
    }
}

impl OpenAiState {
    /// Validates `cfg` (flag names in the messages).
    pub fn new(cfg: OpenAiConfig) -> Result<OpenAiState> {
        if cfg.model.trim().is_empty() {
            return Err(Error::usage("--openai-model must not be empty"));
        }
        if cfg.tokens_per_chunk == 0 {
            return Err(Error::usage("--openai-tokens-per-chunk must be at least 1"));
        }
        for (flag, delay) in [("--openai-ttft", cfg.ttft), ("--openai-itl", cfg.itl)] {
            if let Delay::Uniform(low, high) = delay {
                if low > high {
                    return Err(Error::usage(format!("{flag}: empty range")));
                }
            }
        }
        if let Some(a) = cfg.adapters.iter().find(|a| a.trim().is_empty()) {
            return Err(Error::usage(format!(
                "--openai-adapter must not be empty (got '{a}')"
            )));
        }
        Ok(OpenAiState {
            model: Arc::from(cfg.model.as_str()),
            names: std::iter::once(&cfg.model)
                .chain(&cfg.adapters)
                .cloned()
                .collect(),
            watch: Arc::new(LoadWatch::new(cfg.keep_bodies)),
            cfg,
            log: TokenLog::new(TOKEN_LOG_REQUESTS),
            load: Default::default(),
            media: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused() {
        let zero = OpenAiConfig {
            tokens_per_chunk: 0,
            ..OpenAiConfig::default()
        };
        assert!(OpenAiState::new(zero).is_err());
        let nameless = OpenAiConfig {
            model: " ".into(),
            ..OpenAiConfig::default()
        };
        assert!(OpenAiState::new(nameless).is_err());
        let ms = Duration::from_millis;
        let backwards = OpenAiConfig {
            itl: Delay::Uniform(ms(3), ms(1)),
            ..OpenAiConfig::default()
        };
        assert_eq!(OpenAiState::new(backwards).unwrap_err().exit_code(), 99);
    }
}
