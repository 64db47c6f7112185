//! The bindings against the stand-in library `tests/capi_stub/tritonserver_stub.c`, built
//! with gcc into a temporary directory (the tests are skipped, with a message, without gcc).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::unbounded;
use mio::{Poll, Token, Waker};

use super::*;
use crate::clock::Clock;
use crate::measure::RequestRecord;
use crate::service::triton_http::{decode_outputs_json, parse_model_config, parse_model_metadata};
use crate::tensor::{DataType, InputTensor};

/// Builds the stub with `defines` into its own directory (`<dir>/lib/libtritonserver.so`);
/// `None` when gcc is missing.
pub(crate) fn build_stub(tag: &str, defines: &[&str]) -> Option<PathBuf> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/capi_stub/tritonserver_stub.c");
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

/// A notifier and one slot for `model` (outputs kept; framed as asked).
fn slot_for(
    server: &Arc<Server>,
    model: ModelTarget,
    step: PreparedStep,
    framed: bool,
    waker: Arc<Waker>,
) -> (Box<SlotCtx>, crossbeam_channel::Receiver<usize>) {
    let (tx, rx) = unbounded();
    let target = Target {
        server: server.clone(),
        model: Arc::new(model),
        steps: Arc::new(vec![step]),
        keep_outputs: true,
        framed,
        decoupled: framed,
    };
    let notifier = Arc::new(Notifier::new(target, tx, waker, Clock::new()));
    (SlotCtx::new(notifier, 3), rx)
}

/// The slot's finished requests (the worker's side of the ring).
fn drain(ctx: &SlotCtx) -> Vec<(RequestRecord, Vec<u8>, Option<String>, bool)> {
    let mut out = Vec::new();
    // SAFETY: this thread is the ring's only consumer.
    while unsafe {
        ctx.ring.pop(|d| {
            out.push((d.rec, d.body.clone(), d.error.take(), d.parked));
        })
    } {}
    out
}

#[test]
fn a_request_parks_its_slot_with_the_record_and_outputs() {
    let Some(dir) = build_stub("infer", &[]) else {
        return;
    };
    let server = Server::start(&options(dir)).unwrap();
    let mut poll = Poll::new().unwrap();
    let waker = Arc::new(Waker::new(poll.registry(), Token(7)).unwrap());
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
    let (ctx, parked) = slot_for(&server, model.clone(), step, false, waker);
    for round in 0..3u32 {
        // SAFETY: the slot is parked (nothing of it is in the server).
        unsafe { ctx.launch(0, None, |r| r.intended_ns = 9) }.unwrap();
        let mut events = mio::Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(events.iter().any(|e| e.token() == Token(7)), "woken");
        assert_eq!(parked.recv_timeout(Duration::from_secs(5)).unwrap(), 3);
        let got = drain(&ctx);
        assert_eq!(got.len(), 1, "round {round}");
        let (rec, body, error, was_parked) = &got[0];
        assert!(rec.ok && error.is_none() && *was_parked);
        assert_eq!((rec.responses, rec.intended_ns, rec.step), (1, 9, 0));
        assert!(rec.start_ns <= rec.send_end_ns && rec.send_end_ns <= rec.end_ns);
        let json = decode_outputs_json(body, None).unwrap();
        assert!(json.starts_with("{\"OUTPUT0\":[0.0,1.0,2.0,"), "{json}");
        assert_eq!(&body[body.len() - 64..], &data[..], "outputs byte for byte");
        assert!(wait_idle(
            std::slice::from_ref(&ctx),
            Duration::from_secs(5)
        ));
    }
    let bad = ModelTarget {
        name: c"missing".into(),
        ..model
    };
    let (ctx, _parked) = slot_for(&server, bad, Vec::new(), false, ctx_waker(&poll));
    // SAFETY: as above.
    let (rec, e) = unsafe { ctx.launch(0, None, |_| {}) }.unwrap_err();
    assert!(e.contains("InferenceRequestNew"), "{e}");
    assert!(rec.start_ns > 0 && rec.send_end_ns >= rec.start_ns);
    assert_eq!(ctx.owed(), 0);
}

fn ctx_waker(poll: &Poll) -> Arc<Waker> {
    Arc::new(Waker::new(poll.registry(), Token(8)).unwrap())
}

#[test]
fn decoupled_responses_are_framed_with_their_arrival() {
    let Some(dir) = build_stub("repeat", &[]) else {
        return;
    };
    let server = Server::start(&options(dir)).unwrap();
    let poll = Poll::new().unwrap();
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
    let (ctx, parked) = slot_for(&server, model, step, true, ctx_waker(&poll));
    let seq = SeqFields {
        correlation_id: 5,
        start: true,
        end: true,
    };
    // SAFETY: the slot is new.
    unsafe { ctx.launch(0, Some(seq), |_| {}) }.unwrap();
    parked.recv_timeout(Duration::from_secs(5)).unwrap();
    let got = drain(&ctx);
    let (rec, body, error, _) = &got[0];
    assert!(rec.ok && error.is_none());
    assert_eq!(rec.responses, 3);
    let frames: Vec<(u64, &[u8])> = crate::measure::record::framed_responses(body).collect();
    assert_eq!(frames.len(), 3, "one frame per response with outputs");
    for (i, (at, payload)) in frames.iter().enumerate() {
        let json = decode_outputs_json(payload, None).unwrap();
        assert_eq!(json, format!("{{\"OUT\":{i}}}"), "a one-element output");
        assert!(*at >= rec.recv_start_ns && *at <= rec.end_ns);
    }
    assert_eq!(frames[0].0, rec.recv_start_ns);
    assert_eq!(frames[2].0, rec.end_ns, "latency ends at the last response");
    assert!(wait_idle(
        std::slice::from_ref(&ctx),
        Duration::from_secs(5)
    ));
}
