//! The bindings against the stand-in library `tests/capi_stub/tritonserver_stub.c`, built
//! with gcc into a temporary directory (the tests are skipped, with a message, without gcc).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::unbounded;
use mio::{Poll, Token, Waker};

use super::*;
use crate::clock::Clock;
use crate::service::triton_http::{decode_outputs_json, parse_model_config, parse_model_metadata};
use crate::tensor::{DataType, InputTensor};

/// Builds the stub with `defines` into its own directory (`<dir>/lib/libtritonserver.so`);
/// `None` when gcc is missing.
pub(crate) fn build_stub(tag: &str, defines: &[&str]) -> Option<PathBuf> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/capi_stub/tritonserver_stub.c");
    let dir =
        std::env::temp_dir().join(format!("inferperf-capi-unit-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(dir.join("lib")).ok()?;
    let out = dir.join("lib/libtritonserver.so");
    let status = std::process::Command::new("gcc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .args(defines)
        .arg(&src)
        .arg("-lpthread")
        .status();
    match status {
        Ok(s) if s.success() => Some(dir),
        Ok(s) => panic!("gcc failed to build the C API stub: {s}"),
        Err(e) => {
            eprintln!("skipped: gcc is not available ({e})");
            None
        }
    }
}

fn options(dir: PathBuf) -> ServerOptions {
    ServerOptions {
        model_repository: dir.join("models"),
        server_dir: dir,
        log_verbose: 0,
        log_info: false,
        unload_model: Some("identity_fp32".into()),
    }
}

#[test]
fn server_documents_parse_as_the_http_ones() {
    let Some(dir) = build_stub("docs", &[]) else {
        return;
    };
    let server = Server::start(&options(dir)).unwrap();
    let meta = parse_model_metadata(
        server
            .model_metadata_json("identity_fp32", "")
            .unwrap()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(meta.inputs[0].name, "INPUT0");
    assert_eq!(meta.outputs[0].datatype, DataType::F32);
    let config = parse_model_config(
        server
            .model_config_json("repeat_int32", "1")
            .unwrap()
            .as_bytes(),
    )
    .unwrap();
    assert!(config.decoupled);
    let stats = server.model_statistics_json("identity_fp32", "").unwrap();
    assert!(stats.contains("\"model_stats\""), "{stats}");
    assert!(server.metadata_json().unwrap().contains("statistics"));
    let e = server.model_metadata_json("nope", "").unwrap_err();
    assert!(
        e.msg.contains("Not found") && e.msg.contains("nope"),
        "{}",
        e.msg
    );
}

#[test]
fn version_and_symbol_problems_are_named() {
    let Some(old) = build_stub("old", &["-DSTUB_API_MINOR=3"]) else {
        return;
    };
    let e = Server::start(&options(old)).err().unwrap();
    assert!(e.msg.contains("1.3 is not supported"), "{}", e.msg);
    let Some(partial) = build_stub("partial", &["-DSTUB_OMIT_PRIORITY"]) else {
        return;
    };
    let e = Server::start(&options(partial)).err().unwrap();
    assert!(
        e.msg
            .contains("TRITONSERVER_InferenceRequestSetPriorityUInt64"),
        "{}",
        e.msg
    );
}

#[test]
fn requests_complete_through_the_channel_and_waker() {
    let Some(dir) = build_stub("infer", &[]) else {
        return;
    };
    let server = Server::start(&options(dir)).unwrap();
    let mut poll = Poll::new().unwrap();
    let waker = Arc::new(Waker::new(poll.registry(), Token(7)).unwrap());
    let (tx, rx) = unbounded();
    let notifier = Notifier::new(&server, tx, waker, Clock::new(), true);
    let ctx = SlotCtx::new(notifier.clone(), 3);
    let data: Vec<u8> = (0..16u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let step = prepare_step(&[InputTensor {
        name: "INPUT0".into(),
        datatype: DataType::F32,
        shape: vec![16],
        data: data.clone(),
    }])
    .unwrap();
    let model = ModelTarget {
        name: c"identity_fp32".into(),
        version: -1,
        outputs: vec![c"OUTPUT0".into()],
    };
    infer_async(&server, &model, &step, None, &ctx).unwrap();
    let mut events = mio::Events::with_capacity(4);
    poll.poll(&mut events, Some(Duration::from_secs(5)))
        .unwrap();
    assert!(
        events.iter().any(|e| e.token() == Token(7)),
        "the waker fired"
    );
    let done = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        (done.slot, done.last, done.has_response, done.error.clone()),
        (3, true, true, None)
    );
    let json = decode_outputs_json(&done.body, None).unwrap();
    assert!(json.starts_with("{\"OUTPUT0\":[0.0,1.0,2.0,"), "{json}");
    let n = done.body.len();
    assert_eq!(
        &done.body[n - 64..],
        &data[..],
        "outputs copied out byte for byte"
    );
    assert!(
        notifier.wait_idle(Duration::from_secs(5)),
        "release callback ran"
    );
    let bad = ModelTarget {
        name: c"missing".into(),
        ..model
    };
    let e = infer_async(&server, &bad, &step, None, &ctx).unwrap_err();
    assert!(e.contains("InferenceRequestNew"), "{e}");
    assert_eq!(notifier.owed(), 0);
}

#[test]
fn decoupled_responses_then_a_final_flag() {
    let Some(dir) = build_stub("repeat", &[]) else {
        return;
    };
    let server = Server::start(&options(dir)).unwrap();
    let poll = Poll::new().unwrap();
    let waker = Arc::new(Waker::new(poll.registry(), Token(1)).unwrap());
    let (tx, rx) = unbounded();
    let notifier = Notifier::new(&server, tx, waker, Clock::new(), false);
    let ctx = SlotCtx::new(notifier.clone(), 0);
    let step = prepare_step(&[InputTensor {
        name: "IN".into(),
        datatype: DataType::I32,
        shape: vec![1],
        data: 3i32.to_le_bytes().to_vec(),
    }])
    .unwrap();
    let model = ModelTarget {
        name: c"repeat_int32".into(),
        version: -1,
        outputs: vec![c"OUT".into()],
    };
    let seq = SeqFields {
        correlation_id: 5,
        start: true,
        end: true,
    };
    infer_async(&server, &model, &step, Some(seq), &ctx).unwrap();
    let got: Vec<_> = (0..4)
        .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
        .map(|c| (c.has_response, c.last, c.body.is_empty()))
        .collect();
    let want = [
        (true, false, true),
        (true, false, true),
        (true, false, true),
        (false, true, true),
    ];
    assert_eq!(got, want);
    assert!(notifier.wait_idle(Duration::from_secs(5)));
}
