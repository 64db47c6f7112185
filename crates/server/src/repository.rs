//! Triton's model repository extension: which models are loaded, the repository index, and
//! explicit load/unload (HTTP `/v2/repository/...`, gRPC `RepositoryIndex`,
//! `RepositoryModelLoad`, `RepositoryModelUnload`).
//!
//! As in Triton, the model control mode decides: in `none` mode every model is loaded at start
//! and load/unload requests are refused (with Triton's message, which speaks of polling); in
//! `explicit` mode only the models named at start are loaded (an ensemble brings its composing
//! models) and clients load and unload them. An unloaded model stays in the index with state
//! `UNAVAILABLE` and reason `unloaded`; one never loaded is listed by name alone.

use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{json, Value};

use super::models::{find_model, MODELS, MODEL_VERSION};

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
    /// A model the repository does not have: HTTP 500, gRPC INTERNAL.
    Internal(String),
}

impl From<RepoError> for String {
    fn from(e: RepoError) -> String {
        match e {
            RepoError::Unavailable(m) | RepoError::Internal(m) => m,
        }
    }
}

impl RepoError {
    pub fn http_status(&self) -> u16 {
        match self {
            RepoError::Unavailable(_) => 503,
            RepoError::Internal(_) => 500,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            RepoError::Unavailable(m) | RepoError::Internal(m) => m,
        }
    }
}

const NEVER_LOADED: u8 = 0;
const READY: u8 = 1;
const UNLOADED: u8 = 2;

/// One index entry; `version` and `state` are absent for a model never loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub name: &'static str,
    pub version: Option<&'static str>,
    pub state: Option<&'static str>,
    pub reason: Option<&'static str>,
}

/// The load state of every model in `MODELS`, shared by all server threads.
#[derive(Debug)]
pub struct Repository {
    mode: ControlMode,
    states: Vec<AtomicU8>,
}

impl Default for Repository {
    fn default() -> Self {
        Repository::new(ControlMode::None, &[]).unwrap_or_else(|_| unreachable!())
    }
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

    /// Whether model `index` (into `MODELS`) is loaded and serves requests.
    pub fn is_ready(&self, index: usize) -> bool {
        self.states[index].load(Ordering::Relaxed) == READY
    }

    fn load_index(&self, index: usize) {
        for step in MODELS[index].steps {
            if let Some(composing) = find_model(step.model) {
                self.load_index(composing);
            }
        }
        self.set(index, READY);
    }

    /// Loads (or reloads) a model and, for an ensemble, its composing models.
    pub fn load(&self, name: &str) -> Result<(), RepoError> {
        if self.mode != ControlMode::Explicit {
            return Err(RepoError::Unavailable(NOT_EXPLICIT.into()));
        }
        let index = find_model(name).ok_or_else(|| {
            RepoError::Internal(format!(
                "failed to load '{name}', failed to poll from model repository"
            ))
        })?;
        self.load_index(index);
        Ok(())
    }

    /// Unloads a model (a name the repository lacks is not an error, as in Triton); with
    /// `dependents`, an ensemble's composing models go too.
    pub fn unload(&self, name: &str, dependents: bool) -> Result<(), RepoError> {
        if self.mode != ControlMode::Explicit {
            return Err(RepoError::Unavailable(NOT_EXPLICIT.into()));
        }
        let Some(index) = find_model(name) else {
            return Ok(());
        };
        if self.states[index].load(Ordering::Relaxed) == READY {
            self.set(index, UNLOADED);
        }
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
                let state = self.states[i].load(Ordering::Relaxed);
                if ready_only && state != READY {
                    return None;
                }
                let (version, state, reason) = match state {
                    READY => (Some(MODEL_VERSION), Some("READY"), None),
                    UNLOADED => (Some(MODEL_VERSION), Some("UNAVAILABLE"), Some("unloaded")),
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
                    ("version", e.version),
                    ("state", e.state),
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

/// `POST /v2/repository/models/{m}/load` body: optional JSON (its `parameters`, a config or
/// files to load from, are not used: the models are built in).
pub fn load_request(body: &[u8]) -> Result<(), String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    serde_json::from_slice::<Value>(body)
        .map(|_| ())
        .map_err(|e| format!("failed to parse the request JSON buffer: {e}"))
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
mod tests {
    use super::*;

    fn names(entries: &[IndexEntry]) -> Vec<&str> {
        entries.iter().map(|e| e.name).collect()
    }

    #[test]
    fn none_mode_loads_everything_and_refuses_changes() {
        let repo = Repository::default();
        assert!((0..MODELS.len()).all(|i| repo.is_ready(i)));
        let index = repo.index(false);
        assert_eq!(index.len(), MODELS.len());
        let mut sorted = names(&index);
        sorted.sort();
        assert_eq!(names(&index), sorted);
        assert!(index.iter().all(|e| e.state == Some("READY")));
        for result in [repo.load("simple"), repo.unload("simple", false)] {
            assert_eq!(result, Err(RepoError::Unavailable(NOT_EXPLICIT.into())));
        }
        assert_eq!(RepoError::Unavailable(String::new()).http_status(), 503);
    }

    #[test]
    fn explicit_mode_loads_and_unloads() {
        let repo = Repository::new(ControlMode::Explicit, &["identity_fp32".into()]).unwrap();
        let simple = find_model("simple").unwrap();
        let ensemble = find_model("ensemble_simple").unwrap();
        let inner = find_model("identity_int32").unwrap();
        assert!(repo.is_ready(find_model("identity_fp32").unwrap()));
        assert!(!repo.is_ready(simple));
        assert_eq!(names(&repo.index(true)), ["identity_fp32"]);
        let json = repo.index_json(false);
        assert_eq!(json[0], json!({"name": "accumulate_int32"}));
        // An ensemble brings its composing models.
        repo.load("ensemble_simple").unwrap();
        assert!(repo.is_ready(ensemble) && repo.is_ready(simple) && repo.is_ready(inner));
        repo.unload("ensemble_simple", false).unwrap();
        assert!(!repo.is_ready(ensemble) && repo.is_ready(simple));
        let entry = repo
            .index(false)
            .into_iter()
            .find(|e| e.name == "ensemble_simple");
        assert_eq!(
            entry.map(|e| (e.version, e.state, e.reason)),
            Some((Some("1"), Some("UNAVAILABLE"), Some("unloaded")))
        );
        repo.load("ensemble_simple").unwrap();
        repo.unload("ensemble_simple", true).unwrap();
        assert!(!repo.is_ready(simple) && !repo.is_ready(inner));
        let err = repo.load("nosuch").unwrap_err();
        assert_eq!(err.http_status(), 500);
        assert_eq!(
            err.message(),
            "failed to load 'nosuch', failed to poll from model repository"
        );
        assert_eq!(repo.unload("nosuch", false), Ok(()));
        assert!(Repository::new(ControlMode::Explicit, &["nope".into()]).is_err());
        let all = Repository::new(ControlMode::Explicit, &["*".into()]).unwrap();
        assert!((0..MODELS.len()).all(|i| all.is_ready(i)));
    }

    #[test]
    fn request_bodies() {
        assert_eq!(index_request(b""), Ok(false));
        assert_eq!(index_request(br#"{"ready":true}"#), Ok(true));
        assert!(index_request(b"xx")
            .unwrap_err()
            .starts_with("failed to parse the request JSON buffer"));
        assert_eq!(unload_request(b" "), Ok(false));
        let body = br#"{"parameters":{"unload_dependents":true}}"#;
        assert_eq!(unload_request(body), Ok(true));
    }
}
