//! End-to-end tests of `parse_run_args`: argv in, `Config` or error out.

use super::*;
use crate::config::{ConcurrencyRange, InputData, MeasurementMode, TensorFormat};
use std::path::PathBuf;

pub(super) fn parse(args: &[&str]) -> Result<Parsed> {
    let argv = std::iter::once("inferperf").chain(args.iter().copied());
    parse_run_args(argv.map(OsString::from).collect())
}

pub(super) fn config(args: &[&str]) -> Config {
    match parse(args) {
        Ok(Parsed::Run(config)) => *config,
        Ok(Parsed::Exit { text, .. }) => panic!("{args:?}: unexpected exit: {text}"),
        Err(err) => panic!("{args:?}: unexpected error: {err}"),
    }
}

pub(super) fn error(args: &[&str]) -> Error {
    match parse(args) {
        Err(err) => err,
        Ok(parsed) => panic!("{args:?}: expected an error, got {parsed:?}"),
    }
}

/// A path in the temp dir unique to this process and `tag`; removed first.
pub(super) fn temp_path(tag: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("inferperf-cli-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn defaults_when_only_model_given() {
    let parsed = config(&["-m", "identity"]);
    // The seed is drawn at start when not given.
    assert!(!parsed.seed_given);
    let expected = Config {
        model_name: "identity".into(),
        seed: parsed.seed,
        ..Config::default()
    };
    assert_eq!(format!("{parsed:?}"), format!("{expected:?}"));
}

type Check = fn(&Config) -> bool;

fn range(start: u64, end: u64, step: u64) -> ConcurrencyRange {
    ConcurrencyRange { start, end, step }
}

/// One row per implemented flag: the flags after `-m m`, and a check of the parsed `Config`.
const FLAG_ROWS: &[(&[&str], Check)] = &[
    (&["-x", "3"], |c| c.model_version == "3"),
    (&["--request-rate-range", "100:300:50"], |c| {
        c.load_mode == crate::config::LoadMode::RequestRate
            && c.request_rate.start == 100.0
            && c.request_rate.end == 300.0
            && c.request_rate.step == 50.0
    }),
    (
        &[
            "--request-rate-range",
            "100",
            "--request-distribution",
            "Poisson",
        ],
        |c| c.distribution == crate::config::Distribution::Poisson,
    ),
    (&["--seed", "17"], |c| c.seed == 17 && c.seed_given),
    (
        &[
            "--trace-level",
            "timestamps",
            "--trace-count",
            "-1",
            "--log-frequency",
            "0",
        ],
        |c| {
            c.trace_settings
                == vec![
                    ("trace_level".to_string(), "TIMESTAMPS".to_string()),
                    ("trace_count".to_string(), "-1".to_string()),
                    ("log_frequency".to_string(), "0".to_string()),
                ]
        },
    ),
    (
        &["--request-rate-range", "100", "--max-inflight", "8"],
        |c| c.max_inflight == Some(8),
    ),
    (
        &["--concurrency-range", "1:16", "--binary-search", "-l", "5"],
        |c| c.binary_search,
    ),
    (&["-i", "gRPC"], |c| {
        c.protocol == crate::config::Protocol::Grpc && c.url == "localhost:8001"
    }),
    (&["-i", "grpc", "-u", "h:9"], |c| {
        c.url == "h:9" && c.tls.is_none()
    }),
    (&["-i", "grpc", "--streaming"], |c| {
        c.streaming && c.async_mode
    }),
    (
        &["-i", "grpc", "--grpc-compression-algorithm", "GZIP"],
        |c| c.compression == crate::config::Compression::Gzip,
    ),
    (
        &[
            "-i",
            "grpc",
            "--request-parameter",
            "a:1:int",
            "--request-parameter",
            "b:x:string",
        ],
        |c| c.request_parameters.len() == 2 && c.request_parameters[0].0 == "a",
    ),
    (&["-i", "grpc", "--ssl-grpc-use-ssl"], |c| {
        c.tls
            .as_ref()
            .is_some_and(|t| t.verify_peer && t.flag_prefix == "--ssl-grpc")
    }),
    (&["-u", "https://h:8443"], |c| {
        c.url == "h:8443"
            && c.tls
                .as_ref()
                .is_some_and(|t| t.verify_peer && t.verify_host)
    }),
    (
        &[
            "-u",
            "https://h",
            "--ssl-https-verify-peer",
            "0",
            "--ssl-https-verify-host",
            "0",
        ],
        |c| {
            c.tls
                .as_ref()
                .is_some_and(|t| !t.verify_peer && !t.verify_host)
        },
    ),
    (&["-v"], |c| c.verbose == 1),
    (&["-v", "-v"], |c| c.verbose == 2),
    (&["-vv"], |c| c.verbose == 2),
    (&["--service-kind", "triton"], |c| c.model_name == "m"),
    (&["--concurrency-range", "2:8:2"], |c| {
        c.concurrency == range(2, 8, 2)
    }),
    (&["--concurrency-range", "4"], |c| {
        c.concurrency == range(4, 4, 1)
    }),
    (&["--concurrency-range", "1:0", "-l", "50"], |c| {
        c.concurrency == range(1, 0, 1)
    }),
    (&["-a"], |c| c.async_mode),
    (&["--async"], |c| c.async_mode),
    (&["--sync"], |c| !c.async_mode),
    (&["--max-threads", "3"], |c| c.max_threads == Some(3)),
    (&["--no-pin"], |c| !c.pin_threads),
    (&["-u", "localhost:8000"], |c| !c.pin_threads),
    (&["-u", "127.0.0.1:8000"], |c| !c.pin_threads),
    (&["-u", "10.1.2.3:8000"], |c| c.pin_threads),
    (&["-u", "http://server:8000"], |c| c.pin_threads),
    (&["-u", "10.1.2.3:8000", "--no-pin"], |c| !c.pin_threads),
    (&["-u", "127.0.0.1:8000", "--pin"], |c| c.pin_threads),
    (&["-t", "4"], |c| c.concurrency == range(4, 4, 1)),
    (&["-t", "2", "-c", "6"], |c| c.concurrency == range(2, 6, 1)),
    (&["-t", "2", "-d", "-l", "9"], |c| {
        c.concurrency == range(2, 0, 1)
    }),
    (&["-d", "-c", "5"], |c| c.concurrency == range(1, 5, 1)),
    (&["--measurement-mode", "count_windows"], |c| {
        c.measurement_mode == MeasurementMode::CountWindows
    }),
    (&["--measurement-mode", "time_windows"], |c| {
        c.measurement_mode == MeasurementMode::TimeWindows
    }),
    (&["-p", "1000"], |c| c.measurement_interval_ms == 1000),
    (&["--measurement-interval", "250"], |c| {
        c.measurement_interval_ms == 250
    }),
    (&["--measurement-request-count", "80"], |c| {
        c.measurement_request_count == 80
    }),
    (&["-s", "5"], |c| {
        (c.stability_threshold - 0.05).abs() < 1e-12
    }),
    (&["--stability-percentage", "0"], |c| {
        c.stability_threshold == 0.0
    }),
    (&["-r", "4"], |c| c.max_trials == 4),
    (&["--max-trials", "7"], |c| c.max_trials == 7),
    (&["--percentile", "95"], |c| c.percentile == Some(95)),
    (&["--percentile", "-1"], |c| c.percentile.is_none()),
    (&["-l", "20"], |c| c.latency_threshold_ms == 20),
    (&["--latency-threshold", "30"], |c| {
        c.latency_threshold_ms == 30
    }),
    (
        &["--request-count", "5000", "--concurrency-range", "2"],
        |c| {
            c.request_count == 5000
                && c.measurement_request_count == 5000
                && c.measurement_mode == MeasurementMode::CountWindows
        },
    ),
    (&["--warmup-request-count", "100"], |c| {
        c.warmup_request_count == 100
    }),
    (&["--input-data", "zero"], |c| {
        c.input_data == InputData::Zero
    }),
    (&["--input-data", "random"], |c| {
        c.input_data == InputData::Random
    }),
    (&["-z"], |c| c.input_data == InputData::Zero),
    (&["--input-data", "random", "--input-data", "zero"], |c| {
        c.input_data == InputData::Zero
    }),
    (&["-b", "8"], |c| c.batch_size == 8 && c.batch_size_given),
    (&["--shape", "a:b:2,3", "--shape", "x:1"], |c| {
        c.shapes == [("a:b".to_string(), vec![2, 3]), ("x".to_string(), vec![1])]
    }),
    (
        &["--shape", "x:1", "--shape", "y:2", "--shape", "x:5"],
        |c| c.shapes == [("x".to_string(), vec![5]), ("y".to_string(), vec![2])],
    ),
    (&["--string-length", "16"], |c| c.string_length == 16),
    (&["--max-input-bytes", "1073741824"], |c| {
        c.max_input_bytes == 1 << 30
    }),
    (&[], |c| c.max_input_bytes == 256 << 20),
    (&["--string-data", "-hello"], |c| {
        c.string_data.as_deref() == Some("-hello")
    }),
    (&["--shared-memory", "none"], |c| {
        c.shared_memory == crate::config::SharedMemory::None
    }),
    (&["--shared-memory", "system"], |c| {
        c.shared_memory == crate::config::SharedMemory::System && c.output_shm_size == 102_400
    }),
    (&["--output-shared-memory-size", "4096"], |c| {
        c.output_shm_size == 4096
    }),
    (&["--shared-memory", "cuda"], |c| {
        c.shared_memory == crate::config::SharedMemory::Cuda && c.cuda_device == 0
    }),
    (&["--shared-memory", "cuda", "--cuda-device", "2"], |c| {
        c.cuda_device == 2
    }),
    (&["--input-tensor-format", "json"], |c| {
        c.input_tensor_format == TensorFormat::Json
    }),
    (&["--output-tensor-format", "json"], |c| {
        c.output_tensor_format == TensorFormat::Json
    }),
    (&["-u", "http://127.0.0.1:18090"], |c| {
        c.url == "127.0.0.1:18090"
    }),
    (&["-u", "h:1"], |c| c.url == "h:1"),
    (&["-i", "HTTP"], |c| {
        c.protocol == crate::config::Protocol::Http
    }),
    (&["-H", "A:1", "-H", "B: two"], |c| {
        c.headers == [("A".into(), "1".into()), ("B".into(), "two".into())]
    }),
    (&["--ready-timeout", "3"], |c| c.ready_timeout_s == 3),
    (&["--ready-timeout", "0"], |c| c.ready_timeout_s == 0),
    (&["--request-timeout", "300"], |c| {
        c.request_timeout == Some(std::time::Duration::from_millis(300))
    }),
    (&["-m", "m"], |c| {
        c.request_timeout.is_none() && c.request_idle_timeout.is_none()
    }),
    (
        &["--request-idle-timeout", "250", "--request-timeout", "900"],
        |c| {
            c.request_idle_timeout == Some(std::time::Duration::from_millis(250))
                && c.request_timeout == Some(std::time::Duration::from_millis(900))
        },
    ),
    (&[], |c| c.max_response_bytes == 64 << 20),
    (&["--max-response-bytes", "1073741824"], |c| {
        c.max_response_bytes == 1 << 30
    }),
    (&["-f", "out.csv"], |c| {
        c.csv_file == Some(PathBuf::from("out.csv"))
    }),
    (&["--verbose-csv"], |c| {
        c.verbose_csv && !c.csv_extra_columns
    }),
    (&["--csv-extra-columns"], |c| {
        c.csv_extra_columns && !c.verbose_csv
    }),
];

#[test]
fn each_flag_lands_in_its_field() {
    for (flags, check) in FLAG_ROWS {
        let mut args = vec!["-m", "m"];
        args.extend_from_slice(flags);
        let parsed = config(&args);
        assert!(check(&parsed), "{flags:?} gave {parsed:#?}");
    }
}

#[test]
fn equals_form_and_last_wins() {
    let c = config(&[
        "-m",
        "a",
        "-m",
        "b",
        "--concurrency-range=3",
        "--max-threads=2",
    ]);
    assert_eq!(c.model_name, "b");
    assert_eq!(
        c.concurrency,
        ConcurrencyRange {
            start: 3,
            end: 3,
            step: 1
        }
    );
    assert_eq!(c.max_threads, Some(2));
    let c = config(&["-mx", "-p", "100", "-p", "200", "-u", "a:1", "-u", "b:2"]);
    assert_eq!(
        (c.model_name.as_str(), c.measurement_interval_ms),
        ("x", 200)
    );
    assert_eq!(c.url, "b:2");
}
