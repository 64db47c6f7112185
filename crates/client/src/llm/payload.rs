//! Request bodies, built once before a run from the prompts by the endpoint's kind.

use serde_json::Value;

use super::cli::ProfileConfig;
use super::cli_compat::Backend;
use crate::run::kinds::codec::Prompt;
use crate::service::kserve_llm::LlmBackend;

/// One prompt to send: its text (or a verbatim payload) and what is known of its lengths.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The prompt text (empty for a verbatim payload).
    pub text: String,
    /// Input tokens by the client tokenizer (0 for a verbatim payload until counted).
    pub isl: u64,
    /// Output tokens to ask for (`max_tokens`); None: the server decides.
    pub osl: Option<u64>,
    /// A body given whole by the input file (`payload`), sent as is.
    pub payload: Option<Value>,
}

/// What the endpoint's kind needs of `entry` sent to `model`.
pub fn prompt<'a>(cfg: &'a ProfileConfig, model: &'a str, entry: &'a Entry) -> Prompt<'a> {
    Prompt {
        model,
        text: &entry.text,
        osl: entry.osl,
        deterministic: cfg.args.output_tokens_mean_deterministic,
        streaming: cfg.args.streaming,
        extra: &cfg.extra,
        backend: match cfg.backend {
            Backend::Tensorrtllm => LlmBackend::TensorrtLlm,
            Backend::Vllm => LlmBackend::Vllm,
        },
    }
}

/// The JSON body for `entry` sent to `model`: the entry's verbatim payload, or the
/// endpoint's body.
pub fn body(cfg: &ProfileConfig, model: &str, entry: &Entry) -> Value {
    match &entry.payload {
        Some(p) => p.clone(),
        None => cfg.endpoint_type.service().body(&prompt(cfg, model, entry)),
    }
}

/// Every request's body: request `i` is `entries[i]` sent to `models[i]`. With
/// `--batch-size-text` B above 1, an endpoint that takes batches gets the texts of entries
/// `i` to `i + B - 1` (wrapping) in its request (GenAI-Perf's B prompts per request:
/// embeddings' inputs, rankings' passages after entry `i`'s query).
pub fn bodies(cfg: &ProfileConfig, entries: &[Entry], models: &[u32]) -> Vec<Value> {
    let batch = cfg.batch_size.max(1);
    let codec = cfg.endpoint_type.service();
    entries
        .iter()
        .zip(models)
        .enumerate()
        .map(|(i, (entry, m))| {
            let mut b = body(cfg, &cfg.models[*m as usize], entry);
            if batch == 1 || entry.payload.is_some() || !codec.takes_batches() {
                return b;
            }
            let texts: Vec<&str> = (0..batch)
                .map(|k| entries[(i + k) % entries.len()].text.as_str())
                .collect();
            codec.put_batch(&mut b, &texts);
            b
        })
        .collect()
}

/// The model each request goes to: `-m` order round robin, or seeded random.
pub fn pick_models(cfg: &ProfileConfig, count: usize) -> Vec<u32> {
    let n = cfg.models.len().max(1) as u64;
    let mut state = cfg.args.random_seed ^ 0x6d6f_6465_6c73;
    (0..count as u64)
        .map(|i| match cfg.args.model_selection_strategy {
            super::cli::ModelSelection::RoundRobin => (i % n) as u32,
            super::cli::ModelSelection::Random => (splitmix(&mut state) % n) as u32,
        })
        .collect()
}

/// splitmix64: a small, well-mixed generator; enough for picking models.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::cli::parse;
    use serde_json::json;

    fn cfg(args: &[&str]) -> ProfileConfig {
        let mut v: Vec<std::ffi::OsString> = vec!["profile".into()];
        v.extend(args.iter().map(Into::into));
        parse(v).unwrap().unwrap()
    }

    fn entry(osl: Option<u64>) -> Entry {
        Entry {
            text: "Shall I compare thee? To a summer's day.".into(),
            isl: 9,
            osl,
            payload: None,
        }
    }

    #[test]
    fn bodies_per_endpoint_type() {
        // A stream asks for the closing usage chunk, as AIPerf does; a whole reply has usage.
        let c = cfg(&["-m", "m"]);
        assert!(body(&c, "m", &entry(Some(8)))
            .get("stream_options")
            .is_none());
        let c = cfg(&["-m", "m", "--streaming"]);
        let b = body(&c, "m", &entry(Some(8)));
        assert_eq!(
            b["messages"][0]["content"],
            "Shall I compare thee? To a summer's day."
        );
        assert_eq!(b["stream"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["max_tokens"], 8);
        assert!(b.get("ignore_eos").is_none());

        let c = cfg(&[
            "-m",
            "m",
            "--endpoint-type",
            "completions",
            "--output-tokens-mean",
            "8",
            "--output-tokens-mean-deterministic",
            "--extra-inputs",
            "temperature:0",
        ]);
        let b = body(&c, "m", &entry(Some(8)));
        assert_eq!(b["prompt"], "Shall I compare thee? To a summer's day.");
        assert_eq!(
            (b["min_tokens"].clone(), b["ignore_eos"].clone()),
            (json!(8), json!(true))
        );
        assert_eq!(b["temperature"], 0);
        assert!(b.get("stream").is_none());

        let c = cfg(&["-m", "m", "--endpoint-type", "embeddings", "--streaming"]);
        let b = body(&c, "m", &entry(Some(8)));
        assert_eq!(
            b,
            json!({"model": "m", "input": ["Shall I compare thee? To a summer's day."]})
        );

        let c = cfg(&["-m", "m", "--endpoint-type", "rankings"]);
        let b = body(&c, "m", &entry(None));
        assert_eq!(b["query"]["text"], "Shall I compare thee?");
        assert_eq!(b["passages"][0]["text"], "To a summer's day.");

        let c = cfg(&["-m", "m", "--endpoint-type", "generate", "--streaming"]);
        let b = body(&c, "m", &entry(Some(3)));
        assert_eq!(
            b,
            json!({"text_input": "Shall I compare thee? To a summer's day.", "stream": true, "max_tokens": 3})
        );
    }

    #[test]
    fn extra_inputs_reach_every_http_body() {
        for kind in ["chat", "completions", "embeddings", "rankings", "generate"] {
            let c = cfg(&[
                "-m",
                "m",
                "--endpoint-type",
                kind,
                "--extra-inputs",
                r#"{"temperature":0.7,"top_p":0.9}"#,
                "--extra-inputs",
                "stop:a:b",
            ]);
            let b = body(&c, "m", &entry(Some(4)));
            assert_eq!(b["temperature"], json!(0.7), "{kind}");
            assert_eq!(b["top_p"], json!(0.9), "{kind}");
            assert_eq!(b["stop"], json!("a:b"), "{kind}: split at the first colon");
        }
    }

    #[test]
    fn kserve_body_is_the_tensor_list() {
        let c = cfg(&[
            "-m",
            "m",
            "--endpoint-type",
            "kserve",
            "--output-tokens-mean",
            "4",
            "--output-tokens-mean-deterministic",
            "--extra-inputs",
            "temperature:0.5",
        ]);
        let b = body(&c, "m", &entry(Some(4)));
        assert_eq!(
            b,
            json!({"text_input": ["Shall I compare thee? To a summer's day."],
                "max_tokens": [4], "exclude_input_in_output": [true], "stream": [false],
                "min_length": [4], "temperature": [0.5]})
        );
    }

    #[test]
    fn batches_of_texts_for_embeddings_and_rankings() {
        let entries: Vec<Entry> = ["One. a", "Two. b", "Three. c"]
            .iter()
            .map(|t| Entry {
                text: t.to_string(),
                isl: 2,
                osl: None,
                payload: None,
            })
            .collect();
        let c = cfg(&["-m", "m", "--endpoint-type", "embeddings", "-b", "2"]);
        let b = bodies(&c, &entries, &[0, 0, 0]);
        assert_eq!(b[0]["input"], json!(["One. a", "Two. b"]));
        assert_eq!(b[2]["input"], json!(["Three. c", "One. a"]));
        let c = cfg(&[
            "-m",
            "m",
            "--endpoint-type",
            "rankings",
            "--batch-size-text",
            "3",
        ]);
        let b = bodies(&c, &entries, &[0, 0, 0]);
        assert_eq!(b[1]["query"]["text"], "Two.");
        assert_eq!(
            b[1]["passages"],
            json!([{"text": "b"}, {"text": "c"}, {"text": "a"}])
        );
        let c = cfg(&["-m", "m", "--endpoint-type", "embeddings"]);
        assert_eq!(
            bodies(&c, &entries, &[0, 0, 0])[0]["input"],
            json!(["One. a"])
        );
    }

    #[test]
    fn verbatim_payload_wins() {
        let c = cfg(&["-m", "m", "--streaming"]);
        let mut e = entry(Some(4));
        e.payload = Some(json!({"model": "other", "x": 1}));
        assert_eq!(body(&c, "m", &e), json!({"model": "other", "x": 1}));
    }

    #[test]
    fn model_selection() {
        let c = cfg(&["-m", "a", "b", "c"]);
        assert_eq!(pick_models(&c, 5), vec![0, 1, 2, 0, 1]);
        let c = cfg(&[
            "-m",
            "a",
            "b",
            "--model-selection-strategy",
            "random",
            "--random-seed",
            "7",
        ]);
        let picks = pick_models(&c, 200);
        assert_eq!(picks, pick_models(&c, 200));
        let ones = picks.iter().filter(|&&p| p == 1).count();
        assert!((60..140).contains(&ones), "{ones}");
    }
}
