use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::super::{pick, service, KINDS};
use super::*;
use crate::cli::{parse_run_args, Parsed};
use crate::config::{ConcurrencyRange, Config, MeasurementMode};

fn pa_config(args: &[&str]) -> Config {
    let mut argv = vec!["perf_analyzer".to_string(), "-m".into(), "m".into()];
    argv.extend(args.iter().map(|a| a.to_string()));
    match parse_run_args(argv.into_iter().map(Into::into).collect()) {
        Ok(Parsed::Run(cfg)) => *cfg,
        Ok(other) => panic!("{args:?}: {other:?}"),
        Err(e) => panic!("{args:?}: {}", e.msg),
    }
}

#[test]
fn names_are_unique_and_every_kind_runs_in_a_product() {
    let mut names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), KINDS.len(), "{names:?}");
    let mut endpoints = endpoint_names();
    endpoints.sort_unstable();
    endpoints.dedup();
    assert_eq!(endpoints.len(), endpoint_names().len(), "{endpoints:?}");
    let prompt = super::super::codec::Prompt {
        model: "m",
        text: "hello",
        osl: Some(4),
        deterministic: false,
        streaming: false,
        extra: &[],
        backend: crate::service::kserve_llm::LlmBackend::TensorrtLlm,
    };
    for kind in KINDS {
        assert!(
            kind.service_kind.is_some() || kind.endpoint.is_some(),
            "{kind:?}"
        );
        assert_eq!(
            kind.endpoint.is_some(),
            kind.endpoint_type.is_some(),
            "{kind:?}"
        );
        // The one `Service` answers for each product the entry names: perf_analyzer mode's
        // labels, `profile`'s request body.
        let labels = kind.service.labels();
        assert_eq!(
            kind.service_kind.is_some(),
            !labels.banner.is_empty() && !labels.export.is_empty(),
            "{kind:?}: {labels:?}"
        );
        assert_eq!(
            kind.endpoint.is_some(),
            kind.service.body(&prompt).is_object(),
            "{kind:?}"
        );
    }
}

/// A kind registered only for `profile` is not offered to perf_analyzer mode, and its
/// `Service` refuses to run there if asked.
#[test]
fn a_profile_only_kind_refuses_perf_analyzer_mode() {
    let chat = for_endpoint("chat").unwrap();
    assert!(chat.service_kind.is_none());
    let err = service(chat).err().expect("chat has no --service-kind");
    assert!(err.msg.contains("service kind chat"), "{}", err.msg);
    let err = chat.service.prepare(&Config::default()).err().unwrap();
    assert_eq!(err.kind, crate::error::ErrorKind::Usage, "{}", err.msg);
}

/// Each perf_analyzer-mode kind is what its `--service-kind` (and `-i`) selects, found by
/// the registry lookups alone.
#[test]
fn each_service_kind_is_reached_through_the_registry() {
    let mut reached = 0;
    for kind in KINDS {
        let Some((name, protocol)) = kind.service_kind else {
            continue;
        };
        let protocol = protocol.unwrap_or(if kind.caps.grpc {
            Protocol::Grpc
        } else {
            Protocol::Http
        });
        let sk = service_kind(name).expect("registered name");
        assert_eq!(sk.0, name);
        let cfg = Config {
            service_kind: sk,
            protocol,
            ..Config::default()
        };
        let found = pick(&cfg).unwrap();
        assert!(std::ptr::eq(found, *kind), "{kind:?} -> {found:?}");
        let labels = service(found).unwrap().labels();
        assert!(!labels.banner.is_empty() && !labels.export.is_empty());
        reached += 1;
    }
    assert_eq!(
        reached,
        service_kind_names().len() + 1,
        "triton has two kinds (-i)"
    );
    // An unknown name is a usage error listing the registry's names.
    let err = parse_run_args(
        ["perf_analyzer", "-m", "m", "--service-kind", "nope"]
            .iter()
            .map(Into::into)
            .collect(),
    )
    .unwrap_err();
    assert_eq!(err.kind, crate::error::ErrorKind::Usage);
    for name in service_kind_names() {
        assert!(err.msg.contains(name), "{}", err.msg);
    }
}

#[test]
fn generate_paths_carry_the_model_and_the_stream() {
    let generate = for_endpoint("generate").unwrap().endpoint.unwrap();
    assert_eq!(generate.default_path("m1", false), "v2/models/m1/generate");
    assert_eq!(
        generate.default_path("m1", true),
        "v2/models/m1/generate_stream"
    );
    let chat = for_endpoint("chat").unwrap().endpoint.unwrap();
    assert_eq!(chat.default_path("m1", true), "v1/chat/completions");
}

/// Only the Triton kinds register shared memory, each through its own protocol's API.
#[test]
fn shared_memory_is_a_capability_of_the_kind() {
    for kind in KINDS {
        let expected = match kind.service_kind {
            Some(("triton", Some(Protocol::Http))) => Some(ShmApi::Http),
            Some(("triton", Some(Protocol::Grpc))) => Some(ShmApi::Grpc),
            _ => None,
        };
        assert_eq!(kind.caps.shared_memory, expected, "{kind:?}");
    }
}

/// An HTTP/1.1 server that answers every request `200` with `body` and counts the
/// `GET /v2/health/ready` ones.
fn health_server(body: &'static str) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut pending = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head: Vec<u8> = pending.drain(..end + 4).collect();
                        if head.starts_with(b"GET /v2/health/ready HTTP/1.1\r\n") {
                            counter.fetch_add(1, Ordering::Relaxed);
                        }
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if conn.write_all(reply.as_bytes()).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// The test-only `example` kind (one file and one registry line) runs a whole
/// perf_analyzer-mode measurement, chosen by `--service-kind example` alone.
#[test]
fn the_example_kind_runs_from_its_registry_line() {
    let (addr, seen) = health_server("");
    let mut cfg = pa_config(&["--service-kind", "example", "-u", &addr]);
    assert_eq!(cfg.service_kind.0, "example");
    cfg.measurement_mode = MeasurementMode::CountWindows;
    cfg.measurement_request_count = 20;
    cfg.count_check_ms = 5;
    cfg.stability_threshold = 10.0;
    cfg.max_trials = 10;
    cfg.pin_threads = false;
    cfg.ready_timeout_s = 2;
    cfg.concurrency = ConcurrencyRange {
        start: 1,
        end: 1,
        step: 1,
    };
    let mut out = Vec::new();
    let res = crate::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false))).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(res.error.is_none(), "{:?}", res.error);
    assert!(text.contains("  Service Kind: EXAMPLE\n"), "{text}");
    let sent = res.points[0].client.request_count;
    assert!(sent >= 20, "{sent}");
    assert!(seen.load(Ordering::Relaxed) as u64 >= sent);
}
