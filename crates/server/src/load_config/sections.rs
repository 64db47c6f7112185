//! The sections of an override the server applies: `instance_group`, `dynamic_batching` and
//! `version_policy`, read and normalised as Triton does.

use std::time::Duration;

use serde_json::{json, Value};

use super::json::{array, boolean, field_name, integer, is_default, object, string, wrong_type};
use super::Refusal;
use crate::settings::{DynamicBatching, InstanceGroup, InstanceKind, GPU_IDS};

/// The longest queue delay modelled (µs): an hour, like the longest `--delay`.
const MAX_QUEUE_DELAY_US: i64 = 3_600_000_000;

/// `instance_group` of model `model`: names, kinds and counts filled in as Triton does
/// (`KIND_AUTO` is a GPU group when every GPU it lists exists, a count below 1 is 1).
pub fn instance_groups(model: &str, v: &Value) -> Result<Vec<InstanceGroup>, Refusal> {
    array(v, "instance_group")?
        .iter()
        .enumerate()
        .map(|(i, g)| instance_group(model, i, g))
        .collect()
}

fn instance_group(model: &str, index: usize, v: &Value) -> Result<InstanceGroup, Refusal> {
    let path = format!("instance_group[{index}]");
    let mut group = InstanceGroup {
        name: format!("{model}_{index}"),
        kind: InstanceKind::Cpu,
        count: 1,
        gpus: Vec::new(),
    };
    let mut kind = None;
    for (key, value) in object(v, &path)? {
        let at = format!("{path}.{key}");
        match field_name(key).as_str() {
            "name" => {
                let name = string(value, &at)?;
                if !name.is_empty() {
                    group.name = name.to_string();
                }
            }
            "kind" => kind = kind_of(value, &at)?,
            "count" => {
                group.count = integer(value, &at, i32::MIN.into(), i32::MAX.into())?.max(1) as u32
            }
            "gpus" => {
                for gpu in array(value, &at)? {
                    group
                        .gpus
                        .push(integer(gpu, &at, i32::MIN.into(), i32::MAX.into())? as i32);
                }
            }
            "profile" if !array(value, &at)?.is_empty() => {
                return Err(Refusal::Poll(format!(
                    "instance group {} of model {model} and platform inferperf specifies \
                     profile field which is only supported for TensorRT models",
                    group.name
                )))
            }
            "rate_limiter" | "secondary_devices" | "passive" | "host_policy" | "profile" => {
                if !is_default(value) {
                    return Err(Refusal::model(format!(
                        "'{at}' is not modelled by the reference server"
                    )));
                }
            }
            _ => return Err(Refusal::Poll(format!("'{at}': no such field"))),
        }
    }
    resolve_kind(model, &mut group, kind)?;
    Ok(group)
}

/// `kind`: `None` is `KIND_AUTO`.
fn kind_of(v: &Value, path: &str) -> Result<Option<InstanceKind>, Refusal> {
    let name = match v {
        Value::Number(_) => match integer(v, path, 0, 3)? {
            0 => "KIND_AUTO".to_string(),
            1 => "KIND_GPU".into(),
            2 => "KIND_CPU".into(),
            _ => "KIND_MODEL".into(),
        },
        _ => string(v, path)?.to_ascii_uppercase(),
    };
    match name.as_str() {
        "" | "KIND_AUTO" => Ok(None),
        "KIND_GPU" => Ok(Some(InstanceKind::Gpu)),
        "KIND_CPU" => Ok(Some(InstanceKind::Cpu)),
        "KIND_MODEL" => Ok(Some(InstanceKind::Model)),
        _ => Err(wrong_type(path, "an instance group kind", v)),
    }
}

/// Settles the kind and the GPUs, with Triton's errors for GPUs a group cannot have.
fn resolve_kind(
    model: &str,
    g: &mut InstanceGroup,
    kind: Option<InstanceKind>,
) -> Result<(), Refusal> {
    let known = |gpu: &i32| GPU_IDS.contains(gpu);
    g.kind = kind.unwrap_or(if g.gpus.iter().all(known) {
        InstanceKind::Gpu
    } else {
        InstanceKind::Cpu
    });
    let name = &g.name;
    match g.kind {
        InstanceKind::Gpu => {
            if let Some(bad) = g.gpus.iter().find(|gpu| !known(gpu)) {
                return Err(Refusal::Poll(format!(
                    "instance group {name} of model {model} specifies invalid or unsupported \
                     gpu id {bad}. GPUs with at least the minimum required CUDA compute \
                     compatibility of 6.000000 are: 0, 1"
                )));
            }
            if g.gpus.is_empty() {
                g.gpus = GPU_IDS.to_vec();
            }
        }
        other if !g.gpus.is_empty() => {
            return Err(Refusal::Poll(format!(
                "instance group {name} of model {model} has kind {} but specifies one or more \
                 GPUs",
                other.name()
            )))
        }
        _ => {}
    }
    Ok(())
}

/// `dynamic_batching` for a model whose largest batch is `max_batch_size`.
pub fn dynamic_batching(
    model: &str,
    max_batch_size: usize,
    v: &Value,
) -> Result<DynamicBatching, Refusal> {
    let mut batching = DynamicBatching {
        preferred_batch_size: Vec::new(),
        max_queue_delay: Duration::ZERO,
        preserve_ordering: false,
    };
    for (key, value) in object(v, "dynamic_batching")? {
        let at = format!("dynamic_batching.{key}");
        match field_name(key).as_str() {
            "preferred_batch_size" => {
                for size in array(value, &at)? {
                    let size = integer(size, &at, i32::MIN.into(), i32::MAX.into())?;
                    batching.preferred_batch_size.push(preferred_size(
                        model,
                        max_batch_size,
                        size,
                    )?);
                }
            }
            "max_queue_delay_microseconds" => {
                let us = integer(value, &at, 0, i64::MAX)?;
                if us > MAX_QUEUE_DELAY_US {
                    return Err(Refusal::model(format!(
                        "'{at}' {us} is longer than the reference server models (one hour)"
                    )));
                }
                batching.max_queue_delay = Duration::from_micros(us as u64);
            }
            "preserve_ordering" => batching.preserve_ordering = boolean(value, &at)?,
            "priority_levels"
            | "default_priority_level"
            | "default_queue_policy"
            | "priority_queue_policy" => {
                if !is_default(value) {
                    return Err(Refusal::model(format!(
                        "'{at}' is not modelled by the reference server"
                    )));
                }
            }
            _ => return Err(Refusal::Poll(format!("'{at}': no such field"))),
        }
    }
    if batching.preferred_batch_size.is_empty() && max_batch_size > 0 {
        batching.preferred_batch_size.push(max_batch_size);
    }
    Ok(batching)
}

/// One preferred batch size, with Triton's validation.
fn preferred_size(model: &str, max_batch_size: usize, size: i64) -> Result<usize, Refusal> {
    if size <= 0 {
        return Err(Refusal::Poll(format!(
            "dynamic batching preferred size must be positive for {model}"
        )));
    }
    if size as u64 > max_batch_size as u64 {
        return Err(Refusal::Poll(format!(
            "dynamic batching preferred size must be <= max batch size for {model}"
        )));
    }
    Ok(size as usize)
}

/// `version_policy`, normalised: it must select version 1, the only one the repository has.
pub fn version_policy(model: &str, v: &Value) -> Result<Value, Refusal> {
    let policy = object(v, "version_policy")?;
    if policy.len() > 1 {
        return Err(Refusal::Poll(
            "'version_policy': more than one of latest, specific and all".into(),
        ));
    }
    let Some((key, value)) = policy.iter().next() else {
        return Ok(json!({}));
    };
    let at = format!("version_policy.{key}");
    let fields = object(value, &at)?;
    let field = |name: &str| {
        let mut found = None;
        for (k, v) in fields {
            if field_name(k) != name {
                return Err(Refusal::Poll(format!("'{at}.{k}': no such field")));
            }
            found = Some(v);
        }
        Ok(found.unwrap_or(&Value::Null))
    };
    let (normalised, selects_one) = match field_name(key).as_str() {
        "latest" => {
            let n = integer(field("num_versions")?, &at, 0, u32::MAX.into())?;
            (json!({"latest": {"num_versions": n}}), n >= 1)
        }
        "specific" => {
            let mut versions = Vec::new();
            for version in array(field("versions")?, &at)? {
                versions.push(integer(version, &at, i64::MIN, i64::MAX)?);
            }
            let one = versions.contains(&1);
            (json!({"specific": {"versions": versions}}), one)
        }
        "all" => {
            field("")?;
            (json!({"all": {}}), true)
        }
        _ => return Err(Refusal::Poll(format!("'{at}': no such field"))),
    };
    if !selects_one {
        return Err(Refusal::Load {
            message: format!(
                "at least one version must be available under the version policy of model \
                 '{model}'"
            ),
            state_reason: None,
        });
    }
    Ok(normalised)
}
