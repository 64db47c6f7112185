//! Trace settings (`POST /v2[/models/{m}]/trace/setting`, gRPC `TraceSetting`): validated and
//! remembered, so tests can check what a client sent. The server does not trace anything.
//!
//! Settings are Triton's: `trace_level` (list of OFF / TIMESTAMPS / TENSORS), `trace_rate`,
//! `trace_count` (>= -1), `log_frequency`, `trace_file`, `trace_mode`. Over the wire a value is
//! a list of strings (gRPC `SettingValue`); HTTP JSON may also give a string or a number, and
//! `null` (an empty list here) clears the setting back to the global (or default) value.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::{json, Value};

/// Setting name -> values (one value except `trace_level`; empty = clear).
pub type TraceSettings = BTreeMap<String, Vec<String>>;

/// Updates kept for tests; older ones are dropped.
const UPDATES_KEPT: usize = 64;

/// One accepted update, as sent (after JSON normalisation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceUpdate {
    /// None for the global settings.
    pub model: Option<String>,
    pub settings: TraceSettings,
}

#[derive(Debug, Default)]
struct State {
    global: TraceSettings,
    per_model: HashMap<String, TraceSettings>,
    updates: Vec<TraceUpdate>,
}

/// The server's trace settings and the updates it received.
#[derive(Debug, Default)]
pub struct Trace {
    state: Mutex<State>,
}

fn defaults() -> TraceSettings {
    [
        ("trace_level", "OFF"),
        ("trace_rate", "1000"),
        ("trace_count", "-1"),
        ("log_frequency", "0"),
        ("trace_file", ""),
        ("trace_mode", "triton"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
    .collect()
}

/// Checks one setting's values (an empty list, which clears, is always valid).
fn check(key: &str, values: &[String]) -> Result<(), String> {
    let single = || match values {
        [] => Ok(None),
        [one] => Ok(Some(one.as_str())),
        _ => Err(format!(
            "trace setting '{key}' takes one value, got {}",
            values.len()
        )),
    };
    let number = |min: i64| -> Result<(), String> {
        match single()? {
            Some(v) if v.trim().parse::<i64>().is_ok_and(|n| n >= min) => Ok(()),
            Some(v) => Err(format!(
                "trace setting '{key}' must be an integer >= {min}, got '{v}'"
            )),
            None => Ok(()),
        }
    };
    match key {
        "trace_level" => match values
            .iter()
            .find(|v| !["OFF", "TIMESTAMPS", "TENSORS"].contains(&v.as_str()))
        {
            Some(bad) => Err(format!(
                "trace setting 'trace_level': unknown level '{bad}' (OFF, TIMESTAMPS, TENSORS)"
            )),
            None => Ok(()),
        },
        "trace_rate" | "log_frequency" => number(0),
        "trace_count" => number(-1),
        "trace_file" | "trace_mode" => single().map(|_| ()),
        other => Err(format!("unknown trace setting '{other}'")),
    }
}

impl Trace {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock means a panic elsewhere; the maps are still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The effective settings of `model` (or the global ones): defaults, then global, then
    /// the model's own.
    pub fn current(&self, model: Option<&str>) -> TraceSettings {
        let state = self.state();
        let mut out = defaults();
        let layers = [
            Some(&state.global),
            model.and_then(|m| state.per_model.get(m)),
        ];
        for layer in layers.into_iter().flatten() {
            for (k, v) in layer {
                out.insert(k.clone(), v.clone());
            }
        }
        out
    }

    /// Validates and applies an update; returns the effective settings afterwards. An empty
    /// update only reads them (and is not recorded).
    pub fn update(
        &self,
        model: Option<&str>,
        settings: TraceSettings,
    ) -> Result<TraceSettings, String> {
        for (key, values) in &settings {
            check(key, values)?;
        }
        if !settings.is_empty() {
            let mut state = self.state();
            let layer = match model {
                None => &mut state.global,
                Some(m) => state.per_model.entry(m.to_string()).or_default(),
            };
            for (key, values) in &settings {
                if values.is_empty() {
                    layer.remove(key);
                } else {
                    layer.insert(key.clone(), values.clone());
                }
            }
            if state.updates.len() == UPDATES_KEPT {
                state.updates.remove(0);
            }
            state.updates.push(TraceUpdate {
                model: model.map(str::to_string),
                settings,
            });
        }
        Ok(self.current(model))
    }

    /// Every update received (the last [`UPDATES_KEPT`]), oldest first.
    pub fn updates(&self) -> Vec<TraceUpdate> {
        self.state().updates.clone()
    }
}

/// An HTTP trace-settings body (`{}` or empty reads only) into settings.
pub fn settings_from_json(body: &[u8]) -> Result<TraceSettings, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(TraceSettings::new());
    }
    let root: Value = serde_json::from_slice(body)
        .map_err(|e| format!("failed to parse the trace settings JSON: {e}"))?;
    let Value::Object(map) = root else {
        return Err("trace settings must be a JSON object".into());
    };
    let mut out = TraceSettings::new();
    for (key, value) in map {
        let scalar = |v: &Value| match v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(format!(
                "trace setting '{key}' must be a string, a number or a list of them, got {other}"
            )),
        };
        let values = match &value {
            Value::Null => Vec::new(),
            Value::Array(items) => items.iter().map(scalar).collect::<Result<_, _>>()?,
            other => vec![scalar(other)?],
        };
        out.insert(key, values);
    }
    Ok(out)
}

/// Settings as Triton's HTTP response: `trace_level` a list, the others plain strings.
pub fn settings_to_json(settings: &TraceSettings) -> Value {
    let map = settings
        .iter()
        .map(|(k, v)| {
            let value = if k == "trace_level" {
                json!(v)
            } else {
                json!(v.first().cloned().unwrap_or_default())
            };
            (k.clone(), value)
        })
        .collect();
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &[&str])]) -> TraceSettings {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn layers_and_updates() {
        let t = Trace::default();
        assert_eq!(t.current(None)["trace_rate"], vec!["1000"]);
        let global = settings(&[("trace_level", &["TIMESTAMPS"]), ("trace_rate", &["5"])]);
        let now = t.update(None, global.clone()).unwrap();
        assert_eq!(now["trace_level"], vec!["TIMESTAMPS"]);
        let model = t
            .update(Some("simple"), settings(&[("trace_rate", &["7"])]))
            .unwrap();
        assert_eq!(
            (
                model["trace_rate"][0].as_str(),
                model["trace_level"][0].as_str()
            ),
            ("7", "TIMESTAMPS")
        );
        assert_eq!(t.current(Some("other"))["trace_rate"], vec!["5"]);
        // Clearing the model's value falls back to the global one.
        let cleared = t
            .update(Some("simple"), settings(&[("trace_rate", &[])]))
            .unwrap();
        assert_eq!(cleared["trace_rate"], vec!["5"]);
        // Reads are not recorded.
        t.update(None, TraceSettings::new()).unwrap();
        let updates = t.updates();
        assert_eq!(updates.len(), 3);
        assert_eq!(
            updates[0],
            TraceUpdate {
                model: None,
                settings: global
            }
        );
        assert_eq!(updates[1].model.as_deref(), Some("simple"));
    }

    #[test]
    fn invalid_settings_are_refused_and_not_recorded() {
        let t = Trace::default();
        let cases: [(&str, &[&str], &str); 6] = [
            ("trace_level", &["LOUD"], "unknown level 'LOUD'"),
            ("trace_rate", &["x"], "'trace_rate' must be an integer >= 0"),
            (
                "trace_count",
                &["-2"],
                "'trace_count' must be an integer >= -1",
            ),
            (
                "log_frequency",
                &["-1"],
                "'log_frequency' must be an integer >= 0",
            ),
            ("trace_rate", &["1", "2"], "takes one value, got 2"),
            ("nope", &["1"], "unknown trace setting 'nope'"),
        ];
        for (key, values, want) in cases {
            let err = t.update(None, settings(&[(key, values)])).unwrap_err();
            assert!(err.contains(want), "{key}: {err}");
        }
        assert!(t.updates().is_empty());
        assert!(t
            .update(None, settings(&[("trace_count", &["-1"])]))
            .is_ok());
    }

    #[test]
    fn json_forms() {
        let body = br#"{"trace_level":["TIMESTAMPS","TENSORS"],"trace_rate":"100","trace_count":5,"log_frequency":null}"#;
        let s = settings_from_json(body).unwrap();
        assert_eq!(
            s,
            settings(&[
                ("trace_level", &["TIMESTAMPS", "TENSORS"]),
                ("trace_rate", &["100"]),
                ("trace_count", &["5"]),
                ("log_frequency", &[]),
            ])
        );
        assert!(settings_from_json(b"").unwrap().is_empty());
        assert!(settings_from_json(b"{}").unwrap().is_empty());
        for (bad, want) in [
            (&b"["[..], "failed to parse"),
            (b"[1]", "must be a JSON object"),
            (br#"{"trace_rate":true}"#, "'trace_rate' must be a string"),
        ] {
            let err = settings_from_json(bad).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
        let out = settings_to_json(&defaults());
        assert_eq!(out["trace_level"], json!(["OFF"]));
        assert_eq!(out["trace_count"], json!("-1"));
    }
}
