//! Fuzz entry of the config override reader.

use std::time::{Duration, Instant};

use super::parse;
use crate::instances::Instances;
use crate::models::MODELS;

/// Fuzz entry (`fuzz/fuzz_targets/load_config.rs`, also run on the seed corpus by
/// `tests/it/fuzz_corpus.rs`): any bytes, as the `config` of a load of every model, must
/// give settings or a refusal, never a panic; settings must show as a config that reads back
/// as the same config, and must plan executions.
pub fn fuzz_load_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let instances = Instances::new(1);
    for model in &MODELS {
        let Ok(settings) = parse(model, &text) else {
            continue;
        };
        let shown = model.config_json_with(&settings);
        let again = parse(model, &shown.to_string()).map(|s| model.config_json_with(&s));
        assert_eq!(
            again.as_ref(),
            Ok(&shown),
            "{} reads back its config",
            model.name
        );
        instances.configure(0, &settings);
        let now = Instant::now();
        for (i, batch) in [1, 2, 8, 1].into_iter().enumerate() {
            let ready = now + Duration::from_millis(i as u64);
            let _ = instances.reserve(0, ready, batch, Duration::from_millis(5));
        }
    }
}
