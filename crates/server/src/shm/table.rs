//! What the system and CUDA shared memory extensions share: a tensor's region reference, the
//! table of registered regions behind the HTTP routes, and the status list helpers.

use std::collections::HashMap;

use serde_json::{json, Value};

/// Where a tensor lives: `byte_size` bytes at `offset` within registered region `region`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShmRef {
    pub region: String,
    pub offset: usize,
    pub byte_size: usize,
}

impl ShmRef {
    /// From a tensor's `shared_memory_*` parameters; `None` when it names no region.
    pub fn parse(
        tensor: &str,
        region: Option<&Value>,
        byte_size: Option<u64>,
        offset: Option<u64>,
    ) -> Result<Option<ShmRef>, String> {
        let Some(region) = region else {
            return Ok(None);
        };
        let region = region
            .as_str()
            .ok_or_else(|| format!("tensor '{tensor}': shared_memory_region must be a string"))?;
        let byte_size = byte_size.ok_or_else(|| {
            format!("tensor '{tensor}': shared_memory_region needs shared_memory_byte_size")
        })?;
        let as_usize = |v: u64| {
            usize::try_from(v).map_err(|_| format!("tensor '{tensor}': shared memory too large"))
        };
        Ok(Some(ShmRef {
            region: region.to_string(),
            offset: as_usize(offset.unwrap_or(0))?,
            byte_size: as_usize(byte_size)?,
        }))
    }
}

/// What the HTTP routes of a shared memory extension (system or CUDA) need from its table
/// of registered regions.
pub trait RegionTable {
    /// The extension's path segment after `/v2/`.
    const EXTENSION: &'static str;
    fn status_list(&self, name: Option<&str>) -> Result<Value, String>;
    fn unregister_named(&self, name: Option<&str>);
    /// Registers `name` from the JSON body of a register request.
    fn register_json(&self, name: &str, body: &[u8]) -> Result<(), String>;
}

/// HTTP: `rest` is the path after `/v2/<extension>`. `Ok(Some(v))`: 200 with JSON `v`;
/// `Ok(None)`: 200 with no body; `Err((status, message))`.
pub fn http_route<T: RegionTable>(
    regions: &T,
    is_post: bool,
    rest: &str,
    body: &[u8],
) -> Result<Option<Value>, (u16, String)> {
    let bad = |msg: String| (400, msg);
    let segments: Vec<&str> = rest.split('/').skip(1).collect();
    match (is_post, segments.as_slice()) {
        (false, ["status"]) => regions.status_list(None).map(Some).map_err(bad),
        (false, ["region", name, "status"]) => {
            regions.status_list(Some(name)).map(Some).map_err(bad)
        }
        (true, ["unregister"]) => {
            regions.unregister_named(None);
            Ok(None)
        }
        (true, ["region", name, "unregister"]) => {
            regions.unregister_named(Some(name));
            Ok(None)
        }
        (true, ["region", name, "register"]) => {
            regions.register_json(name, body).map(|_| None).map_err(bad)
        }
        (_, ["status" | "unregister"] | ["region", _, "status" | "unregister" | "register"]) => {
            Err((
                405,
                format!("method not allowed for '/v2/{}{rest}'", T::EXTENSION),
            ))
        }
        _ => Err((404, "Not Found".into())),
    }
}

/// Removes `name` from a table of regions (unknown names are fine, as in Triton), or every
/// region.
pub fn remove_named<T>(regions: &mut HashMap<String, T>, name: Option<&str>) {
    match name {
        Some(n) => {
            regions.remove(n);
        }
        None => regions.clear(),
    }
}

/// A status list of one region or of all (sorted by name); `kind` names the extension
/// ("system", "CUDA") in the error for an unknown region.
pub fn status_of<T>(
    regions: &HashMap<String, T>,
    name: Option<&str>,
    kind: &str,
    entry: impl Fn(&str, &T) -> Value,
) -> Result<Value, String> {
    match name {
        Some(n) => regions
            .get(n)
            .map(|r| json!([entry(n, r)]))
            .ok_or_else(|| format!("Unable to find {kind} shared memory region: '{n}'")),
        None => {
            let mut names: Vec<&String> = regions.keys().collect();
            names.sort();
            Ok(Value::Array(
                names.iter().map(|n| entry(n, &regions[*n])).collect(),
            ))
        }
    }
}

/// One entry of a status list (`[{...}]`, as the HTTP status answers it).
pub struct StatusEntry<'a>(&'a Value);

impl StatusEntry<'_> {
    pub fn str(&self, key: &str) -> String {
        self.0[key].as_str().unwrap_or_default().to_string()
    }
    pub fn u64(&self, key: &str) -> u64 {
        self.0[key].as_u64().unwrap_or_default()
    }
}

pub fn status_entries(list: &Value) -> impl Iterator<Item = StatusEntry<'_>> {
    list.as_array().into_iter().flatten().map(StatusEntry)
}
