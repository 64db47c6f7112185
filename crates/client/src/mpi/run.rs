//! `inferperf --enable-mpi ...`: one rank's run, from MPI_Init to MPI_Finalize.

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::coord::{Mode, MpiCoord};
use super::Collective;
use crate::clock::Clock;
use crate::config::{Config, LoadMode, MeasurementMode};
use crate::error::{Error, Result};
use crate::run::RunResult;

/// Checks that need no MPI: what `--enable-mpi` cannot do (perf_analyzer's MPI mode measures
/// one level too).
pub fn check_config(cfg: &Config) -> Result<()> {
    let refuse = |what: &str| Err(Error::usage(format!("--enable-mpi: {what}")));
    if cfg.session_concurrency > 0 {
        return refuse("--session-concurrency is not supported with MPI");
    }
    match cfg.load_mode {
        LoadMode::Periodic => return refuse("--periodic-concurrency-range is not supported"),
        LoadMode::Intervals | LoadMode::FixedSchedule if cfg.mpi_scale_out => {
            return refuse(
                "--mpi-scale-out splits a concurrency or a request rate; a --request-intervals \
                 or --fixed-schedule schedule cannot be split (run it in multi-model mode)",
            )
        }
        LoadMode::Concurrency if cfg.concurrency.start != cfg.concurrency.end => {
            return refuse(
                "measures one level, as perf_analyzer does: give --concurrency-range N (no \
                 start:end sweep)",
            )
        }
        LoadMode::RequestRate if cfg.request_rate.start != cfg.request_rate.end => {
            return refuse(
                "measures one level, as perf_analyzer does: give --request-rate-range R (no \
                 start:end sweep)",
            )
        }
        _ => {}
    }
    if cfg.binary_search {
        return refuse("--binary-search is not supported (one level per run)");
    }
    Ok(())
}

/// Checks that need the world's size.
fn check_size(cfg: &Config, size: usize) -> Result<()> {
    if cfg.mpi_scale_out
        && cfg.load_mode == LoadMode::Concurrency
        && cfg.concurrency.start < size as u64
    {
        return Err(Error::usage(format!(
            "--mpi-scale-out: concurrency {} is below the {size} ranks; every rank needs at \
             least 1",
            cfg.concurrency.start
        )));
    }
    Ok(())
}

/// How long a rank waits for the others: `--mpi-timeout`, else 4 windows (at least 60 s), or
/// 600 s when windows end on counts.
pub fn timeout(cfg: &Config) -> Duration {
    if let Some(s) = cfg.mpi_timeout_s {
        return Duration::from_secs(s);
    }
    let counted = cfg.measurement_mode == MeasurementMode::CountWindows || cfg.request_count > 0;
    if counted {
        return Duration::from_secs(600);
    }
    Duration::from_millis(cfg.measurement_interval_ms.saturating_mul(4))
        .max(Duration::from_secs(60))
}

/// The configuration one rank runs in scale-out: its own schedule seed (so Poisson ranks do
/// not send in lockstep) and its share of `--max-inflight`. Concurrency, rates and counts
/// are split where they are used, so reports keep the totals.
pub fn rank_config(cfg: &Config, mpi: &MpiCoord) -> Config {
    Config {
        seed: cfg.seed.wrapping_add(mpi.rank() as u64),
        max_inflight: cfg.max_inflight.map(|n| mpi.share(n).max(1)),
        ..cfg.clone()
    }
}

/// Runs `cfg` as one rank of the MPI job `world`.
pub fn run_rank(
    cfg: &Config,
    world: Box<dyn Collective>,
    out: &mut dyn Write,
    stop: Arc<AtomicBool>,
) -> Result<RunResult> {
    check_size(cfg, world.size())?;
    let mode = if cfg.mpi_scale_out {
        Mode::ScaleOut
    } else {
        Mode::MultiModel
    };
    let clock = Clock::new();
    let mut coord = MpiCoord::new(world, mode, timeout(cfg), &|| clock.now_ns())?;
    // A rank whose run fails before its levels leaves the others waiting at a barrier; the
    // error ends this process and MPI (or the others' timeout) ends the job.
    let result = crate::run::run_with(cfg, out, stop, &mut coord)?;
    let _ = out.flush();
    if !coord.is_broken() {
        // perf_analyzer's barrier after profiling: no rank finalizes while another measures.
        coord.barrier("barrier after profiling")?;
    }
    if coord.is_root() {
        eprint!("{}", coord.summary());
    }
    coord.finish()?;
    Ok(result)
}

/// `inferperf --enable-mpi ...` from the command line: MPI_Init through libmpi, then the run.
#[cfg(feature = "mpi")]
pub fn main_mpi(cfg: &Config, out: &mut dyn Write, stop: Arc<AtomicBool>) -> Result<RunResult> {
    check_config(cfg)?;
    crate::signal::install_term();
    let world = super::world::MpiWorld::init()?;
    run_rank(cfg, Box::new(world), out, stop)
}

/// `--enable-mpi` in a build without the `mpi` feature: a usage error.
#[cfg(not(feature = "mpi"))]
pub fn main_mpi(_: &Config, _: &mut dyn Write, _: Arc<AtomicBool>) -> Result<RunResult> {
    Err(Error::without_feature("--enable-mpi", "mpi"))
}
