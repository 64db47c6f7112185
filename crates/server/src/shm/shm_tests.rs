//! The server's shared memory extension against real client regions: register, status,
//! unregister, and an HTTP infer whose inputs and outputs live in regions.

use super::*;
use crate::execute::Env;
use crate::http::Method;
use crate::models::MODELS;
use crate::reply::Request;
use crate::routes::route;
use crate::state::Shared;
use inferperf_client::shm::system::{region_name, test_lock, Region};

fn shared() -> Shared {
    Shared::new(vec![None; MODELS.len()], vec![false; MODELS.len()])
}

fn call(shared: &Shared, method: Method, path: &str, body: &[u8]) -> (u16, String) {
    let mut out = Vec::new();
    let mut rng = 1u64;
    let mut env = Env {
        shared,
        rng: &mut rng,
    };
    let req = Request {
        method,
        path,
        inference_header_len: None,
        body,
    };
    let reply = route(&req, &mut env, &mut out);
    (reply.status, String::from_utf8_lossy(&out).into_owned())
}

fn register(shared: &Shared, region: &Region) -> (u16, String) {
    let body = json!({"key": region.key(), "offset": 0, "byte_size": region.len()});
    let path = format!("/v2/systemsharedmemory/region/{}/register", region.name());
    call(shared, Method::Post, &path, body.to_string().as_bytes())
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn register_status_unregister() {
    let _lock = test_lock();
    let s = shared();
    let region = Region::create(&region_name("srv"), 32).unwrap();
    assert_eq!(register(&s, &region).0, 200);
    let (status, again) = register(&s, &region);
    assert_eq!(status, 400);
    assert!(again.contains("already registered"), "{again}");
    let (status, body) = call(&s, Method::Get, "/v2/systemsharedmemory/status", b"");
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list[0]["name"], region.name());
    assert_eq!(list[0]["key"], region.key());
    assert_eq!(list[0]["byte_size"], 32);
    let unknown = "/v2/systemsharedmemory/region/nope/status";
    assert_eq!(call(&s, Method::Get, unknown, b"").0, 400);
    let path = format!("/v2/systemsharedmemory/region/{}/unregister", region.name());
    assert_eq!(call(&s, Method::Post, &path, b"").0, 200);
    assert_eq!(s.shm.registered(), 0);
    // Error rows: (method, path, body, status).
    let rows: &[(Method, &str, &str, u16)] = &[
        (Method::Get, "/v2/systemsharedmemory/unregister", "", 405),
        (
            Method::Post,
            "/v2/systemsharedmemory/region/x/register",
            "{",
            400,
        ),
        (
            Method::Post,
            "/v2/systemsharedmemory/region/x/register",
            r#"{"key":"/inferperf_no_such_region","byte_size":4}"#,
            400,
        ),
        (Method::Get, "/v2/systemsharedmemory/other", "", 404),
    ];
    for (method, path, body, want) in rows {
        assert_eq!(
            call(&s, *method, path, body.as_bytes()).0,
            *want,
            "{path} {body}"
        );
    }
    // A size beyond the region is refused.
    let body = json!({"key": region.key(), "byte_size": 33}).to_string();
    let path = "/v2/systemsharedmemory/region/big/register";
    assert_eq!(call(&s, Method::Post, path, body.as_bytes()).0, 400);
}

#[test]
fn http_infer_reads_and_writes_regions() {
    let _lock = test_lock();
    let s = shared();
    let a: Vec<i32> = (0..16).collect();
    let b: Vec<i32> = (0..16).map(|x| 100 * x).collect();
    let in0 = Region::with_data(&region_name("IN0"), &i32_bytes(&a)).unwrap();
    let in1 = Region::with_data(&region_name("IN1"), &i32_bytes(&b)).unwrap();
    let out = Region::create(&region_name("OUT"), 128).unwrap();
    for r in [&in0, &in1, &out] {
        assert_eq!(register(&s, r).0, 200);
    }
    let tensor = |name: &str, region: &Region| {
        json!({"name": name, "datatype": "INT32", "shape": [1, 16], "parameters": {
            "shared_memory_region": region.name(), "shared_memory_byte_size": 64}})
    };
    let output = |name: &str, offset: u64| {
        json!({"name": name, "parameters": {"shared_memory_region": out.name(),
            "shared_memory_byte_size": 64, "shared_memory_offset": offset}})
    };
    let req = json!({"inputs": [tensor("INPUT0", &in0), tensor("INPUT1", &in1)],
        "outputs": [output("OUTPUT0", 0), output("OUTPUT1", 64)]});
    let (status, body) = call(
        &s,
        Method::Post,
        "/v2/models/simple/infer",
        req.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    let json: Value = serde_json::from_str(&body).unwrap();
    assert!(json["outputs"][0].get("data").is_none(), "{body}");
    assert!(json["outputs"][0].get("parameters").is_none(), "{body}");
    let sum: Vec<i32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let diff: Vec<i32> = a.iter().zip(&b).map(|(x, y)| x - y).collect();
    assert_eq!(out.read(0, 64).unwrap(), i32_bytes(&sum));
    assert_eq!(out.read(64, 64).unwrap(), i32_bytes(&diff));
    assert_eq!(s.shm.traffic(), (128, 128));
    assert_eq!(s.shm.output_regions(), vec![out.name().to_string()]);
    // An output region too small for the result fails the request.
    let small = json!({"inputs": [tensor("INPUT0", &in0), tensor("INPUT1", &in1)],
        "outputs": [{"name": "OUTPUT0", "parameters": {"shared_memory_region": out.name(),
            "shared_memory_byte_size": 8}}]});
    let (status, body) = call(
        &s,
        Method::Post,
        "/v2/models/simple/infer",
        small.to_string().as_bytes(),
    );
    assert_eq!(status, 400);
    assert!(body.contains("should be at least 64 bytes"), "{body}");
}

#[test]
fn grpc_tensors_in_regions() {
    use pb::infer_parameter::ParameterChoice as P;
    let _lock = test_lock();
    let s = shared();
    let input = Region::with_data(&region_name("gIN"), b"abcdefgh").unwrap();
    let out = Region::create(&region_name("gOUT"), 8).unwrap();
    for r in [&input, &out] {
        s.shm
            .register(r.name(), r.key(), 0, r.len() as u64)
            .unwrap();
    }
    let params = |region: &str, size: i64, offset: u64| {
        [
            ("shared_memory_region", P::StringParam(region.into())),
            ("shared_memory_byte_size", P::Int64Param(size)),
            ("shared_memory_offset", P::Uint64Param(offset)),
        ]
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                pb::InferParameter {
                    parameter_choice: Some(v),
                },
            )
        })
        .collect()
    };
    let req = pb::ModelInferRequest {
        inputs: vec![pb::model_infer_request::InferInputTensor {
            name: "IN".into(),
            parameters: params(input.name(), 4, 2),
            ..Default::default()
        }],
        outputs: vec![pb::model_infer_request::InferRequestedOutputTensor {
            name: "OUT".into(),
            parameters: params(out.name(), 4, 4),
        }],
        ..Default::default()
    };
    let staged = stage_grpc_inputs(&s.shm, &req).unwrap().unwrap();
    assert_eq!(staged.raw_input_contents, vec![b"cdef".to_vec()]);
    let mut response = pb::ModelInferResponse {
        outputs: vec![pb::model_infer_response::InferOutputTensor {
            name: "OUT".into(),
            ..Default::default()
        }],
        raw_output_contents: vec![b"WXYZ".to_vec()],
        ..Default::default()
    };
    write_grpc_outputs(&s.shm, &req, &mut response).unwrap();
    assert_eq!(response.raw_output_contents, vec![Vec::<u8>::new()]);
    assert_eq!(out.read(0, 8).unwrap(), b"\0\0\0\0WXYZ");
    // Out of range and negative references are errors, not panics.
    let mut bad = req.clone();
    bad.inputs[0].parameters = params(input.name(), 8, 4);
    assert!(stage_grpc_inputs(&s.shm, &bad).is_err());
    bad.inputs[0].parameters = params(input.name(), -1, 0);
    assert!(stage_grpc_inputs(&s.shm, &bad).is_err());
    bad.inputs[0].parameters = params("unknown", 1, 0);
    assert!(stage_grpc_inputs(&s.shm, &bad).is_err());
}

#[test]
fn grpc_status_lists_one_or_every_region() {
    let _lock = test_lock();
    let s = shared();
    let a = Region::create(&region_name("stA"), 16).unwrap();
    let b = Region::create(&region_name("stB"), 32).unwrap();
    for r in [&a, &b] {
        let q = pb::SystemSharedMemoryRegisterRequest {
            name: r.name().into(),
            key: r.key().into(),
            offset: 0,
            byte_size: r.len() as u64,
        };
        grpc_register(&s.shm, &q).unwrap();
    }
    let all = grpc_status(&s.shm, &pb::SystemSharedMemoryStatusRequest::default()).unwrap();
    assert_eq!(all.regions.len(), 2);
    let one = all.regions.get(b.name()).expect("region b listed");
    assert_eq!((one.key.as_str(), one.byte_size), (b.key(), 32));
    let q = pb::SystemSharedMemoryStatusRequest {
        name: a.name().into(),
    };
    let just_a = grpc_status(&s.shm, &q).unwrap();
    assert_eq!(just_a.regions.len(), 1);
    assert_eq!(just_a.regions[a.name()].byte_size, 16);
    let missing = pb::SystemSharedMemoryStatusRequest {
        name: "nope".into(),
    };
    assert!(grpc_status(&s.shm, &missing).unwrap_err().contains("nope"));
    grpc_unregister(&s.shm, &pb::SystemSharedMemoryUnregisterRequest::default());
    let none = grpc_status(&s.shm, &pb::SystemSharedMemoryStatusRequest::default()).unwrap();
    assert!(none.regions.is_empty());
}

#[test]
fn hostile_regions_are_errors_naming_the_region() {
    let _lock = test_lock();
    let s = shared();
    let region = Region::create(&region_name("hostile"), 64).unwrap();
    // Registering: offset + byte_size past the object, or past u64.
    let rows = [
        (
            json!({"key": region.key(), "offset": 60, "byte_size": 8}),
            "exceeds the 64 bytes",
        ),
        (
            json!({"key": region.key(), "offset": u64::MAX, "byte_size": 2}),
            "overflows",
        ),
        (
            json!({"key": region.key(), "offset": 0, "byte_size": u64::MAX}),
            "exceeds the 64 bytes",
        ),
    ];
    for (body, want) in rows {
        let path = "/v2/systemsharedmemory/region/evil/register";
        let (status, text) = call(&s, Method::Post, path, body.to_string().as_bytes());
        assert_eq!(status, 400, "{body}: {text}");
        assert!(
            text.contains("region 'evil'") && text.contains(want),
            "{text}"
        );
    }
    let q = pb::SystemSharedMemoryRegisterRequest {
        name: "evil".into(),
        key: region.key().into(),
        offset: 1,
        byte_size: u64::MAX,
    };
    let err = grpc_register(&s.shm, &q).unwrap_err();
    assert!(err.contains("region 'evil'"), "{err}");
    assert_eq!(s.shm.registered(), 0);
    // A reference past the region, then a region its owner shrank after registering: errors,
    // not a read past the mapping (which would be a SIGBUS).
    assert_eq!(register(&s, &region).0, 200);
    let infer = |offset: u64| {
        let t = |name: &str| {
            json!({"name": name, "datatype": "INT32", "shape": [1, 16], "parameters": {
                "shared_memory_region": region.name(), "shared_memory_byte_size": 64,
                "shared_memory_offset": offset}})
        };
        let req = json!({"inputs": [t("INPUT0"), t("INPUT1")]});
        call(
            &s,
            Method::Post,
            "/v2/models/simple/infer",
            req.to_string().as_bytes(),
        )
    };
    for offset in [1, u64::MAX] {
        let (status, text) = infer(offset);
        assert_eq!(status, 400, "{text}");
        assert!(text.contains(region.name()), "{text}");
    }
    assert_eq!(infer(0).0, 200);
    let key = std::ffi::CString::new(region.key()).unwrap();
    // SAFETY: opens the test's own region and shrinks it; the fd is closed at once.
    unsafe {
        let fd = libc::shm_open(key.as_ptr(), libc::O_RDWR, 0);
        assert!(fd >= 0);
        assert_eq!(libc::ftruncate(fd, 8), 0);
        libc::close(fd);
    }
    let (status, text) = infer(0);
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("shrank to 8 bytes"), "{text}");
    assert!(text.contains(region.name()), "{text}");
}
