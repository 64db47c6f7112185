//! Raw command-line values (`RunArgs`) to a checked `Config`.
//!
//! Every error is `Error::usage` (exit 99) and names the flag and the offending value.

use std::path::{Path, PathBuf};

use super::args::RunArgs;
use super::number::{
    parse_float_within, parse_number, parse_within, MAX_COUNT, MAX_LEVEL, MAX_MS, MAX_PERCENT,
};
use super::transport::apply_transport;
use crate::config::{
    ConcurrencyRange, Config, InputData, MeasurementMode, ServiceKind, SharedMemory, TensorFormat,
};
use crate::error::{Error, Result};

/// Checks every flag and builds the run configuration.
pub fn to_config(args: &RunArgs) -> Result<Config> {
    let mut config = Config::default();
    apply_general(args, &mut config)?;
    apply_transport(args, &mut config)?;
    apply_load(args, &mut config)?;
    super::load::apply_load_modes(args, &mut config)?;
    super::openai::apply_sessions(args, &mut config)?;
    apply_measurement(args, &mut config)?;
    apply_inputs(args, &mut config)?;
    apply_reports(args, &mut config)?;
    super::metrics::apply_metrics(args, &mut config)?;
    super::kinds::apply(args, &mut config)?;
    config.pin_threads = pin_threads(args, &config)?;
    check_cross_options(&config)?;
    Ok(config)
}

/// `--pin` pins the worker threads to cores, `--no-pin` leaves them to the scheduler, and by
/// default they are pinned only when the server is on another machine. A server on this
/// machine (loopback, or in process with the C API) shares its cores: a pinned worker cannot
/// move off the core the server's busiest thread lands on, so windows alternate between two
/// throughputs (10.2k and 4.2k infer/s at c1 on a real Triton over HTTP, 2 cores) while
/// unpinned they stay within a few percent.
fn pin_threads(args: &RunArgs, config: &Config) -> Result<bool> {
    if args.pin && args.no_pin {
        return Err(Error::usage(
            "Cannot specify --pin and --no-pin simultaneously.",
        ));
    }
    let local =
        config.service_kind == ServiceKind::TritonCApi || super::net::is_loopback(&config.url);
    Ok(args.pin || (!args.no_pin && !local))
}

fn apply_general(args: &RunArgs, config: &mut Config) -> Result<()> {
    config.model_name = match args.model_name.as_deref() {
        Some(name) if !name.is_empty() => name.to_string(),
        // dynamic_grpc calls a method, not a model: -m is optional there.
        _ if args.service_kind.as_deref() == Some("dynamic_grpc") => String::new(),
        _ => {
            return Err(Error::usage(
                "Failed to parse -m (model name). The value must be specified.",
            ))
        }
    };
    config.model_version = args.model_version.clone().unwrap_or_default();
    config.verbose = args.verbose;
    if let Some(kind) = args.service_kind.as_deref() {
        config.service_kind = crate::run::kinds::registry::service_kind(kind).ok_or_else(|| {
            Error::usage(format!(
                "Failed to parse --service-kind. Unsupported value '{kind}'; the choices are {}.",
                crate::run::kinds::registry::service_kind_names().join(", ")
            ))
        })?;
        super::kinds::apply_protocol_default(args, config);
    }
    apply_capi(args, config)?;
    if let Some(endpoint) = args.endpoint.as_deref() {
        config.endpoint = endpoint.trim().trim_start_matches('/').to_string();
    }
    Ok(())
}

/// `--triton-server-directory`, `--model-repository`: C API only; the repository is required.
fn apply_capi(args: &RunArgs, config: &mut Config) -> Result<()> {
    let capi = config.service_kind == ServiceKind::TritonCApi;
    for (flag, given) in [
        ("--triton-server-directory", &args.triton_server_directory),
        ("--model-repository", &args.model_repository),
    ] {
        if given.is_some() && !capi {
            return Err(Error::usage(format!(
                "{flag} is only supported with --service-kind triton_c_api."
            )));
        }
    }
    if let Some(dir) = &args.triton_server_directory {
        config.triton_server_directory = PathBuf::from(dir);
    }
    config.model_repository = args.model_repository.as_ref().map(PathBuf::from);
    if capi && config.model_repository.is_none() {
        return Err(Error::usage(
            "--model-repository is required with --service-kind triton_c_api.",
        ));
    }
    Ok(())
}

fn apply_load(args: &RunArgs, config: &mut Config) -> Result<()> {
    if args.async_mode && args.sync {
        return Err(Error::usage(
            "Cannot specify --async and --sync simultaneously.",
        ));
    }
    // --streaming implies --async (checked against --sync with the transport flags).
    config.async_mode = args.async_mode || args.streaming;
    if let Some(raw) = args.max_threads.as_deref() {
        config.max_threads = Some(parse_within("--max-threads", raw, 1, MAX_THREADS)?);
    }

    let old_options = args.concurrency_start.is_some()
        || args.concurrency_end.is_some()
        || args.dynamic_concurrency;
    config.concurrency = match (args.concurrency_range.as_deref(), old_options) {
        (Some(_), true) => {
            return Err(Error::usage(
                "Cannot use deprecated options (-t, -c, -d) with --concurrency-range.",
            ))
        }
        (Some(raw), false) => parse_concurrency_range(raw)?,
        (None, true) => old_concurrency_options(args)?,
        (None, false) => config.concurrency,
    };
    Ok(())
}

/// `-t` start, `-c` end, `-d` dynamic (end defaults to 0 = no limit); without `-c`/`-d` the
/// single value `-t`.
fn old_concurrency_options(args: &RunArgs) -> Result<ConcurrencyRange> {
    let start = match args.concurrency_start.as_deref() {
        Some(raw) => parse_within("-t", raw, 1, MAX_LEVEL)?,
        None => 1,
    };
    let end = match (args.concurrency_end.as_deref(), args.dynamic_concurrency) {
        (Some(raw), _) => parse_within("-c", raw, 0, MAX_LEVEL)?,
        (None, true) => 0,
        (None, false) => start,
    };
    let range = ConcurrencyRange {
        start,
        end,
        step: 1,
    };
    if range.end != 0 && range.end < range.start {
        return Err(Error::usage(format!(
            "Failed to parse -c. The concurrency end ({end}) must be >= the start set by -t \
             ({start}), or 0 for no limit."
        )));
    }
    Ok(range)
}

/// `start[:end[:step]]`, integers; start > 0, step > 0, end >= start or end == 0.
pub fn parse_concurrency_range(raw: &str) -> Result<ConcurrencyRange> {
    const FLAG: &str = "--concurrency-range";
    let parts: Vec<&str> = raw.split(':').collect();
    if parts.len() > 3 {
        return Err(Error::usage(format!(
            "Failed to parse {FLAG}. The value '{raw}' does not match <start:end:step>."
        )));
    }
    let mut values = [1u64, 1, 1];
    for (slot, part) in values.iter_mut().zip(&parts) {
        *slot = parse_number::<u64>(FLAG, part).map_err(|_| {
            Error::usage(format!(
                "Failed to parse {FLAG}. '{part}' in '{raw}' is not a non-negative integer."
            ))
        })?;
        if *slot > MAX_LEVEL {
            return Err(Error::usage(format!(
                "Failed to parse {FLAG}. '{part}' in '{raw}' is above the limit of {MAX_LEVEL}."
            )));
        }
    }
    let [start, end, step] = values;
    // A single value means exactly that concurrency.
    let end = if parts.len() == 1 { start } else { end };
    let problem = if start == 0 {
        Some("The start of the range must be > 0")
    } else if step == 0 {
        Some("The step must be > 0")
    } else if end != 0 && end < start {
        Some("The end must be >= the start, or 0 for no limit")
    } else {
        None
    };
    match problem {
        Some(why) => Err(Error::usage(format!(
            "Failed to parse {FLAG}. {why} (got '{raw}')."
        ))),
        None => Ok(ConcurrencyRange { start, end, step }),
    }
}

fn apply_measurement(args: &RunArgs, config: &mut Config) -> Result<()> {
    if let Some(mode) = args.measurement_mode.as_deref() {
        config.measurement_mode = match mode {
            "time_windows" => MeasurementMode::TimeWindows,
            "count_windows" => MeasurementMode::CountWindows,
            _ => {
                return Err(Error::usage(format!(
                    "Failed to parse --measurement-mode. Unsupported value '{mode}'; the \
                     choices are time_windows, count_windows."
                )))
            }
        };
    }
    if let Some(raw) = args.measurement_interval.as_deref() {
        config.measurement_interval_ms =
            parse_within("--measurement-interval (-p)", raw, 1, MAX_MS)?;
    }
    if let Some(raw) = args.measurement_request_count.as_deref() {
        config.measurement_request_count =
            parse_within("--measurement-request-count", raw, 1, MAX_COUNT)?;
    }
    if let Some(raw) = args.stability_percentage.as_deref() {
        config.stability_threshold = parse_stability(raw)? / 100.0;
    }
    if let Some(raw) = args.max_trials.as_deref() {
        config.max_trials = parse_within("--max-trials (-r)", raw, 1, MAX_LEVEL)?;
    }
    if let Some(raw) = args.percentile.as_deref() {
        config.percentile = parse_percentile(raw)?;
    }
    if let Some(raw) = args.latency_threshold.as_deref() {
        config.latency_threshold_ms = parse_within("--latency-threshold (-l)", raw, 0, MAX_MS)?;
    }
    if let Some(raw) = args.request_count.as_deref() {
        config.request_count = parse_within("--request-count", raw, 0, MAX_COUNT)?;
    }
    if config.request_count > 0 {
        // perf_analyzer: a fixed request count is one count window of exactly that size.
        config.measurement_mode = MeasurementMode::CountWindows;
        config.measurement_request_count = config.request_count;
    }
    if let Some(raw) = args.warmup_request_count.as_deref() {
        config.warmup_request_count = parse_within("--warmup-request-count", raw, 0, MAX_COUNT)?;
    }
    Ok(())
}

fn parse_stability(raw: &str) -> Result<f64> {
    parse_float_within("--stability-percentage (-s)", raw, 0.0, MAX_PERCENT)
}

/// Worker threads at most (`--max-threads`).
const MAX_THREADS: u64 = 65_536;
/// `--string-length` at most: 1 GiB per string.
const MAX_STRING_LENGTH: u64 = 1 << 30;
/// Largest `--max-input-bytes` (1 TiB).
const MAX_INPUT_BYTES: u64 = 1 << 40;
/// `--cuda-device` at most.
const MAX_CUDA_DEVICE: u64 = 1023;
/// `--output-shared-memory-size` at most: 1 TiB.
const MAX_OUTPUT_SHM: u64 = 1 << 40;

fn parse_percentile(raw: &str) -> Result<Option<u32>> {
    match raw.trim().parse::<i64>() {
        Ok(-1) => Ok(None),
        Ok(p @ 1..=99) => Ok(Some(p as u32)),
        _ => Err(Error::usage(format!(
            "Failed to parse --percentile. The value must be -1 for the average or in 1..99 \
             (got '{raw}')."
        ))),
    }
}

fn apply_inputs(args: &RunArgs, config: &mut Config) -> Result<()> {
    let mut values = args.input_data.clone();
    values.extend(args.data_directory.iter().cloned());
    config.input_data = input_data(&values, args.zero_input)?;
    if let Some(raw) = args.batch_size.as_deref() {
        config.batch_size = parse_within("-b (batch size)", raw, 1, MAX_LEVEL)?;
        config.batch_size_given = true;
    }
    for raw in &args.shape {
        let (name, dims) = parse_shape(raw)?;
        // perf_analyzer keeps shapes in a map: a repeated name replaces the earlier shape.
        match config.shapes.iter_mut().find(|(known, _)| *known == name) {
            Some(entry) => entry.1 = dims,
            None => config.shapes.push((name, dims)),
        }
    }
    if let Some(raw) = args.string_length.as_deref() {
        config.string_length = parse_within("--string-length", raw, 1, MAX_STRING_LENGTH)?;
    }
    config.string_data = args.string_data.clone();
    if let Some(raw) = args.max_input_bytes.as_deref() {
        config.max_input_bytes = parse_within("--max-input-bytes", raw, 1, MAX_INPUT_BYTES)?;
    }
    match args.shared_memory.as_deref() {
        None | Some("none") => {}
        Some("system") => config.shared_memory = SharedMemory::System,
        Some("cuda") => config.shared_memory = SharedMemory::Cuda,
        Some(other) => {
            return Err(Error::usage(format!(
                "Failed to parse --shared-memory. Unsupported value '{other}'; the choices are \
                 none, system, cuda."
            )))
        }
    }
    if let Some(raw) = args.cuda_device.as_deref() {
        config.cuda_device = parse_within("--cuda-device", raw, 0, MAX_CUDA_DEVICE)?;
    }
    if let Some(raw) = args.output_shared_memory_size.as_deref() {
        config.output_shm_size =
            parse_within("--output-shared-memory-size", raw, 1, MAX_OUTPUT_SHM)?;
    }
    if let Some(raw) = args.input_tensor_format.as_deref() {
        config.input_tensor_format = parse_tensor_format("--input-tensor-format", raw)?;
    }
    if let Some(raw) = args.output_tensor_format.as_deref() {
        config.output_tensor_format = parse_tensor_format("--output-tensor-format", raw)?;
    }
    Ok(())
}

/// `--input-data` values in order (and `-z`): `zero`, `random`, or paths of JSON files and
/// directories. Any path wins over zero/random, as in perf_analyzer; paths are read later,
/// once the model is known.
fn input_data(values: &[String], zero_flag: bool) -> Result<InputData> {
    let mut zero = zero_flag;
    let mut paths = Vec::new();
    for value in values {
        match value.as_str() {
            "zero" => zero = true,
            "random" => {}
            path => {
                if std::fs::metadata(path).is_err() {
                    return Err(Error::usage(format!(
                        "Failed to parse --input-data. File not found: '{path}' (expected zero, \
                         random, a JSON file or a directory)."
                    )));
                }
                paths.push(std::path::PathBuf::from(path));
            }
        }
    }
    Ok(match (paths.is_empty(), zero) {
        (false, _) => InputData::Files(paths),
        (true, true) => InputData::Zero,
        (true, false) => InputData::Random,
    })
}

fn parse_tensor_format(flag: &str, raw: &str) -> Result<TensorFormat> {
    match raw {
        "binary" => Ok(TensorFormat::Binary),
        "json" => Ok(TensorFormat::Json),
        _ => Err(Error::usage(format!(
            "Failed to parse {flag}. Unsupported value '{raw}'; the choices are binary, json."
        ))),
    }
}

/// `name:d1,d2,...`, split at the last colon (input names may contain colons); dims > 0.
pub fn parse_shape(raw: &str) -> Result<(String, Vec<i64>)> {
    let bad = |why: &str| Error::usage(format!("Failed to parse --shape. {why} (got '{raw}')."));
    let (name, dims) = raw
        .rsplit_once(':')
        .ok_or_else(|| bad("There must be a colon after the input name"))?;
    if name.is_empty() {
        return Err(bad("The input name is empty"));
    }
    let dims = dims
        .split(',')
        .map(|dim| match dim.trim().parse::<i64>() {
            Ok(d) if d > 0 => Ok(d),
            _ => Err(bad(
                "The dimensions of the input tensor must be integers > 0",
            )),
        })
        .collect::<Result<Vec<i64>>>()?;
    Ok((name.to_string(), dims))
}

fn apply_reports(args: &RunArgs, config: &mut Config) -> Result<()> {
    if let Some(path) = args.csv_file.as_deref() {
        if path.is_empty() {
            return Err(Error::usage("Failed to parse -f. The file name is empty."));
        }
        config.csv_file = Some(PathBuf::from(path));
    }
    config.verbose_csv = args.verbose_csv;
    config.csv_extra_columns = args.csv_extra_columns;
    config.rx_stamps = !args.no_kernel_rx_stamps;
    config.tx_stamps = !args.no_kernel_tx_stamps;
    config.packet_stamps = !args.no_packet_stamps;
    if let Some(path) = args.profile_export_file.as_deref() {
        if path.is_empty() {
            return Err(Error::usage(
                "Failed to parse --profile-export-file. The file name is empty.",
            ));
        }
        // perf_analyzer refuses to overwrite an existing export (a dangling link counts).
        if std::fs::symlink_metadata(Path::new(path)).is_ok() {
            return Err(Error::usage(format!(
                "Failed to parse --profile-export-file. The path must not already exist: '{path}'."
            )));
        }
        config.profile_export_file = Some(PathBuf::from(path));
    }
    Ok(())
}

/// perf_analyzer's checks that involve more than one flag.
fn check_cross_options(config: &Config) -> Result<()> {
    super::load::check(config)?;
    super::openai::check(config)?;
    let range = config.concurrency;
    let single_value = range.start == range.end;
    if range.end == 0 && config.latency_threshold_ms == 0 {
        return Err(Error::usage(
            "--concurrency-range with end 0 (no limit) requires --latency-threshold (-l) > 0.",
        ));
    }
    if config.request_count > 0 {
        if !single_value {
            return Err(Error::usage(format!(
                "--request-count {} is not supported with multiple concurrency values in one run \
                 (concurrency {}:{}).",
                config.request_count, range.start, range.end
            )));
        }
        if config.request_count < range.start {
            return Err(Error::usage(format!(
                "--request-count {} can not be less than the concurrency {}.",
                config.request_count, range.start
            )));
        }
    }
    if config.warmup_request_count > 0 && !single_value {
        return Err(Error::usage(format!(
            "--warmup-request-count {} is not supported with multiple concurrency values in one \
             run (concurrency {}:{}).",
            config.warmup_request_count, range.start, range.end
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_data_values_in_order() {
        let manifest = env!("CARGO_MANIFEST_DIR");
        let file = format!("{manifest}/Cargo.toml");
        let files = |paths: &[&str]| InputData::Files(paths.iter().map(Into::into).collect());
        let rows: &[(&[&str], bool, InputData)] = &[
            (&[], false, InputData::Random),
            (&[], true, InputData::Zero),
            (&["random", "zero"], false, InputData::Zero),
            (&[&file], false, files(&[&file])),
            (&[&file, manifest], false, files(&[&file, manifest])),
            // A path wins over zero/random, whatever the order (perf_analyzer does the same).
            (&["zero", &file, "random"], true, files(&[&file])),
        ];
        for (values, zero_flag, want) in rows {
            let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            assert_eq!(
                &input_data(&values, *zero_flag).unwrap(),
                want,
                "{values:?}"
            );
        }
        let values = vec!["zero".to_string(), "/no/such/dir".to_string()];
        let err = input_data(&values, false).unwrap_err();
        assert!(
            err.msg.contains("--input-data") && err.msg.contains("'/no/such/dir'"),
            "{err}"
        );
    }

    #[test]
    fn concurrency_range_forms() {
        let cases: &[(&str, (u64, u64, u64))] = &[
            ("4", (4, 4, 1)),
            ("1:8", (1, 8, 1)),
            ("2:8:2", (2, 8, 2)),
            ("3:0", (3, 0, 1)),
            ("5:5:3", (5, 5, 3)),
        ];
        for (raw, (start, end, step)) in cases {
            let range = parse_concurrency_range(raw).unwrap();
            assert_eq!(
                range,
                ConcurrencyRange {
                    start: *start,
                    end: *end,
                    step: *step
                },
                "{raw}"
            );
        }
    }

    #[test]
    fn concurrency_range_errors_name_flag_and_value() {
        for raw in [
            "0",
            "0:4",
            "4:2",
            "1:4:0",
            "1:2:3:4",
            "a",
            "1:",
            "-1",
            ":4",
            "1.5",
            "1000001",
            "1:1000001",
            "1:2:1000001",
        ] {
            let err = parse_concurrency_range(raw).unwrap_err();
            assert!(
                err.msg.contains("--concurrency-range"),
                "{raw}: {}",
                err.msg
            );
            assert!(err.msg.contains(raw), "{raw}: {}", err.msg);
            assert_eq!(err.exit_code(), 99);
        }
    }

    #[test]
    fn shape_splits_at_last_colon() {
        assert_eq!(
            parse_shape("in:put:3,4").unwrap(),
            ("in:put".to_string(), vec![3, 4])
        );
        assert_eq!(parse_shape("x:16").unwrap(), ("x".to_string(), vec![16]));
        for raw in ["x", ":3", "x:", "x:0", "x:-1", "x:3,", "x:a,2", "x:1.5"] {
            let err = parse_shape(raw).unwrap_err();
            assert!(
                err.msg.contains("--shape") && err.msg.contains(raw),
                "{raw}: {}",
                err.msg
            );
        }
    }

    #[test]
    fn percentile_and_stability() {
        assert_eq!(parse_percentile("-1").unwrap(), None);
        assert_eq!(parse_percentile("1").unwrap(), Some(1));
        assert_eq!(parse_percentile("99").unwrap(), Some(99));
        for raw in ["0", "100", "-2", "p95"] {
            assert!(
                parse_percentile(raw)
                    .unwrap_err()
                    .msg
                    .contains("--percentile"),
                "{raw}"
            );
        }
        assert_eq!(parse_stability("12.5").unwrap(), 12.5);
        for raw in ["-1", "nan", "inf", "x"] {
            assert!(
                parse_stability(raw).unwrap_err().msg.contains("-s"),
                "{raw}"
            );
        }
    }
}
