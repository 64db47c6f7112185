//! Composing models: the models an ensemble runs (from its config's `ensemble_scheduling`,
//! recursively) or the ones `--bls-composing-models` names, and their window deltas.
//!
//! perf_analyzer reports each composing model under the profiled one; for that it fetches the
//! statistics of ALL models at each window edge. These functions turn two such snapshots into
//! the numbers the report prints.

use serde_json::Value;

use super::{pick_version, ModelStats};
use crate::error::{Error, Result};

/// Ensembles nest; deeper than this is a configuration loop, not a real pipeline.
const MAX_NESTING: usize = 8;

/// A composing model to report: name, the version asked for ("" = decided per window from
/// the statistics, as perf_analyzer does) and its own composing models (nested ensemble).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComposingModel {
    pub name: String,
    pub version: String,
    pub composing: Vec<ComposingModel>,
}

/// The statistics of one composing model over a window (or a point's merged windows):
/// `model.version` is the version actually reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComposingStats {
    pub model: ModelStats,
    pub composing: Vec<ComposingStats>,
}

impl ComposingStats {
    /// Adds another window's numbers for the same model (and, by name, its composing ones).
    pub fn add(&mut self, other: &ComposingStats) {
        self.model.add(&other.model);
        merge_composing(&mut self.composing, &other.composing);
    }
}

/// Adds a window's composing statistics to a point's running sum, matching models by name
/// (a model missing from the sum is appended).
pub fn merge_composing(sum: &mut Vec<ComposingStats>, window: &[ComposingStats]) {
    for w in window {
        match sum.iter_mut().find(|s| s.model.name == w.model.name) {
            Some(s) => s.add(w),
            None => sum.push(w.clone()),
        }
    }
}

/// The window deltas of `models` (recursively) between two all-model snapshots, sorted by
/// name then version as perf_analyzer lists them, plus warnings for models without an
/// explicit version where several versions served requests in the window.
pub fn composing_deltas(
    start: &[ModelStats],
    end: &[ModelStats],
    models: &[ComposingModel],
) -> Result<(Vec<ComposingStats>, Vec<String>)> {
    let mut warnings = Vec::new();
    let stats = deltas(start, end, models, &mut warnings, 0)?;
    Ok((stats, warnings))
}

fn deltas(
    start: &[ModelStats],
    end: &[ModelStats],
    models: &[ComposingModel],
    warnings: &mut Vec<String>,
    depth: usize,
) -> Result<Vec<ComposingStats>> {
    if depth > MAX_NESTING {
        return Err(Error::generic(format!(
            "composing models nest deeper than {MAX_NESTING} levels"
        )));
    }
    let mut out = Vec::with_capacity(models.len());
    for m in models {
        let end_model = if m.version.is_empty() {
            pick_version(start, end, &m.name).map(|(chosen, several)| {
                if several {
                    warnings.push(format!(
                        "more than one version of composing model '{}' served requests in \
                         the window; reporting version {}",
                        m.name, chosen.version
                    ));
                }
                chosen
            })
        } else {
            end.iter()
                .find(|s| s.name == m.name && s.version == m.version)
        };
        let end_model = end_model.ok_or_else(|| {
            let shown = if m.version.is_empty() {
                "any"
            } else {
                &m.version
            };
            Error::generic(format!(
                "server statistics have no entry for composing model '{}' version {shown}",
                m.name
            ))
        })?;
        let start_model = start
            .iter()
            .find(|s| s.name == m.name && s.version == end_model.version)
            .cloned()
            .unwrap_or_default();
        out.push(ComposingStats {
            model: end_model.delta(&start_model),
            composing: deltas(start, end, &m.composing, warnings, depth + 1)?,
        });
    }
    out.sort_by(|a, b| (&a.model.name, &a.model.version).cmp(&(&b.model.name, &b.model.version)));
    Ok(out)
}

/// The steps of a model config's `ensemble_scheduling` (empty when the model is no ensemble),
/// each model once. `model_version` -1 (or absent) means "any"; it may be a number or, in a
/// gRPC config converted to JSON, a string.
pub fn ensemble_steps(config: &Value) -> Result<Vec<ComposingModel>> {
    let steps = match config.pointer("/ensemble_scheduling/step") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(steps)) => steps,
        Some(_) => {
            return Err(Error::generic(
                "model config: 'ensemble_scheduling.step' is not an array",
            ))
        }
    };
    let mut out: Vec<ComposingModel> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let at = |f: &str| format!("model config: ensemble_scheduling.step[{i}].{f}");
        let name = match step.get("model_name") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(Error::generic(format!("{} is missing", at("model_name")))),
        };
        let version = match step.get("model_version") {
            None | Some(Value::Null) => -1,
            Some(Value::Number(n)) => n.as_i64().unwrap_or(i64::MIN),
            Some(Value::String(s)) => s.trim().parse().unwrap_or(i64::MIN),
            Some(_) => i64::MIN,
        };
        if version < -1 {
            let shown = step
                .get("model_version")
                .map(Value::to_string)
                .unwrap_or_default();
            return Err(Error::generic(format!(
                "{} must be -1 or a version number, got {shown}",
                at("model_version")
            )));
        }
        let version = if version == -1 {
            String::new()
        } else {
            version.to_string()
        };
        if !out.iter().any(|m| m.name == name && m.version == version) {
            out.push(ComposingModel {
                name,
                version,
                composing: Vec::new(),
            });
        }
    }
    Ok(out)
}

/// The full composing tree of `model`: `config(name, version)` fetches a model's config JSON
/// (version "" = latest); nested ensembles are expanded.
pub fn composing_tree(
    model: &str,
    config: &mut dyn FnMut(&str, &str) -> Result<Value>,
) -> Result<Vec<ComposingModel>> {
    expand(model, "", config, 0)
}

fn expand(
    model: &str,
    version: &str,
    config: &mut dyn FnMut(&str, &str) -> Result<Value>,
    depth: usize,
) -> Result<Vec<ComposingModel>> {
    if depth > MAX_NESTING {
        return Err(Error::generic(format!(
            "ensemble '{model}': composing models nest deeper than {MAX_NESTING} levels"
        )));
    }
    let mut steps = ensemble_steps(&config(model, version)?)?;
    for step in &mut steps {
        step.composing = expand(&step.name, &step.version, config, depth + 1)?;
    }
    Ok(steps)
}

/// `--bls-composing-models a:3,b`: comma-separated `name[:version]`, spaces ignored.
pub fn bls_composing_models(spec: &str) -> Result<Vec<ComposingModel>> {
    let compact: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    for item in compact.split(',').filter(|s| !s.is_empty()) {
        let (name, version) = item.split_once(':').unwrap_or((item, ""));
        let bad_version = !version.is_empty() && version.parse::<u64>().is_err();
        if name.is_empty() || bad_version || item.ends_with(':') {
            return Err(Error::usage(format!(
                "--bls-composing-models: '{item}' is not NAME or NAME:VERSION"
            )));
        }
        out.push(ComposingModel {
            name: name.to_string(),
            version: version.to_string(),
            composing: Vec::new(),
        });
    }
    if out.is_empty() {
        return Err(Error::usage("--bls-composing-models: no model given"));
    }
    Ok(out)
}
