//! Triton's model repository extension: which models are loaded, with which config, the
//! repository index, and explicit load/unload (HTTP `/v2/repository/...`, gRPC
//! `RepositoryIndex`, `RepositoryModelLoad`, `RepositoryModelUnload`).
//!
//! As in Triton, the model control mode decides: in `none` mode every model is loaded at start
//! and load/unload requests are refused (with Triton's message, which speaks of polling); in
//! `explicit` mode only the models named at start are loaded (an ensemble brings its composing
//! models) and clients load and unload them. An unloaded model stays in the index with state
//! `UNAVAILABLE` and reason `unloaded`; one never loaded is listed by name alone.
//!
//! A load may carry a config override (see `load_config`), which then stays the model's
//! config: a later load without one leaves a loaded model as it is (Triton reloads only what
//! changed in the repository, and the reference models never change), and after an unload
//! the model loads with its repository config again. A config that cannot be read is
//! Triton's "failed to poll" (the model stays as it was); one the model refuses fails the
//! load, and a model that was not loaded is then `UNAVAILABLE` with the reason.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};

use super::instances::{Instances, Run};
use super::load_config::{self, Refusal};
use super::models::{find_model, ModelDef, MODELS, MODEL_VERSION};
use super::settings::ModelSettings;

/// How models get loaded and unloaded (Triton's `--model-control-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ControlMode {
    /// Every model is loaded at start; load/unload requests are refused.
    #[default]
    None,
    /// Clients load and unload models; only the start-up list is loaded at first.
    Explicit,
}

impl ControlMode {
    pub fn parse(text: &str) -> Option<ControlMode> {
        match text {
            "none" => Some(ControlMode::None),
            "explicit" => Some(ControlMode::Explicit),
            _ => None,
        }
    }
}

/// Triton's answer to a load or unload outside explicit mode (its text mentions polling
/// whatever the mode).
pub const NOT_EXPLICIT: &str = "explicit model load / unload is not allowed if polling is enabled";

/// Why a repository request failed; each maps to Triton's HTTP status and gRPC code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoError {
    /// Load/unload outside explicit mode: HTTP 503, gRPC UNAVAILABLE.
    Unavailable(String),
    /// A model the repository does not have, or a config that cannot be read: HTTP 500,
    /// gRPC INTERNAL.
    Internal(String),
    /// A model that fails to load, or a bad load parameter: HTTP 400, gRPC INVALID_ARGUMENT.
    InvalidArg(String),
}

impl From<RepoError> for String {
    fn from(e: RepoError) -> String {
        match e {
            RepoError::Unavailable(m) | RepoError::Internal(m) | RepoError::InvalidArg(m) => m,
        }
    }
}

impl RepoError {
    pub fn http_status(&self) -> u16 {
        match self {
            RepoError::Unavailable(_) => 503,
            RepoError::Internal(_) => 500,
            RepoError::InvalidArg(_) => 400,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            RepoError::Unavailable(m) | RepoError::Internal(m) | RepoError::InvalidArg(m) => m,
        }
    }
}

/// Triton's answer when the repository cannot give a loadable config for `name`.
fn poll_failed(name: &str) -> RepoError {
    RepoError::Internal(format!(
        "failed to load '{name}', failed to poll from model repository"
    ))
}

const NEVER_LOADED: u8 = 0;
const READY: u8 = 1;
const UNLOADED: u8 = 2;
/// Its last load failed (the index shows the reason).
const FAILED: u8 = 3;

/// A load request's parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadParams {
    /// `config`: a config override, as JSON text.
    pub config: Option<String>,
    /// The `file:PATH` parameters' names (model files to load the model from).
    pub files: Vec<String>,
}

/// One index entry; `version` and `state` are absent for a model never loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub name: &'static str,
    pub version: Option<&'static str>,
    pub state: Option<&'static str>,
    pub reason: Option<String>,
}

/// The load state and loaded config of every model in `MODELS`, shared by all server
/// threads.
#[derive(Debug)]
pub struct Repository {
    mode: ControlMode,
    states: Vec<AtomicU8>,
    /// Per model: why its last load failed (for state `FAILED`).
    reasons: Vec<Mutex<String>>,
    /// Per model: its loaded settings (the repository's own until a load overrides them).
    settings: Vec<Mutex<Arc<ModelSettings>>>,
    /// Per model: `settings.max_batch_size`, which every request reads.
    max_batch: Vec<AtomicUsize>,
    /// The instances and batchers of the loaded settings.
    instances: Instances,
    /// Loads and unloads one at a time, so a model's settings change together.
    changing: Mutex<()>,
}

impl Default for Repository {
    fn default() -> Self {
        Repository::new(ControlMode::None, &[]).unwrap_or_else(|_| unreachable!())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Repository {
    /// In `none` mode every model is ready; in `explicit` mode those of `load` (`*` = all).
    /// An unknown name in `load` is an error naming it.
    pub fn new(mode: ControlMode, load: &[String]) -> Result<Repository, String> {
        let initial = match mode {
            ControlMode::None => READY,
            ControlMode::Explicit => NEVER_LOADED,
        };
        let repo = Repository {
            mode,
            states: MODELS.iter().map(|_| AtomicU8::new(initial)).collect(),
            reasons: MODELS.iter().map(|_| Mutex::default()).collect(),
            settings: MODELS
                .iter()
                .map(|m| Mutex::new(Arc::new(m.settings())))
                .collect(),
            max_batch: MODELS
                .iter()
                .map(|m| AtomicUsize::new(m.max_batch_size))
                .collect(),
            instances: Instances::new(MODELS.len()),
            changing: Mutex::new(()),
        };
        if mode == ControlMode::Explicit {
            for name in load {
                if name == "*" {
                    (0..MODELS.len()).for_each(|i| repo.set(i, READY));
                } else {
                    let index = find_model(name)
                        .ok_or_else(|| format!("--load-model '{name}': no such model"))?;
                    repo.load_index(index);
                }
            }
        }
        Ok(repo)
    }

    fn set(&self, index: usize, state: u8) {
        self.states[index].store(state, Ordering::Relaxed);
    }

    fn state(&self, index: usize) -> u8 {
        self.states[index].load(Ordering::Relaxed)
    }

    /// Whether model `index` (into `MODELS`) is loaded and serves requests.
    pub fn is_ready(&self, index: usize) -> bool {
        self.state(index) == READY
    }

    /// Model `index` as it serves now: its definition with the loaded `max_batch_size`.
    pub fn model(&self, index: usize) -> ModelDef {
        ModelDef {
            max_batch_size: self.max_batch[index].load(Ordering::Relaxed),
            ..MODELS[index]
        }
    }

    /// Model `index`'s loaded settings.
    pub fn settings(&self, index: usize) -> Arc<ModelSettings> {
        lock(&self.settings[index]).clone()
    }

    /// When an execution of model `index` runs under its loaded instances and batcher
    /// (see [`Instances::reserve`]); `None` when the loaded config sets no limit.
    pub fn reserve(
        &self,
        index: usize,
        ready: std::time::Instant,
        batch: usize,
        wait: std::time::Duration,
    ) -> Option<Run> {
        self.instances.reserve(index, ready, batch, wait)
    }

    fn apply(&self, index: usize, settings: ModelSettings) {
        self.max_batch[index].store(settings.max_batch_size, Ordering::Relaxed);
        self.instances.configure(index, &settings);
        *lock(&self.settings[index]) = Arc::new(settings);
    }

    /// Makes a model ready: one that is not gets its repository config; an ensemble's
    /// composing models come too.
    fn load_index(&self, index: usize) {
        for step in MODELS[index].steps {
            if let Some(composing) = find_model(step.model) {
                self.load_index(composing);
            }
        }
        if !self.is_ready(index) {
            self.apply(index, MODELS[index].settings());
        }
        self.set(index, READY);
    }

    /// Loads a model and, for an ensemble, its composing models; a config override in
    /// `params` applies to the named model.
    pub fn load(&self, name: &str, params: &LoadParams) -> Result<(), RepoError> {
        if self.mode != ControlMode::Explicit {
            return Err(RepoError::Unavailable(NOT_EXPLICIT.into()));
        }
        let index = find_model(name).ok_or_else(|| poll_failed(name))?;
        let _changing = lock(&self.changing);
        let Some(text) = &params.config else {
            if !params.files.is_empty() {
                let why = "model files need a config override".to_string();
                return Err(self.refused(index, Refusal::Poll(why)));
            }
            self.load_index(index);
            return Ok(());
        };
        let settings = load_config::parse(&MODELS[index], text)
            .and_then(|s| built_in(s, &params.files))
            .and_then(|s| self.fits_composing(index, s))
            .map_err(|refusal| self.refused(index, refusal))?;
        self.load_index(index);
        self.apply(index, settings);
        Ok(())
    }

    /// An ensemble may not batch more than its composing models do (Triton's check).
    fn fits_composing(&self, index: usize, s: ModelSettings) -> Result<ModelSettings, Refusal> {
        let ensemble = &MODELS[index];
        for step in ensemble.steps {
            let Some(composing) = find_model(step.model) else {
                continue;
            };
            let theirs = match self.is_ready(composing) {
                true => self.max_batch[composing].load(Ordering::Relaxed),
                false => MODELS[composing].max_batch_size,
            };
            if theirs != 0 && theirs < s.max_batch_size {
                return Err(Refusal::Load {
                    message: ensemble_batch_error(
                        ensemble.name,
                        s.max_batch_size,
                        step.model,
                        theirs,
                    ),
                    state_reason: None,
                });
            }
        }
        Ok(s)
    }

    /// The error for a refused override; a model that was not loaded is left `FAILED` when
    /// the model itself refused.
    fn refused(&self, index: usize, refusal: Refusal) -> RepoError {
        let name = MODELS[index].name;
        match refusal {
            Refusal::Poll(reason) => {
                eprintln!("inferperf serve: load of '{name}' refused: {reason}");
                poll_failed(name)
            }
            Refusal::Load {
                message,
                state_reason,
            } => {
                if let (false, Some(reason)) = (self.is_ready(index), state_reason) {
                    *lock(&self.reasons[index]) = reason;
                    self.set(index, FAILED);
                }
                RepoError::InvalidArg(format!("load failed for model '{name}': {message}\n"))
            }
        }
    }

    /// Unloads a model (a name the repository lacks is not an error, as in Triton); with
    /// `dependents`, an ensemble's composing models go too. Its next load reads the
    /// repository config again.
    pub fn unload(&self, name: &str, dependents: bool) -> Result<(), RepoError> {
        if self.mode != ControlMode::Explicit {
            return Err(RepoError::Unavailable(NOT_EXPLICIT.into()));
        }
        let Some(index) = find_model(name) else {
            return Ok(());
        };
        let changing = lock(&self.changing);
        if self.is_ready(index) {
            self.set(index, UNLOADED);
        }
        drop(changing);
        if dependents {
            for step in MODELS[index].steps {
                self.unload(step.model, true)?;
            }
        }
        Ok(())
    }

    /// The index, sorted by name; `ready_only` keeps the loaded models alone.
    pub fn index(&self, ready_only: bool) -> Vec<IndexEntry> {
        let mut entries: Vec<IndexEntry> = MODELS
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let state = self.state(i);
                if ready_only && state != READY {
                    return None;
                }
                let (version, state, reason) = match state {
                    READY => (Some(MODEL_VERSION), Some("READY"), None),
                    UNLOADED => (
                        Some(MODEL_VERSION),
                        Some("UNAVAILABLE"),
                        Some("unloaded".to_string()),
                    ),
                    FAILED => (
                        Some(MODEL_VERSION),
                        Some("UNAVAILABLE"),
                        Some(lock(&self.reasons[i]).clone()),
                    ),
                    _ => (None, None, None),
                };
                Some(IndexEntry {
                    name: m.name,
                    version,
                    state,
                    reason,
                })
            })
            .collect();
        entries.sort_by_key(|e| e.name);
        entries
    }

    /// The index as Triton's HTTP JSON: absent fields are left out.
    pub fn index_json(&self, ready_only: bool) -> Value {
        let entries: Vec<Value> = self
            .index(ready_only)
            .into_iter()
            .map(|e| {
                let mut v = json!({"name": e.name});
                let fields = [
                    ("version", e.version.map(str::to_string)),
                    ("state", e.state.map(str::to_string)),
                    ("reason", e.reason),
                ];
                for (key, value) in fields {
                    if let Some(value) = value {
                        v[key] = json!(value);
                    }
                }
                v
            })
            .collect();
        Value::Array(entries)
    }
}

/// Settings from a load that names no model files: the reference models are built in.
fn built_in(settings: ModelSettings, files: &[String]) -> Result<ModelSettings, Refusal> {
    match files.first() {
        None => Ok(settings),
        Some(file) => Err(Refusal::model(format!(
            "the reference server's models are built in: model files ('{file}') cannot be \
             loaded"
        ))),
    }
}

/// Triton's refusal of an ensemble that batches more than a composing model.
fn ensemble_batch_error(ensemble: &str, batch: usize, model: &str, theirs: usize) -> String {
    format!(
        "ensemble {ensemble} allows maximum batch size {batch}, but it contains model {model} \
         which only allows maximum batch size to be {theirs}"
    )
}

/// Message for a model the repository has but that is not loaded (metadata, config, infer).
pub fn no_versions(name: &str) -> String {
    format!("Request for unknown model: '{name}' has no available versions")
}

/// Message for statistics of a model that is unknown or not loaded.
pub fn not_available(name: &str) -> String {
    format!("requested model '{name}' is not available")
}

/// Message for readiness of a model that is unknown or not loaded (HTTP 400).
pub const NOT_READY: &str = "Model version not ready";

/// `POST /v2/repository/index` body: optional `{"ready": bool}`.
pub fn index_request(body: &[u8]) -> Result<bool, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(false);
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("failed to parse the request JSON buffer: {e}"))?;
    Ok(v["ready"].as_bool().unwrap_or(false))
}

/// `POST /v2/repository/models/{m}/load` body: optional JSON whose `parameters` may hold
/// `config` (a JSON model config in a string) and `file:PATH` model files (base64), the only
/// parameters Triton takes; its errors are Triton's (HTTP 500).
pub fn load_request(body: &[u8]) -> Result<LoadParams, String> {
    let mut params = LoadParams::default();
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(params);
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("failed to parse the request JSON buffer: {e}"))?;
    let Some(given) = v.get("parameters") else {
        return Ok(params);
    };
    let given = given
        .as_object()
        .ok_or("attempt to get members for non-object")?;
    for (name, value) in given {
        let text = value
            .as_str()
            .ok_or("attempt to access JSON non-string as string")?;
        if name == "config" {
            params.config = Some(text.to_string());
        } else if name.starts_with("file:") {
            params.files.push(name.clone());
        } else {
            return Err("unexpected error on creating Triton parameter".into());
        }
    }
    Ok(params)
}

/// `POST /v2/repository/models/{m}/unload` body: optional
/// `{"parameters": {"unload_dependents": bool}}`.
pub fn unload_request(body: &[u8]) -> Result<bool, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(false);
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("failed to parse the request JSON buffer: {e}"))?;
    Ok(v["parameters"]["unload_dependents"]
        .as_bool()
        .unwrap_or(false))
}

#[cfg(test)]
#[path = "repository_tests.rs"]
mod tests;
