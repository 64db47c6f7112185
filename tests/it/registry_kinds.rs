//! Every kind of the service-kind registry, reached through the registry alone: each
//! `profile` endpoint kind is run by its `--endpoint-type` name against the in-process
//! reference server, which must receive the requests over the kind's protocol.

use crate::common::temp_dir;
use crate::run_profile::{start_llm, MODEL};

use std::ffi::OsString;

use inferperf::llm;
use inferperf::run::{registry, KINDS};

/// Endpoint kinds the reference server has no route for: their requests must still reach
/// it (and be refused).
const NOT_SERVED: &[&str] = &["rankings"];

#[test]
fn every_endpoint_kind_of_the_registry_runs_against_the_server() {
    let server = start_llm(1, 1, 1);
    let dir = temp_dir("registry-kinds");
    let mut ran = 0;
    for kind in KINDS.iter().filter(|k| k.endpoint.is_some()) {
        let name = kind
            .endpoint_type
            .expect("an endpoint kind has an --endpoint-type");
        assert!(registry::for_endpoint(name).is_some_and(|k| std::ptr::eq(k, *kind)));
        let url = if kind.caps.grpc {
            server.grpc_addr.expect("gRPC port").to_string()
        } else {
            server.addr.to_string()
        };
        let mut argv: Vec<OsString> = ["profile", "-m", MODEL, "--endpoint-type", name]
            .iter()
            .map(OsString::from)
            .collect();
        argv.extend(["-u".into(), url.into()]);
        argv.extend(["--artifact-dir".into(), dir.join(name).into_os_string()]);
        let rest = [
            "--quiet",
            "--tokenizer",
            "cl100k_base",
            "--request-count",
            "3",
        ];
        argv.extend(rest.iter().map(OsString::from));
        if kind.endpoint.is_some_and(|e| e.generates) {
            argv.extend(["--output-tokens-mean".into(), "4".into()]);
        }
        let cfg = llm::cli::parse(argv).unwrap().unwrap();
        assert!(std::ptr::eq(cfg.endpoint_type.kind(), *kind), "{name}");
        let before = server.counters();
        let result = llm::run(&cfg, &mut Vec::new());
        let after = server.counters();
        let (http, grpc) = (
            after.http_requests - before.http_requests,
            after.grpc_calls - before.grpc_calls,
        );
        if kind.caps.grpc {
            assert!(
                grpc >= 1 && http == 0,
                "{name}: {grpc} gRPC calls, {http} HTTP"
            );
        } else {
            assert!(
                http >= 3 && grpc == 0,
                "{name}: {http} HTTP requests, {grpc} gRPC"
            );
        }
        if NOT_SERVED.contains(&name) {
            assert!(result.is_err(), "{name}: the server has no route for it");
        } else {
            let outcomes = result.unwrap_or_else(|e| panic!("{name}: {}", e.msg));
            let requests = &outcomes[0].requests;
            assert_eq!(requests.len(), 3, "{name}");
            assert!(requests.iter().all(|r| r.ok()), "{name}");
            let family = kind.endpoint.unwrap().family;
            let dir_name = outcomes[0].dir.file_name().unwrap().to_string_lossy();
            assert!(
                dir_name.contains(&format!("-{family}-")),
                "{name}: {dir_name}"
            );
        }
        ran += 1;
    }
    assert_eq!(ran, registry::endpoint_names().len());
    server.stop();
}
