//! Parsers for the setup responses of KServe v2 / Triton: server metadata, model metadata and
//! model config. Fields perf_analyzer does not read are ignored; missing optional
//! fields take protobuf defaults (`max_batch_size` absent = 0). Integers are accepted as JSON
//! numbers or as decimal strings (protobuf's JSON form of 64-bit integers).

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::tensor::DataType;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerMetadata {
    pub name: String,
    pub version: String,
    /// e.g. `statistics`, which enables the server-side statistics.
    pub extensions: Vec<String>,
}

/// One input or output of the model metadata. `shape` may hold -1 for variable dimensions
/// (and includes the batch dimension when the model batches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorMeta {
    pub name: String,
    pub datatype: DataType,
    pub shape: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelMetadata {
    pub name: String,
    pub versions: Vec<String>,
    pub platform: String,
    pub inputs: Vec<TensorMeta>,
    pub outputs: Vec<TensorMeta>,
}

/// One `input` / `output` entry of the model config.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConfigTensor {
    pub name: String,
    pub optional: bool,
    pub is_shape_tensor: bool,
    /// `data_type` (`TYPE_FP32`), when given.
    pub data_type: Option<DataType>,
    /// `dims`, without the batch dimension.
    pub dims: Vec<i64>,
}

/// One `ensemble_scheduling.step` entry; `model_version` -1 means the latest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsembleStep {
    pub model_name: String,
    pub model_version: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelConfig {
    pub name: String,
    pub platform: String,
    pub backend: String,
    /// 0: the model does not batch.
    pub max_batch_size: u64,
    /// `model_transaction_policy.decoupled`.
    pub decoupled: bool,
    /// A `sequence_batching` section is present.
    pub sequence_batching: bool,
    /// A `dynamic_batching` section is present.
    pub dynamic_batching: bool,
    /// `response_cache.enable`.
    pub response_cache: bool,
    /// Platform `ensemble` or an `ensemble_scheduling` section.
    pub is_ensemble: bool,
    pub ensemble_steps: Vec<EnsembleStep>,
    pub inputs: Vec<ConfigTensor>,
    pub outputs: Vec<ConfigTensor>,
}

/// A JSON object being read, with the document kind and field path for error messages.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    doc: &'static str,
    path: String,
}

impl<'a> Fields<'a> {
    fn root(body: &[u8], doc: &'static str) -> Result<(Value, &'static str)> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| Error::generic(format!("{doc} from the server is not valid JSON: {e}")))?;
        Ok((value, doc))
    }

    fn new(value: &'a Value, doc: &'static str, path: String) -> Result<Self> {
        match value.as_object() {
            Some(map) => Ok(Fields { map, doc, path }),
            None => Err(Error::generic(format!(
                "{doc} from the server: {} is not an object",
                Self::shown(&path)
            ))),
        }
    }

    fn shown(path: &str) -> String {
        if path.is_empty() {
            "the document".into()
        } else {
            format!("field '{path}'")
        }
    }

    fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn error(&self, key: &str, problem: &str) -> Error {
        Error::generic(format!(
            "{} from the server: field '{}' {problem}",
            self.doc,
            self.path_of(key)
        ))
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn required(&self, key: &str) -> Result<&'a Value> {
        self.get(key).ok_or_else(|| self.error(key, "is missing"))
    }

    fn string(&self, key: &str) -> Result<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.error(key, "is not a string")),
        }
    }

    fn required_string(&self, key: &str) -> Result<String> {
        self.required(key)?;
        Ok(self.string(key)?.unwrap_or_default())
    }

    fn boolean(&self, key: &str) -> Result<bool> {
        match self.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.error(key, "is not a boolean")),
        }
    }

    fn integer(&self, key: &str) -> Result<Option<i64>> {
        self.get(key)
            .map(|v| as_integer(v).ok_or_else(|| self.error(key, "is not an integer")))
            .transpose()
    }

    fn child(&self, key: &str) -> Result<Option<Fields<'a>>> {
        self.get(key)
            .map(|v| Fields::new(v, self.doc, self.path_of(key)))
            .transpose()
    }

    /// The items of an array field (absent = empty).
    fn array(&self, key: &str) -> Result<&'a [Value]> {
        match self.get(key) {
            None => Ok(&[]),
            Some(v) => v
                .as_array()
                .map(Vec::as_slice)
                .ok_or_else(|| self.error(key, "is not an array")),
        }
    }

    /// The objects of an array field (absent = empty).
    fn objects(&self, key: &str) -> Result<Vec<Fields<'a>>> {
        let items = self.array(key)?;
        let base = self.path_of(key);
        items
            .iter()
            .enumerate()
            .map(|(i, v)| Fields::new(v, self.doc, format!("{base}[{i}]")))
            .collect()
    }

    fn strings(&self, key: &str) -> Result<Vec<String>> {
        let items = self.array(key)?;
        items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| self.error(key, "holds a non-string"))
            })
            .collect()
    }

    fn integers(&self, key: &str) -> Result<Vec<i64>> {
        let items = self.array(key)?;
        items
            .iter()
            .map(|v| as_integer(v).ok_or_else(|| self.error(key, "holds a non-integer")))
            .collect()
    }

    fn datatype(&self, key: &str) -> Result<Option<DataType>> {
        self.string(key)?
            .map(|name| {
                DataType::parse(&name)
                    .map_err(|e| self.error(key, &format!("is invalid: {}", e.msg)))
            })
            .transpose()
    }
}

fn as_integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// `GET /v2` → name, version, extensions (all optional: only `extensions` matters).
pub fn parse_server_metadata(body: &[u8]) -> Result<ServerMetadata> {
    let (root, doc) = Fields::root(body, "server metadata")?;
    let fields = Fields::new(&root, doc, String::new())?;
    Ok(ServerMetadata {
        name: fields.string("name")?.unwrap_or_default(),
        version: fields.string("version")?.unwrap_or_default(),
        extensions: fields.strings("extensions")?,
    })
}

/// `GET /v2/models/{m}[/versions/{v}]`; `name`, `inputs`, `outputs` and each tensor's `name`,
/// `datatype` and `shape` are required.
pub fn parse_model_metadata(body: &[u8]) -> Result<ModelMetadata> {
    let (root, doc) = Fields::root(body, "model metadata")?;
    let fields = Fields::new(&root, doc, String::new())?;
    let tensors = |key: &str| -> Result<Vec<TensorMeta>> {
        fields.required(key)?;
        fields
            .objects(key)?
            .iter()
            .map(|t| {
                t.required("shape")?;
                Ok(TensorMeta {
                    name: t.required_string("name")?,
                    datatype: t
                        .required("datatype")
                        .and_then(|_| t.datatype("datatype"))?
                        .unwrap_or(DataType::Bytes),
                    shape: t.integers("shape")?,
                })
            })
            .collect()
    };
    Ok(ModelMetadata {
        name: fields.required_string("name")?,
        versions: fields.strings("versions")?,
        platform: fields.string("platform")?.unwrap_or_default(),
        inputs: tensors("inputs")?,
        outputs: tensors("outputs")?,
    })
}

/// `GET /v2/models/{m}[/versions/{v}]/config`: the fields perf_analyzer reads.
pub fn parse_model_config(body: &[u8]) -> Result<ModelConfig> {
    let (root, doc) = Fields::root(body, "model config")?;
    let fields = Fields::new(&root, doc, String::new())?;
    let tensors = |key: &str| -> Result<Vec<ConfigTensor>> {
        fields
            .objects(key)?
            .iter()
            .map(|t| {
                Ok(ConfigTensor {
                    name: t.required_string("name")?,
                    optional: t.boolean("optional")?,
                    is_shape_tensor: t.boolean("is_shape_tensor")?,
                    data_type: t.datatype("data_type")?,
                    dims: t.integers("dims")?,
                })
            })
            .collect()
    };
    let max_batch_size = fields.integer("max_batch_size")?.unwrap_or(0);
    let max_batch_size =
        u64::try_from(max_batch_size).map_err(|_| fields.error("max_batch_size", "is negative"))?;
    let platform = fields.string("platform")?.unwrap_or_default();
    let ensemble = fields.child("ensemble_scheduling")?;
    let ensemble_steps = match &ensemble {
        None => Vec::new(),
        Some(e) => e
            .objects("step")?
            .iter()
            .map(|s| {
                Ok(EnsembleStep {
                    model_name: s.required_string("model_name")?,
                    model_version: s.integer("model_version")?.unwrap_or(-1),
                })
            })
            .collect::<Result<_>>()?,
    };
    let child_flag = |section: &str, flag: &str| -> Result<bool> {
        fields
            .child(section)?
            .map_or(Ok(false), |c| c.boolean(flag))
    };
    Ok(ModelConfig {
        name: fields.string("name")?.unwrap_or_default(),
        backend: fields.string("backend")?.unwrap_or_default(),
        max_batch_size,
        decoupled: child_flag("model_transaction_policy", "decoupled")?,
        sequence_batching: fields.get("sequence_batching").is_some(),
        dynamic_batching: fields.get("dynamic_batching").is_some(),
        response_cache: child_flag("response_cache", "enable")?,
        is_ensemble: platform == "ensemble" || ensemble.is_some(),
        ensemble_steps,
        inputs: tensors("input")?,
        outputs: tensors("output")?,
        platform,
    })
}

#[cfg(test)]
#[path = "triton_http_setup_tests.rs"]
mod tests;
