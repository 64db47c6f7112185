//! Proves that patching sequence fields into a request copy and drawing the next sequence
//! fields allocate nothing: the binary's counting allocator (counting on this thread only,
//! so the test harness does not interfere) sees zero allocations across thousands of calls.

use crate::counting;
use inferperf::config::{Compression, ParamValue, TensorFormat};
use inferperf::engine::sequence::{SeqConfig, Sequences};
use inferperf::service::seq_patch::{grpc_template, http_template, SeqTemplate};
use inferperf::tensor::{DataType, InputTensor};

fn allocations(f: impl FnOnce()) -> u64 {
    let before = counting::thread_allocs();
    f();
    counting::thread_allocs() - before
}

/// Sends `n` requests the way the engine would: next fields, copy, patch.
fn drive(template: &SeqTemplate, seq: &mut Sequences, out: &mut [u8], n: usize) {
    for i in 0..n {
        let slot = i % seq.slots();
        let fields = seq.next(slot);
        out.copy_from_slice(&template.bytes);
        template.patch(out, &fields);
        std::hint::black_box(&out);
    }
}

#[test]
fn patching_and_drawing_fields_do_not_allocate() {
    let _serial = counting::serial();
    let inputs = [InputTensor {
        name: "INPUT".into(),
        datatype: DataType::I32,
        shape: vec![1, 64],
        data: vec![7; 256],
    }];
    let outputs = ["OUTPUT".to_string()];
    let params = [("tag".to_string(), ParamValue::Str("x".into()))];
    let fmt = TensorFormat::Binary;
    let templates = [
        http_template(
            "h:1",
            "/v2/models/m/infer",
            &inputs,
            &outputs,
            fmt,
            fmt,
            &[],
        )
        .unwrap(),
        grpc_template("m", "", &inputs, &outputs, &params, Compression::None).unwrap(),
        grpc_template("m", "", &inputs, &outputs, &params, Compression::Gzip).unwrap(),
        grpc_template("m", "", &inputs, &outputs, &params, Compression::Deflate).unwrap(),
    ];
    let cfg = SeqConfig::default();
    for template in &templates {
        let mut seq = Sequences::new(&cfg, 8, &[3, 5]).unwrap();
        let mut out = vec![0u8; template.bytes.len()];
        let busy = [false, true, false, true, false, true, false, true];
        let n = allocations(|| {
            drive(template, &mut seq, &mut out, 5_000);
            for _ in 0..1_000 {
                let slot = seq.pick_slot(&busy).unwrap();
                let _ = seq.next(slot);
            }
            let live = seq.live().count();
            for slot in 0..seq.slots() {
                let _ = seq.finish(slot);
            }
            assert!(live > 0 && seq.live().next().is_none());
        });
        assert_eq!(n, 0, "allocations on the per-request path");
    }
    // The counter works: a Vec allocates.
    assert!(allocations(|| drop(Vec::<u8>::with_capacity(16))) > 0);
}
