//! A load's `config` override (Triton's model repository extension): the JSON model config a
//! load request carries, checked against the reference model it names and turned into the
//! [`ModelSettings`] the server applies.
//!
//! As a backend that completes a model's config, the server fills in what the override
//! leaves out from the model's repository config. `max_batch_size`, `version_policy`,
//! `instance_group` and `dynamic_batching` are applied; any other field must say what the
//! model already is (its inputs, outputs, platform, scheduling, ...) or the load is refused:
//! nothing given is ignored.

mod fuzz;
#[cfg(test)]
mod http_tests;
mod json;
mod sections;
#[cfg(test)]
#[path = "load_config_tests.rs"]
mod tests;

pub use fuzz::fuzz_load_config;

use serde_json::{Map, Value};

use self::json::{field_name, integer, is_default, object, same, string};
use crate::models::ModelDef;
use crate::settings::{ModelSettings, MAX_INSTANCES};

/// Why an override cannot be loaded, in Triton's two ways of failing a load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Refused while reading the repository (JSON, field types, config validation): Triton
    /// only tells the client the repository could not be polled and logs this reason.
    Poll(String),
    /// The model cannot be loaded with it: `message` follows "load failed for model 'M': ",
    /// `state_reason` is what the index shows for a model that was not loaded before.
    Load {
        message: String,
        state_reason: Option<String>,
    },
}

impl Refusal {
    /// The model refuses the config (Triton: its version 1 failed to load).
    pub fn model(reason: String) -> Refusal {
        let state = format!("Invalid argument: {reason}");
        Refusal::Load {
            message: format!("version 1 is at UNAVAILABLE state: {state};"),
            state_reason: Some(state),
        }
    }
}

/// Every field of Triton's `ModelConfig` message.
const FIELDS: [&str; 25] = [
    "name",
    "platform",
    "backend",
    "runtime",
    "version_policy",
    "max_batch_size",
    "input",
    "output",
    "batch_input",
    "batch_output",
    "optimization",
    "dynamic_batching",
    "sequence_batching",
    "ensemble_scheduling",
    "instance_group",
    "default_model_filename",
    "cc_model_filenames",
    "metric_tags",
    "parameters",
    "model_warmup",
    "model_operations",
    "model_transaction_policy",
    "model_repository_agents",
    "response_cache",
    "model_metrics",
];

/// The settings `text` (a JSON model config) asks of `model`.
pub fn parse(model: &ModelDef, text: &str) -> Result<ModelSettings, Refusal> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| Refusal::Poll(format!("Invalid config override: {e}")))?;
    let given = fields(object(&root, "the config")?)?;
    let ours = model.config_json();
    let m = model.name;
    let mut settings = model.settings();
    check_scheduling(model, &given)?;
    for (key, value) in &given {
        match *key {
            "name" => check_name(m, string(value, "name")?)?,
            "max_batch_size" => {
                let n = integer(value, key, i32::MIN.into(), i32::MAX.into())?;
                settings.max_batch_size = max_batch_size(model, n)?;
            }
            "version_policy" => settings.version_policy = sections::version_policy(m, value)?,
            "instance_group" | "dynamic_batching" => {}
            _ => check_fixed(model, key, value, &ours)?,
        }
    }
    if let Some(v) = given
        .iter()
        .find(|(k, _)| *k == "instance_group")
        .map(|(_, v)| v)
    {
        if !model.steps.is_empty() && !is_default(v) {
            return Err(Refusal::Poll(format!(
                "instance group should not be specified for ensemble '{m}'"
            )));
        }
        let groups = sections::instance_groups(m, v)?;
        settings.instance_group = (!groups.is_empty()).then_some(groups);
        let instances = settings.instances().unwrap_or(0);
        if instances > MAX_INSTANCES {
            return Err(Refusal::model(format!(
                "{instances} instances of model '{m}': the reference server models at most \
                 {MAX_INSTANCES}"
            )));
        }
    }
    if let Some(v) = given
        .iter()
        .find(|(k, _)| *k == "dynamic_batching")
        .map(|(_, v)| v)
    {
        let batching = sections::dynamic_batching(m, settings.max_batch_size, v)?;
        settings.dynamic_batching = Some(batching);
    }
    Ok(settings)
}

/// The given fields by their config JSON names, `null` (unset) ones left out; a name
/// `ModelConfig` does not have, or one given twice, is refused.
fn fields(map: &Map<String, Value>) -> Result<Vec<(&'static str, &Value)>, Refusal> {
    let mut given: Vec<(&'static str, &Value)> = Vec::new();
    for (key, value) in map {
        let name = field_name(key);
        let Some(&field) = FIELDS.iter().find(|f| **f == name) else {
            return Err(Refusal::Poll(format!(
                "Invalid config override: no field '{key}' in inference.ModelConfig"
            )));
        };
        if given.iter().any(|(f, _)| *f == field) {
            return Err(Refusal::Poll(format!(
                "Invalid config override: field '{field}' given twice"
            )));
        }
        if !value.is_null() {
            given.push((field, value));
        }
    }
    Ok(given)
}

/// Triton requires the config's name to be the model's (its directory's).
fn check_name(model: &str, name: &str) -> Result<(), Refusal> {
    if name.is_empty() || name == model {
        return Ok(());
    }
    Err(Refusal::Poll(format!(
        "unexpected directory name '{model}' for model '{name}', directory name must equal \
         model name"
    )))
}

/// A valid largest batch for `model`: models without a batch dimension cannot get one.
fn max_batch_size(model: &ModelDef, n: i64) -> Result<usize, Refusal> {
    if n < 0 {
        return Err(Refusal::Poll(format!(
            "'max_batch_size' must be non-negative value for {}",
            model.name
        )));
    }
    if n > 0 && model.max_batch_size == 0 {
        return Err(Refusal::model(format!(
            "model '{}' does not support batching: its max_batch_size must be 0",
            model.name
        )));
    }
    Ok(n as usize)
}

/// A field the server does not change: it must say what the model's config says (or, for
/// a field that config lacks, hold the default).
fn check_fixed(model: &ModelDef, key: &str, value: &Value, ours: &Value) -> Result<(), Refusal> {
    let m = model.name;
    match (key, ours.get(key)) {
        ("ensemble_scheduling", None) => Err(Refusal::Poll(format!(
            "ensemble scheduling cannot be set for model '{m}' whose platform is not ensemble"
        ))),
        ("optimization", None) => Err(Refusal::Poll(format!(
            "optimization should not be specified for ensemble '{m}'"
        ))),
        ("sequence_batching", None) => Err(Refusal::model(format!(
            "model '{m}' is not stateful: 'sequence_batching' is not modelled for it"
        ))),
        (_, Some(own)) if same(&in_order_of(value, own), own) => Ok(()),
        (_, None) if is_default(value) => Ok(()),
        (_, own) => Err(Refusal::model(format!(
            "'{key}' {value} is not what model '{m}' is ({}); the reference server cannot \
             change it",
            own.unwrap_or(&Value::Null)
        ))),
    }
}

/// `value`'s elements in the order of `own`'s by their `name` (tensors are matched by name).
fn in_order_of(value: &Value, own: &Value) -> Value {
    let (Value::Array(items), Value::Array(own)) = (value, own) else {
        return value.clone();
    };
    let rank = |item: &Value| {
        let name = &item["name"];
        own.iter()
            .position(|o| !name.is_null() && same(name, &o["name"]))
    };
    let mut sorted = items.clone();
    sorted.sort_by_key(|item| rank(item).unwrap_or(usize::MAX));
    Value::Array(sorted)
}

/// At most one scheduling choice, and dynamic batching only where the server models it.
fn check_scheduling(model: &ModelDef, given: &[(&str, &Value)]) -> Result<(), Refusal> {
    let choices = [
        "dynamic_batching",
        "sequence_batching",
        "ensemble_scheduling",
    ];
    let set: Vec<&str> = choices
        .into_iter()
        .filter(|c| given.iter().any(|(k, _)| k == c))
        .collect();
    if set.len() > 1 {
        return Err(Refusal::Poll(format!(
            "Invalid config override: {} are one choice ('scheduling_choice')",
            set.join(" and ")
        )));
    }
    let batching = set == ["dynamic_batching"];
    if batching && (model.sequence || !model.steps.is_empty()) {
        return Err(Refusal::model(format!(
            "dynamic batching is not modelled for model '{}', which schedules its requests \
             with {}",
            model.name,
            if model.sequence {
                "sequence_batching"
            } else {
                "ensemble_scheduling"
            }
        )));
    }
    Ok(())
}
