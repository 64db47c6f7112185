//! What a model load may change in a reference model's configuration (Triton's load
//! `config` override): the largest batch, the version policy, the instance groups and
//! dynamic batching. Everything else in a model's config is fixed by the model itself.

use std::time::Duration;

use serde_json::{json, Value};

/// GPU ids the server claims (the two fake GPUs its `/metrics` reports), for `KIND_GPU`
/// instance groups.
pub const GPU_IDS: [i32; 2] = [0, 1];

/// The most instances a model may have (each is a slot the server tracks).
pub const MAX_INSTANCES: usize = 1024;

/// `instance_group[].kind` once resolved (Triton turns `KIND_AUTO` into GPU or CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceKind {
    Gpu,
    Cpu,
    Model,
}

impl InstanceKind {
    /// The name in config JSON.
    pub fn name(self) -> &'static str {
        match self {
            InstanceKind::Gpu => "KIND_GPU",
            InstanceKind::Cpu => "KIND_CPU",
            InstanceKind::Model => "KIND_MODEL",
        }
    }

    /// The protobuf enum value (`ModelInstanceGroup.Kind`).
    pub fn proto(self) -> i32 {
        match self {
            InstanceKind::Gpu => 1,
            InstanceKind::Cpu => 2,
            InstanceKind::Model => 3,
        }
    }
}

/// One instance group, normalised as Triton does (name, kind and count filled in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceGroup {
    pub name: String,
    pub kind: InstanceKind,
    /// Instances per GPU of `gpus` (`KIND_GPU`), or in all (other kinds); at least 1.
    pub count: u32,
    pub gpus: Vec<i32>,
}

impl InstanceGroup {
    /// How many executions the group runs at once.
    pub fn instances(&self) -> usize {
        let devices = match self.kind {
            InstanceKind::Gpu => self.gpus.len().max(1),
            _ => 1,
        };
        (self.count as usize).saturating_mul(devices)
    }

    fn json(&self) -> Value {
        json!({"name": self.name, "kind": self.kind.name(), "count": self.count,
            "gpus": self.gpus, "secondary_devices": [], "profile": [], "passive": false,
            "host_policy": ""})
    }
}

/// Dynamic batching, normalised (no preferred size given: the largest batch is preferred).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicBatching {
    pub preferred_batch_size: Vec<usize>,
    pub max_queue_delay: Duration,
    /// The server answers in request order anyway, so this only shows in the config.
    pub preserve_ordering: bool,
}

impl DynamicBatching {
    /// The largest batch the batcher forms from several requests: the largest preferred
    /// size, else `max_batch_size` (at least 1).
    pub fn batch_cap(&self, max_batch_size: usize) -> usize {
        let preferred = self.preferred_batch_size.iter().copied().max();
        preferred.unwrap_or(max_batch_size).max(1)
    }

    fn json(&self) -> Value {
        json!({"preferred_batch_size": self.preferred_batch_size,
            "max_queue_delay_microseconds": self.max_queue_delay.as_micros() as u64,
            "preserve_ordering": self.preserve_ordering, "priority_levels": 0,
            "default_priority_level": 0, "priority_queue_policy": {}})
    }
}

/// A model's loaded settings; [`ModelSettings::new`] gives the repository's own.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSettings {
    pub max_batch_size: usize,
    /// `version_policy` as config JSON (it always selects version 1, the only one).
    pub version_policy: Value,
    /// `None`: the repository's single CPU instance, which does not limit executions.
    pub instance_group: Option<Vec<InstanceGroup>>,
    pub dynamic_batching: Option<DynamicBatching>,
}

impl ModelSettings {
    /// The repository config of a model with this largest batch.
    pub fn new(max_batch_size: usize) -> ModelSettings {
        ModelSettings {
            max_batch_size,
            version_policy: json!({"latest": {"num_versions": 1}}),
            instance_group: None,
            dynamic_batching: None,
        }
    }

    /// The instance groups to show; the repository's single CPU group without a loaded one.
    pub fn groups(&self, model: &str) -> Vec<InstanceGroup> {
        self.instance_group.clone().unwrap_or_else(|| {
            vec![InstanceGroup {
                name: format!("{model}_0"),
                kind: InstanceKind::Cpu,
                count: 1,
                gpus: Vec::new(),
            }]
        })
    }

    /// How many executions run at once: `None` is no limit (no instance group was loaded).
    pub fn instances(&self) -> Option<usize> {
        let groups = self.instance_group.as_ref()?;
        let each = groups.iter().map(InstanceGroup::instances);
        Some(each.fold(0, usize::saturating_add))
    }

    /// `instance_group` as config JSON.
    pub fn instance_group_json(&self, model: &str) -> Value {
        Value::Array(self.groups(model).iter().map(InstanceGroup::json).collect())
    }

    /// `dynamic_batching` as config JSON, when it is on.
    pub fn dynamic_batching_json(&self) -> Option<Value> {
        self.dynamic_batching.as_ref().map(DynamicBatching::json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_count_gpus_and_groups() {
        let mut s = ModelSettings::new(8);
        assert_eq!(s.instances(), None);
        assert_eq!(s.instance_group_json("m")[0]["kind"], "KIND_CPU");
        let group = |kind, count, gpus: &[i32]| InstanceGroup {
            name: "g".into(),
            kind,
            count,
            gpus: gpus.to_vec(),
        };
        s.instance_group = Some(vec![
            group(InstanceKind::Gpu, 3, &GPU_IDS),
            group(InstanceKind::Cpu, 2, &[]),
        ]);
        assert_eq!(s.instances(), Some(8));
        assert_eq!(s.instance_group_json("m")[1]["count"], 2);
    }

    #[test]
    fn batch_cap_prefers_the_largest_preferred_size() {
        let mut b = DynamicBatching {
            preferred_batch_size: vec![2, 4],
            max_queue_delay: Duration::from_micros(100),
            preserve_ordering: false,
        };
        assert_eq!(b.batch_cap(8), 4);
        b.preferred_batch_size.clear();
        assert_eq!((b.batch_cap(8), b.batch_cap(0)), (8, 1));
        assert_eq!(b.json()["max_queue_delay_microseconds"], 100);
    }
}
