//! When a delayed execution runs: the model instances and the dynamic batcher of a loaded
//! config, or `--serial`'s single instance per server thread.
//!
//! Executions are planned, not queued: a request that is ready at `ready` and keeps an
//! instance busy for `wait` is given its start (the earliest free instance) and its end at
//! once, and its response is held until the end. With dynamic batching a request that finds
//! a batch not yet started, with room for its batch, joins it: it starts and ends with that
//! batch and is no execution of its own. A new batch that is not full waits out
//! `max_queue_delay_microseconds` from its first request (Triton starts a full one at once;
//! a planned start cannot move).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::settings::ModelSettings;

/// When one execution runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub start: Instant,
    pub end: Instant,
    /// Joined a batch another request started: not an execution of its own.
    pub batched: bool,
}

impl Run {
    /// Without a loaded limit: at once, or for a `--serial` model (`busy_until` of the
    /// calling thread's single instance) once the previous execution is over.
    pub fn serial(busy_until: Option<&mut Instant>, ready: Instant, wait: Duration) -> Run {
        let mut start = ready;
        if let Some(busy) = busy_until {
            start = start.max(*busy);
            *busy = start + wait;
        }
        Run {
            start,
            end: start + wait,
            batched: false,
        }
    }
}

/// A batch planned and not yet started.
#[derive(Debug)]
struct Open {
    start: Instant,
    end: Instant,
    size: usize,
}

/// One model's instances and batcher.
#[derive(Debug)]
struct Plan {
    /// When each instance is free again; empty: executions are not limited.
    free_at: Vec<Instant>,
    /// Largest batch the batcher forms, and how long a batch that is not full waits.
    batcher: Option<(usize, Duration)>,
    open: Option<Open>,
}

impl Plan {
    fn reserve(&mut self, ready: Instant, batch: usize, wait: Duration) -> Run {
        if let (Some((cap, _)), Some(open)) = (self.batcher, self.open.as_mut()) {
            if open.start > ready && open.size + batch <= cap {
                open.size += batch;
                return Run {
                    start: open.start,
                    end: open.end,
                    batched: true,
                };
            }
        }
        let slot = (0..self.free_at.len()).min_by_key(|&i| self.free_at[i]);
        let mut start = slot.map_or(ready, |i| self.free_at[i].max(ready));
        if let Some((cap, delay)) = self.batcher {
            if batch < cap {
                start = start.max(ready + delay);
            }
            self.open = Some(Open {
                start,
                end: start + wait,
                size: batch,
            });
        }
        if let Some(i) = slot {
            self.free_at[i] = start + wait;
        }
        Run {
            start,
            end: start + wait,
            batched: false,
        }
    }
}

/// Every model's plan (indexed like `MODELS`); a model without one is not limited.
#[derive(Debug)]
pub struct Instances {
    limited: Vec<AtomicBool>,
    plans: Vec<Mutex<Option<Plan>>>,
}

impl Instances {
    pub fn new(models: usize) -> Instances {
        Instances {
            limited: (0..models).map(|_| AtomicBool::new(false)).collect(),
            plans: (0..models).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// Sets model `index`'s instances and batcher from its loaded settings (all idle).
    pub fn configure(&self, index: usize, settings: &ModelSettings) {
        let now = Instant::now();
        let free_at = vec![now; settings.instances().unwrap_or(0)];
        let batcher = settings.dynamic_batching.as_ref().map(|b| {
            let cap = b.batch_cap(settings.max_batch_size);
            (cap, b.max_queue_delay)
        });
        let plan = (!free_at.is_empty() || batcher.is_some()).then_some(Plan {
            free_at,
            batcher,
            open: None,
        });
        let limited = plan.is_some();
        *self.plans[index].lock().unwrap_or_else(|e| e.into_inner()) = plan;
        self.limited[index].store(limited, Ordering::Relaxed);
    }

    /// When an execution of `batch` inferences, ready at `ready` and lasting `wait`, runs;
    /// `None` when the loaded config does not limit the model.
    pub fn reserve(
        &self,
        index: usize,
        ready: Instant,
        batch: usize,
        wait: Duration,
    ) -> Option<Run> {
        if !self.limited[index].load(Ordering::Relaxed) {
            return None;
        }
        let mut plan = self.plans[index].lock().unwrap_or_else(|e| e.into_inner());
        Some(plan.as_mut()?.reserve(ready, batch, wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{DynamicBatching, InstanceGroup, InstanceKind};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn settings(count: u32, batching: Option<(Vec<usize>, u64)>) -> ModelSettings {
        let mut s = ModelSettings::new(8);
        s.instance_group = (count > 0).then(|| {
            vec![InstanceGroup {
                name: "g".into(),
                kind: InstanceKind::Cpu,
                count,
                gpus: Vec::new(),
            }]
        });
        s.dynamic_batching = batching.map(|(preferred, delay_ms)| DynamicBatching {
            preferred_batch_size: preferred,
            max_queue_delay: ms(delay_ms),
            preserve_ordering: false,
        });
        s
    }

    #[test]
    fn instances_bound_concurrent_executions() {
        let i = Instances::new(2);
        let now = Instant::now() + ms(1);
        assert_eq!(i.reserve(0, now, 1, ms(10)), None, "not limited");
        i.configure(0, &settings(2, None));
        let starts: Vec<Instant> = (0..4)
            .map(|_| i.reserve(0, now, 1, ms(10)).unwrap().start)
            .collect();
        assert_eq!(starts, [now, now, now + ms(10), now + ms(10)]);
        i.configure(0, &ModelSettings::new(8));
        assert_eq!(
            i.reserve(0, now, 1, ms(10)),
            None,
            "back to the repository's"
        );
    }

    #[test]
    fn queued_requests_join_a_batch_up_to_its_cap() {
        let i = Instances::new(1);
        i.configure(0, &settings(1, Some((vec![4], 0))));
        let now = Instant::now() + ms(1);
        let first = i.reserve(0, now, 1, ms(10)).unwrap();
        assert_eq!((first.start, first.batched), (now, false));
        // The instance is busy: the next request opens a batch for when it is free ...
        let second = i.reserve(0, now + ms(1), 1, ms(10)).unwrap();
        assert_eq!((second.start, second.end), (now + ms(10), now + ms(20)));
        // ... which the following ones join until it holds 4 inferences.
        let third = i.reserve(0, now + ms(2), 3, ms(50)).unwrap();
        assert_eq!((third.end, third.batched), (second.end, true));
        let fourth = i.reserve(0, now + ms(3), 1, ms(10)).unwrap();
        assert_eq!((fourth.start, fourth.batched), (now + ms(20), false));
    }

    #[test]
    fn a_batch_that_is_not_full_waits_the_queue_delay() {
        let i = Instances::new(1);
        i.configure(0, &settings(0, Some((vec![], 5))));
        let now = Instant::now() + ms(1);
        let first = i.reserve(0, now, 2, ms(1)).unwrap();
        assert_eq!(first.start, now + ms(5));
        let joined = i.reserve(0, now + ms(1), 6, ms(1)).unwrap();
        assert!(joined.batched && joined.start == first.start);
        // A request that fills the batch by itself does not wait.
        assert_eq!(
            i.reserve(0, now + ms(2), 8, ms(1)).unwrap().start,
            now + ms(2)
        );
    }

    #[test]
    fn serial_runs_one_at_a_time() {
        let now = Instant::now();
        let mut busy = now;
        let a = Run::serial(Some(&mut busy), now, ms(5));
        let b = Run::serial(Some(&mut busy), now + ms(1), ms(5));
        assert_eq!((a.start, b.start, b.end), (now, now + ms(5), now + ms(10)));
        assert_eq!(Run::serial(None, now, ms(5)).start, now);
    }
}
