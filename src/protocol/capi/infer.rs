//! Inference through the C API: requests built from pre-encoded inputs, a response allocator
//! that hands out host memory, and the completion callbacks.
//!
//! Triton calls the callbacks on its own threads. They copy what the worker needs out of the
//! response (outputs only when asked), send it over a crossbeam channel and wake the owning
//! worker's `mio::Waker`, so all bookkeeping stays on the worker thread. No callback unwinds
//! into C: each body runs under `catch_unwind`.

use std::ffi::{c_char, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use mio::Waker;

use super::ffi::{
    self, Api, ErrPtr, TsAllocator, TsRequest, TsResponse, MEMORY_CPU, RESPONSE_COMPLETE_FINAL,
};
use super::server::Server;
use crate::clock::Clock;
use crate::tensor::{DataType, InputTensor};

/// `TRITONSERVER_REQUEST_RELEASE_ALL`: the request object is no longer used by the server.
const REQUEST_RELEASE_ALL: u32 = 1;

/// One input tensor ready for `AddInput` + `AppendInputData` (built once per input step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedInput {
    pub name: CString,
    pub datatype: u32,
    pub shape: Vec<i64>,
    pub data: Vec<u8>,
}

/// The inputs of one request.
pub type PreparedStep = Vec<PreparedInput>;

/// Converts an input step; a name with a NUL byte is an error naming the input.
pub fn prepare_step(inputs: &[InputTensor]) -> Result<PreparedStep, String> {
    inputs
        .iter()
        .map(|t| {
            Ok(PreparedInput {
                name: CString::new(t.name.as_str())
                    .map_err(|_| format!("input {:?}: name contains a NUL byte", t.name))?,
                datatype: ffi::datatype_code(t.datatype),
                shape: t.shape.clone(),
                data: t.data.clone(),
            })
        })
        .collect()
}

/// The model every request of a run targets, and the outputs it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelTarget {
    pub name: CString,
    /// -1: the server's choice.
    pub version: i64,
    pub outputs: Vec<CString>,
}

/// Sequence fields of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqFields {
    pub correlation_id: u64,
    pub start: bool,
    pub end: bool,
}

/// One response (or the final flag of a decoupled request) as the worker sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    /// The pool slot whose request this is.
    pub slot: usize,
    /// Clock ns when the callback ran.
    pub at_ns: u64,
    /// No more responses follow for this request.
    pub last: bool,
    /// A response object came (false: only the final flag, a decoupled model's end).
    pub has_response: bool,
    /// The response failed (or could not be read): Triton's message.
    pub error: Option<String>,
    /// The outputs as an HTTP binary-style body (JSON header + raw bytes), when kept.
    pub body: Vec<u8>,
}

/// What the callbacks of one pool share: where completions go, and how many callbacks are
/// still owed (so the pool knows when its slot contexts may be freed).
pub struct Notifier {
    api: Arc<Api>,
    tx: Sender<Completion>,
    waker: Arc<Waker>,
    clock: Clock,
    keep_outputs: bool,
    /// Callbacks still to come: 2 per request in the server (the release, and the final
    /// response).
    owed: AtomicUsize,
}

impl Notifier {
    pub fn new(
        server: &Server,
        tx: Sender<Completion>,
        waker: Arc<Waker>,
        clock: Clock,
        keep_outputs: bool,
    ) -> Arc<Notifier> {
        Arc::new(Notifier {
            api: server.api.clone(),
            tx,
            waker,
            clock,
            keep_outputs,
            owed: AtomicUsize::new(0),
        })
    }

    /// Waits up to `limit` for every callback owed; false if some are still missing.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while self.owed.load(Ordering::Acquire) > 0 {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    pub fn owed(&self) -> usize {
        self.owed.load(Ordering::Acquire)
    }
}

/// A slot's callback context: its address is the requests' `userp`, so it must stay put (it
/// is boxed) and alive until every callback owed has run.
pub struct SlotCtx {
    notifier: Arc<Notifier>,
    slot: usize,
}

impl SlotCtx {
    pub fn new(notifier: Arc<Notifier>, slot: usize) -> Box<SlotCtx> {
        Box::new(SlotCtx { notifier, slot })
    }
}

/// Builds a request for `step` and hands it to the server. On error nothing is owed: the
/// request was deleted and no callback will run.
pub fn infer_async(
    server: &Server,
    model: &ModelTarget,
    step: &PreparedStep,
    seq: Option<SeqFields>,
    ctx: &SlotCtx,
) -> Result<(), String> {
    let api = &*server.api;
    let mut request: *mut TsRequest = std::ptr::null_mut();
    // SAFETY: `request` receives a request we own; the name outlives the call.
    let err =
        unsafe { (api.request_new)(&mut request, server.raw, model.name.as_ptr(), model.version) };
    api.check(err)
        .map_err(|e| format!("TRITONSERVER_InferenceRequestNew: {e}"))?;
    let userp = (ctx as *const SlotCtx).cast_mut().cast::<c_void>();
    // SAFETY: `request` is live; the input data and names live in the pool's steps, which
    // outlive the request (the pool waits for every release before it drops them); `userp`
    // stays valid for the same reason.
    let setup = unsafe { fill_request(api, server.allocator, request, model, step, seq, userp) };
    if let Err(e) = setup {
        // SAFETY: the server never saw the request; we still own it.
        let _ = api.check(unsafe { (api.request_delete)(request) });
        return Err(e);
    }
    ctx.notifier.owed.fetch_add(2, Ordering::AcqRel);
    // SAFETY: the request is complete; on success the server owns it until the release
    // callback.
    let err = unsafe { (api.server_infer_async)(server.raw, request, std::ptr::null_mut()) };
    if let Err(e) = api.check(err) {
        ctx.notifier.owed.fetch_sub(2, Ordering::AcqRel);
        // SAFETY: a failed InferAsync leaves the request with the caller.
        let _ = api.check(unsafe { (api.request_delete)(request) });
        return Err(format!("TRITONSERVER_ServerInferAsync: {e}"));
    }
    Ok(())
}

/// Flags, inputs, outputs and callbacks of a new request.
unsafe fn fill_request(
    api: &Api,
    allocator: *mut TsAllocator,
    request: *mut TsRequest,
    model: &ModelTarget,
    step: &PreparedStep,
    seq: Option<SeqFields>,
    userp: *mut c_void,
) -> Result<(), String> {
    let check = |what: &str, err: ErrPtr| api.check(err).map_err(|e| format!("{what}: {e}"));
    if let Some(s) = seq {
        let flags = (u32::from(s.start) * ffi::REQUEST_FLAG_SEQUENCE_START)
            | (u32::from(s.end) * ffi::REQUEST_FLAG_SEQUENCE_END);
        check("SetFlags", (api.request_set_flags)(request, flags))?;
        check(
            "SetCorrelationId",
            (api.request_set_correlation_id)(request, s.correlation_id),
        )?;
    }
    for input in step {
        let name = input.name.as_ptr();
        let (shape, dims) = (input.shape.as_ptr(), input.shape.len() as u64);
        check(
            "AddInput",
            (api.request_add_input)(request, name, input.datatype, shape, dims),
        )?;
        let data = input.data.as_ptr().cast::<c_void>();
        let err =
            (api.request_append_input_data)(request, name, data, input.data.len(), MEMORY_CPU, 0);
        check("AppendInputData", err)?;
    }
    for output in &model.outputs {
        check(
            "AddRequestedOutput",
            (api.request_add_requested_output)(request, output.as_ptr()),
        )?;
    }
    check(
        "SetReleaseCallback",
        (api.request_set_release_callback)(request, on_release, userp),
    )?;
    let err = (api.request_set_response_callback)(
        request,
        allocator,
        std::ptr::null_mut(),
        on_response,
        userp,
    );
    check("SetResponseCallback", err)
}

/// Release callback: the server is done with the request object.
unsafe extern "C" fn on_release(request: *mut TsRequest, flags: u32, userp: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if flags & REQUEST_RELEASE_ALL == 0 || userp.is_null() {
            return;
        }
        // SAFETY: `userp` is the slot context given at setup, alive while callbacks are owed.
        let notifier = unsafe { &*userp.cast::<SlotCtx>() }.notifier.clone();
        // SAFETY: the server released the request: it is ours to delete.
        let _ = notifier
            .api
            .check(unsafe { (notifier.api.request_delete)(request) });
        notifier.owed.fetch_sub(1, Ordering::AcqRel);
    }));
}

/// Response callback: copy out, delete the response, tell the worker.
unsafe extern "C" fn on_response(response: *mut TsResponse, flags: u32, userp: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if userp.is_null() {
            return;
        }
        // SAFETY: as in `on_release`; the context is read before the owed count drops.
        let (notifier, slot) = unsafe {
            let ctx = &*userp.cast::<SlotCtx>();
            (ctx.notifier.clone(), ctx.slot)
        };
        let last = flags & RESPONSE_COMPLETE_FINAL != 0;
        let mut done = Completion {
            slot,
            at_ns: notifier.clock.now_ns(),
            last,
            has_response: !response.is_null(),
            ..Completion::default()
        };
        if !response.is_null() {
            // SAFETY: the response is ours until deleted, and deleted once, after reading.
            unsafe {
                read_response(&notifier, response, &mut done);
                let _ = notifier.api.check((notifier.api.response_delete)(response));
            }
        }
        let _ = notifier.tx.send(done);
        let _ = notifier.waker.wake();
        if last {
            notifier.owed.fetch_sub(1, Ordering::AcqRel);
        }
    }));
}

/// The response's error, and its outputs when the pool keeps them.
unsafe fn read_response(n: &Notifier, response: *mut TsResponse, done: &mut Completion) {
    let err = (n.api.response_error)(response);
    if !err.is_null() {
        done.error = Some(n.api.error_text(err));
        return;
    }
    if n.keep_outputs {
        if let Err(e) = outputs_body(&n.api, response, &mut done.body) {
            done.error = Some(e);
        }
    }
}

/// One output as read from a response (borrowed until the response is deleted).
struct RawOutput<'a> {
    name: String,
    datatype: DataType,
    shape: &'a [i64],
    data: &'a [u8],
}

/// Writes the outputs as an HTTP binary-data response: the JSON header with
/// `binary_data_size` per output, then the raw bytes in order.
unsafe fn outputs_body(
    api: &Api,
    response: *mut TsResponse,
    body: &mut Vec<u8>,
) -> Result<(), String> {
    let mut count = 0u32;
    api.check((api.response_output_count)(response, &mut count))
        .map_err(|e| format!("TRITONSERVER_InferenceResponseOutputCount: {e}"))?;
    let mut outputs = Vec::with_capacity(count as usize);
    for i in 0..count {
        outputs.push(raw_output(api, response, i)?);
    }
    let header: Vec<serde_json::Value> = outputs
        .iter()
        .map(|o| {
            serde_json::json!({
                "name": o.name,
                "datatype": o.datatype.name(),
                "shape": o.shape,
                "parameters": {"binary_data_size": o.data.len()},
            })
        })
        .collect();
    body.extend_from_slice(
        serde_json::json!({ "outputs": header })
            .to_string()
            .as_bytes(),
    );
    for o in &outputs {
        body.extend_from_slice(o.data);
    }
    Ok(())
}

unsafe fn raw_output<'a>(
    api: &Api,
    response: *mut TsResponse,
    index: u32,
) -> Result<RawOutput<'a>, String> {
    let (mut name, mut datatype, mut shape, mut dims): (*const c_char, u32, *const i64, u64) =
        (std::ptr::null(), 0, std::ptr::null(), 0);
    let (mut base, mut size, mut mem, mut mem_id, mut userp): (
        *const c_void,
        usize,
        u32,
        i64,
        *mut c_void,
    ) = (std::ptr::null(), 0, 0, 0, std::ptr::null_mut());
    let err = (api.response_output)(
        response,
        index,
        &mut name,
        &mut datatype,
        &mut shape,
        &mut dims,
        &mut base,
        &mut size,
        &mut mem,
        &mut mem_id,
        &mut userp,
    );
    api.check(err)
        .map_err(|e| format!("TRITONSERVER_InferenceResponseOutput {index}: {e}"))?;
    let name = if name.is_null() {
        format!("output{index}")
    } else {
        std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned()
    };
    let datatype = ffi::datatype_of(datatype)
        .ok_or_else(|| format!("output '{name}': unknown datatype code {datatype}"))?;
    if mem != MEMORY_CPU && size > 0 {
        return Err(format!(
            "output '{name}': not in host memory (memory type {mem})"
        ));
    }
    let shape = if shape.is_null() || dims == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(shape, dims as usize)
    };
    let data = if base.is_null() || size == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(base.cast::<u8>(), size)
    };
    Ok(RawOutput {
        name,
        datatype,
        shape,
        data,
    })
}

/// Allocator callback: host memory from `malloc` (a zero-byte output gets no buffer).
pub(super) unsafe extern "C" fn host_alloc(
    _allocator: *mut TsAllocator,
    _tensor_name: *const c_char,
    byte_size: usize,
    _memory_type: u32,
    _memory_type_id: i64,
    _userp: *mut c_void,
    buffer: *mut *mut c_void,
    buffer_userp: *mut *mut c_void,
    actual_memory_type: *mut u32,
    actual_memory_type_id: *mut i64,
) -> ErrPtr {
    // No Rust code here can panic: plain pointer writes and a libc call.
    let ptr = if byte_size == 0 {
        std::ptr::null_mut()
    } else {
        libc::malloc(byte_size)
    };
    *buffer = ptr;
    *buffer_userp = std::ptr::null_mut();
    *actual_memory_type = MEMORY_CPU;
    *actual_memory_type_id = 0;
    std::ptr::null_mut()
}

/// Allocator release callback: frees what `host_alloc` gave.
pub(super) unsafe extern "C" fn host_release(
    _allocator: *mut TsAllocator,
    buffer: *mut c_void,
    _buffer_userp: *mut c_void,
    _byte_size: usize,
    _memory_type: u32,
    _memory_type_id: i64,
) -> ErrPtr {
    if !buffer.is_null() {
        libc::free(buffer);
    }
    std::ptr::null_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_steps_keep_names_types_and_data() {
        let inputs = vec![InputTensor {
            name: "INPUT0".into(),
            datatype: DataType::F32,
            shape: vec![1, 2],
            data: vec![0; 8],
        }];
        let step = prepare_step(&inputs).unwrap();
        assert_eq!(step[0].name.to_str().unwrap(), "INPUT0");
        assert_eq!(
            (step[0].datatype, step[0].shape.clone(), step[0].data.len()),
            (11, vec![1, 2], 8)
        );
        let bad = vec![InputTensor {
            name: "IN\0".into(),
            ..inputs[0].clone()
        }];
        assert!(prepare_step(&bad).unwrap_err().contains("NUL"));
    }

    #[test]
    fn host_allocator_hands_out_and_frees_host_memory() {
        let (mut buf, mut userp, mut mem, mut id) =
            (std::ptr::null_mut(), std::ptr::null_mut(), 9u32, 9i64);
        let (none, no_user) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: every out-pointer is valid; the buffer is freed by `host_release`.
        unsafe {
            let err = host_alloc(
                none,
                std::ptr::null(),
                16,
                2,
                0,
                no_user,
                &mut buf,
                &mut userp,
                &mut mem,
                &mut id,
            );
            assert!(err.is_null() && !buf.is_null());
            assert_eq!((mem, id), (MEMORY_CPU, 0));
            assert!(host_release(none, buf, userp, 16, mem, id).is_null());
            let err = host_alloc(
                none,
                std::ptr::null(),
                0,
                0,
                0,
                no_user,
                &mut buf,
                &mut userp,
                &mut mem,
                &mut id,
            );
            assert!(err.is_null() && buf.is_null());
        }
    }
}
