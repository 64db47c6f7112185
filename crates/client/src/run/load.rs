//! One load level as a run describes it, and the engine load that produces it: the one
//! mapping from concurrency, rate, intervals, fixed schedule, periodic ramp and sessions to
//! [`Load`] that perf_analyzer mode, `profile` and `--session-concurrency` share.

use crate::config::{ConcurrencyRange, Config, Distribution, LoadMode};
use crate::engine::pace::Schedule;
use crate::engine::turns::TurnSource;
use crate::engine::Load;
use crate::report::LoadValue;

/// Shortest span of a generated Poisson schedule before it repeats (ns).
pub const MIN_POISSON_HORIZON_NS: u64 = 10_000_000_000;

/// A load level: the mode, its value and what shapes a paced schedule.
#[derive(Debug, Clone)]
pub struct LoadDesc<'a> {
    pub mode: LoadMode,
    /// Concurrency (closed loop) or requests per second (open loop). Intervals and fixed
    /// schedules carry their nominal rate here; the periodic ramp ignores it.
    pub value: LoadValue,
    /// How sends at a request rate are spaced.
    pub distribution: Distribution,
    /// Seed of a Poisson schedule.
    pub seed: u64,
    /// Span of a Poisson schedule before it repeats (ns).
    pub poisson_horizon_ns: u64,
    /// `--request-intervals` gaps (ns).
    pub intervals_ns: &'a [u64],
    /// `--fixed-schedule` send offsets (ns).
    pub fixed_ns: &'a [u64],
    /// `--periodic-concurrency-range` and `--request-period`.
    pub periodic: ConcurrencyRange,
    pub request_period: u32,
    /// `--max-inflight` of a paced load.
    pub max_inflight: Option<u64>,
    /// `--session-concurrency`: the conversations' turns; `value` is then the number of
    /// slots, each running one conversation at a time.
    pub sessions: Option<TurnSource>,
}

impl LoadDesc<'_> {
    /// A closed or open loop at `value` with nothing else set: constant spacing, no
    /// intervals, no fixed schedule, no ramp.
    pub fn simple(value: LoadValue) -> LoadDesc<'static> {
        let mode = match value {
            LoadValue::Concurrency(_) => LoadMode::Concurrency,
            LoadValue::RequestRate(_) => LoadMode::RequestRate,
        };
        LoadDesc {
            mode,
            value,
            distribution: Distribution::Constant,
            seed: 0,
            poisson_horizon_ns: MIN_POISSON_HORIZON_NS,
            intervals_ns: &[],
            fixed_ns: &[],
            periodic: ConcurrencyRange {
                start: 1,
                end: 1,
                step: 1,
            },
            request_period: 1,
            max_inflight: None,
            sessions: None,
        }
    }

    /// `--session-concurrency slots`: each slot runs one conversation of `turns` at a time.
    pub fn sessions(slots: u64, turns: TurnSource) -> LoadDesc<'static> {
        LoadDesc {
            sessions: Some(turns),
            ..LoadDesc::simple(LoadValue::Concurrency(slots))
        }
    }

    /// Level `value` of a perf_analyzer run. A Poisson schedule spans every window the level
    /// may measure (at least [`MIN_POISSON_HORIZON_NS`]) before it repeats.
    pub fn of_config(cfg: &Config, value: LoadValue) -> LoadDesc<'_> {
        let window_ns = cfg.measurement_interval_ms.saturating_mul(1_000_000);
        let horizon = window_ns.saturating_mul(u64::from(cfg.max_trials.max(1)));
        LoadDesc {
            mode: cfg.load_mode,
            value,
            distribution: cfg.distribution,
            seed: cfg.seed,
            poisson_horizon_ns: horizon.max(MIN_POISSON_HORIZON_NS),
            intervals_ns: &cfg.request_intervals_ns,
            fixed_ns: &cfg.fixed_schedule_ns,
            periodic: cfg.periodic,
            request_period: cfg.request_period,
            max_inflight: cfg.max_inflight,
            sessions: None,
        }
    }

    /// The engine load that produces this level.
    pub fn engine_load(&self) -> Load {
        if let (Some(turns), LoadValue::Concurrency(slots)) = (&self.sessions, self.value) {
            return Load::Sessions {
                slots,
                turns: turns.clone(),
            };
        }
        let schedule = match (self.mode, self.value) {
            (LoadMode::Periodic, _) => {
                return Load::Periodic {
                    start: self.periodic.start,
                    end: self.periodic.end,
                    step: self.periodic.step,
                    period: self.request_period,
                }
            }
            (_, LoadValue::Concurrency(c)) => return Load::Concurrency(c),
            (LoadMode::Intervals, _) => Schedule::Intervals(self.intervals_ns.to_vec()),
            (LoadMode::FixedSchedule, _) => Schedule::Fixed(self.fixed_ns.to_vec()),
            (_, LoadValue::RequestRate(rate)) => match self.distribution {
                Distribution::Constant => Schedule::Constant { rate },
                Distribution::Poisson => Schedule::Poisson {
                    rate,
                    seed: self.seed,
                    horizon_ns: self.poisson_horizon_ns,
                },
            },
        };
        Load::Paced {
            schedule,
            max_inflight: self.max_inflight,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_maps_to_its_engine_load() {
        let mut cfg = Config {
            request_intervals_ns: vec![5, 7],
            fixed_schedule_ns: vec![10, 20],
            max_inflight: Some(3),
            seed: 9,
            ..Config::default()
        };
        let rate = LoadValue::RequestRate(50.0);
        let load = |cfg: &Config, mode, value| {
            let cfg = Config {
                load_mode: mode,
                ..cfg.clone()
            };
            LoadDesc::of_config(&cfg, value).engine_load()
        };
        let paced = |schedule| Load::Paced {
            schedule,
            max_inflight: Some(3),
        };
        assert_eq!(
            load(&cfg, LoadMode::Concurrency, LoadValue::Concurrency(4)),
            Load::Concurrency(4)
        );
        assert_eq!(
            load(&cfg, LoadMode::RequestRate, rate),
            paced(Schedule::Constant { rate: 50.0 })
        );
        assert_eq!(
            load(&cfg, LoadMode::Intervals, rate),
            paced(Schedule::Intervals(vec![5, 7]))
        );
        assert_eq!(
            load(&cfg, LoadMode::FixedSchedule, rate),
            paced(Schedule::Fixed(vec![10, 20]))
        );
        let p = cfg.periodic;
        assert_eq!(
            load(&cfg, LoadMode::Periodic, LoadValue::Concurrency(1)),
            Load::Periodic {
                start: p.start,
                end: p.end,
                step: p.step,
                period: cfg.request_period
            }
        );
        cfg.distribution = Distribution::Poisson;
        cfg.measurement_interval_ms = 5_000;
        cfg.max_trials = 4;
        assert_eq!(
            load(&cfg, LoadMode::RequestRate, rate),
            paced(Schedule::Poisson {
                rate: 50.0,
                seed: 9,
                horizon_ns: 20_000_000_000
            })
        );
        cfg.max_trials = 1;
        let Load::Paced {
            schedule: Schedule::Poisson { horizon_ns, .. },
            ..
        } = load(&cfg, LoadMode::RequestRate, rate)
        else {
            panic!("a Poisson schedule");
        };
        assert_eq!(horizon_ns, MIN_POISSON_HORIZON_NS);
    }

    #[test]
    fn sessions_map_to_their_slots() {
        struct NoTurns;
        impl crate::engine::turns::TurnPlan for NoTurns {
            fn worker(&self, _slots: usize) -> Box<dyn crate::engine::turns::Turns> {
                unreachable!("not started")
            }
        }
        let turns = TurnSource(std::sync::Arc::new(NoTurns));
        assert_eq!(
            LoadDesc::sessions(3, turns.clone()).engine_load(),
            Load::Sessions { slots: 3, turns }
        );
    }

    #[test]
    fn a_simple_level_is_a_plain_closed_or_open_loop() {
        assert_eq!(
            LoadDesc::simple(LoadValue::Concurrency(2)).engine_load(),
            Load::Concurrency(2)
        );
        assert_eq!(
            LoadDesc::simple(LoadValue::RequestRate(3.0)).engine_load(),
            Load::Paced {
                schedule: Schedule::Constant { rate: 3.0 },
                max_inflight: None
            }
        );
    }
}
