//! Usage errors of `parse_run_args`: each names its flag (and value) on one line, exit 99.

use super::tests::{config, error, temp_path};

/// One row per usage error: the full argv (after the program name) and what the one-line
/// message must contain (the flag and, where there is one, the value).
const ERROR_ROWS: &[(&[&str], &[&str])] = &[
    (&[], &["-m", "must be specified"]),
    (&["-m", ""], &["-m", "must be specified"]),
    (&["-m", "m", "--foo"], &["'--foo'", "--help"]),
    (&["-m", "m", "-q"], &["'-q'", "--help"]),
    (
        &["-m", "m", "--max-threads"],
        &["--max-threads", "value is required"],
    ),
    (
        &["-m", "m", "--concurrency-range", "0"],
        &["--concurrency-range", "'0'"],
    ),
    (
        &["-m", "m", "--concurrency-range", "1:0"],
        &["--latency-threshold"],
    ),
    (
        &["-m", "m", "--concurrency-range", "4:2"],
        &["--concurrency-range", "'4:2'"],
    ),
    (
        &["-m", "m", "--concurrency-range", "1:4:0"],
        &["--concurrency-range", "step"],
    ),
    (
        &["-m", "m", "--concurrency-range", "2", "-t", "2"],
        &["deprecated", "-t"],
    ),
    (&["-m", "m", "-t", "0"], &["-t", "'0'"]),
    (&["-m", "m", "--pin", "--no-pin"], &["--pin", "--no-pin"]),
    (&["-m", "m", "-t", "4", "-c", "2"], &["-c", "(2)"]),
    (&["-m", "m", "-d"], &["--latency-threshold"]),
    (
        &[
            "-m",
            "m",
            "--request-count",
            "10",
            "--concurrency-range",
            "1:4",
        ],
        &["--request-count", "1:4"],
    ),
    (
        &[
            "-m",
            "m",
            "--request-count",
            "2",
            "--concurrency-range",
            "4",
        ],
        &["--request-count 2", "concurrency 4"],
    ),
    (
        &["-m", "m", "--request-count", "-1"],
        &["--request-count", "'-1'"],
    ),
    (
        &[
            "-m",
            "m",
            "--warmup-request-count",
            "5",
            "--concurrency-range",
            "1:2",
        ],
        &["--warmup-request-count", "1:2"],
    ),
    (&["-m", "m", "-b", "0"], &["-b", "'0'"]),
    (&["-m", "m", "-p", "0"], &["--measurement-interval", "'0'"]),
    (
        &["-m", "m", "--measurement-request-count", "0"],
        &["--measurement-request-count", "'0'"],
    ),
    (&["-m", "m", "-r", "0"], &["--max-trials", "'0'"]),
    (
        &["-m", "m", "-s", "-5"],
        &["--stability-percentage", "'-5'"],
    ),
    (
        &["-m", "m", "--percentile", "100"],
        &["--percentile", "'100'"],
    ),
    (&["-m", "m", "--percentile", "0"], &["--percentile", "'0'"]),
    (&["-m", "m", "-l", "-1"], &["--latency-threshold", "'-1'"]),
    (
        &["-m", "m", "--max-threads", "0"],
        &["--max-threads", "'0'"],
    ),
    (
        &["-m", "m", "--string-length", "0"],
        &["--string-length", "'0'"],
    ),
    (
        &["-m", "m", "--max-input-bytes", "0"],
        &["--max-input-bytes", "> 0", "'0'"],
    ),
    (
        &["-m", "m", "--max-input-bytes", "-5"],
        &["--max-input-bytes", "'-5'"],
    ),
    (
        &["-m", "m", "--max-input-bytes", "1GiB"],
        &["--max-input-bytes", "'1GiB'"],
    ),
    (
        &["-m", "m", "--max-input-bytes", "18446744073709551616"],
        &["--max-input-bytes", "too large"],
    ),
    (
        &["-m", "m", "--ready-timeout", "x"],
        &["--ready-timeout", "'x'"],
    ),
    (
        &["-m", "m", "--ready-timeout", "18446744073709551615"],
        &["--ready-timeout", "<= 86400"],
    ),
    (
        &["-m", "m", "--request-timeout", "18446744073709551615"],
        &["--request-timeout", "<= 86400000"],
    ),
    (
        &["-m", "m", "--request-timeout", "0"],
        &["--request-timeout", "> 0"],
    ),
    (
        &["-m", "m", "--request-idle-timeout", "0"],
        &["--request-idle-timeout", "> 0"],
    ),
    (
        &["-m", "m", "--request-idle-timeout", "86400001"],
        &["--request-idle-timeout", "<= 86400000"],
    ),
    (
        &["-m", "m", "--max-response-bytes", "0"],
        &["--max-response-bytes", "> 0"],
    ),
    (
        &["-m", "m", "--max-response-bytes", "18446744073709551615"],
        &["--max-response-bytes", "<= 17179869184"],
    ),
    (&["-m", "m", "--sync", "--async"], &["--async", "--sync"]),
    (&["-m", "m", "-i", "udp"], &["-i", "'udp'"]),
    (&["-m", "m", "--streaming"], &["--streaming", "-i grpc"]),
    (
        &[
            "-m",
            "m",
            "--concurrency-range",
            "2",
            "--request-rate-range",
            "5",
        ],
        &["Cannot use both --concurrency-range and --request-rate-range"],
    ),
    (
        &[
            "-m",
            "m",
            "--request-rate-range",
            "5",
            "--request-intervals",
            "/x",
        ],
        &["Cannot use both --request-rate-range and --request-intervals"],
    ),
    (
        &["-m", "m", "--request-rate-range", "10:0"],
        &["--request-rate-range", "--latency-threshold"],
    ),
    (
        &["-m", "m", "--request-rate-range", "0"],
        &["--request-rate-range", "'0'"],
    ),
    (
        &["-m", "m", "--request-distribution", "gamma"],
        &["--request-distribution", "'gamma'"],
    ),
    (
        &["-m", "m", "--request-intervals", "/no/such/gaps.txt"],
        &["--request-intervals", "/no/such/gaps.txt"],
    ),
    (&["-m", "m", "--binary-search"], &["--binary-search", "-l"]),
    (
        &["-m", "m", "--max-inflight", "4"],
        &["--max-inflight", "concurrency"],
    ),
    (&["-m", "m", "--seed", "x"], &["--seed", "'x'"]),
    (
        &["-m", "m", "--fixed-schedule"],
        &["--fixed-schedule", "--input-data"],
    ),
    (
        &["-m", "m", "--trace-level", "LOUD"],
        &["--trace-level", "'LOUD'"],
    ),
    (
        &["-m", "m", "--trace-count", "-2"],
        &["--trace-count", "'-2'"],
    ),
    (
        &["-m", "m", "-i", "grpc", "--streaming", "--sync"],
        &["--streaming", "--sync"],
    ),
    (
        &["-m", "m", "--grpc-compression-algorithm", "gzip"],
        &["--grpc-compression-algorithm", "-i grpc"],
    ),
    (
        &[
            "-m",
            "m",
            "-i",
            "grpc",
            "--grpc-compression-algorithm",
            "lz4",
        ],
        &["--grpc-compression-algorithm", "'lz4'"],
    ),
    (
        &["-m", "m", "--request-parameter", "a:1:int"],
        &["--request-parameter", "-i grpc"],
    ),
    (
        &["-m", "m", "-i", "grpc", "-u", "https://h:1"],
        &["-u", "--ssl-grpc-use-ssl"],
    ),
    (
        &[
            "-m",
            "m",
            "-i",
            "grpc",
            "--ssl-grpc-root-certifications-file",
            "/no/ca.pem",
        ],
        &[
            "--ssl-grpc-root-certifications-file",
            "/no/ca.pem",
            "does not exist",
        ],
    ),
    (
        &["-m", "m", "--ssl-grpc-use-ssl"],
        &["--ssl-grpc", "-i grpc"],
    ),
    (
        &["-m", "m", "-u", "https://h", "--ssl-https-verify-peer", "2"],
        &["--ssl-https-verify-peer", "'2'"],
    ),
    (
        &[
            "-m",
            "m",
            "-u",
            "https://h",
            "--ssl-https-private-key-type",
            "p12",
        ],
        &["--ssl-https-private-key-type", "'p12'"],
    ),
    (
        &["-m", "m", "--ssl-https-verify-host", "0"],
        &["--ssl-https", "https://"],
    ),
    (&["-m", "m", "--shape", "x:0"], &["--shape", "'x:0'"]),
    (
        &["-m", "m", "--shape", "nocolon"],
        &["--shape", "'nocolon'"],
    ),
    (&["-m", "m", "-H", "novalue"], &["-H", "'novalue'"]),
    (&["-m", "m", "-H", ":v"], &["-H", "name is empty"]),
    (
        &["-m", "m", "--input-data", "/no/such/file.json"],
        &["--input-data", "not found", "/no/such/file.json"],
    ),
    (
        &["-m", "m", "--measurement-mode", "both"],
        &["--measurement-mode", "'both'"],
    ),
    (
        &["-m", "m", "--input-tensor-format", "xml"],
        &["--input-tensor-format", "'xml'"],
    ),
    (
        &["-m", "m", "--output-tensor-format", "Binary"],
        &["--output-tensor-format", "'Binary'"],
    ),
    (&["-m", "m", "-u", "h:port"], &["-u", "'h:port'"]),
    (
        &["-m", "m", "--cuda-device", "-1"],
        &["--cuda-device", ">= 0"],
    ),
    (
        &["-m", "m", "--cuda-device", "gpu0"],
        &["--cuda-device", "'gpu0'"],
    ),
    (
        &["-m", "m", "--output-shared-memory-size", "0"],
        &["--output-shared-memory-size", "> 0"],
    ),
    (
        &["-m", "m", "--shared-memory", "disk"],
        &["--shared-memory", "'disk'"],
    ),
    (
        &["-m", "m", "--service-kind", "tfserving"],
        &["-i http", "tfserving speaks gRPC only"],
    ),
    (
        &["-m", "m", "--service-kind", "vllm"],
        &["--service-kind", "'vllm'"],
    ),
    (&["-m", "m", "-f", ""], &["-f", "empty"]),
];

#[test]
fn each_error_names_its_flag() {
    for (args, needles) in ERROR_ROWS {
        let err = error(args);
        assert_eq!(err.exit_code(), 99, "{args:?}");
        assert!(
            !err.msg.contains('\n'),
            "{args:?}: not one line: {}",
            err.msg
        );
        for needle in *needles {
            assert!(
                err.msg.contains(needle),
                "{args:?}: {:?} lacks {needle:?}",
                err.msg
            );
        }
    }
}

#[test]
fn profile_export_file_must_not_exist() {
    let path = temp_path("export.json");
    let text = path.to_str().unwrap().to_string();
    let c = config(&["-m", "m", "--profile-export-file", &text]);
    assert_eq!(c.profile_export_file.as_deref(), Some(path.as_path()));
    std::fs::write(&path, b"{}").unwrap();
    let err = error(&["-m", "m", "--profile-export-file", &text]);
    std::fs::remove_file(&path).unwrap();
    assert!(
        err.msg.contains("--profile-export-file") && err.msg.contains(&text),
        "{err}"
    );
}
