//! Inference requests through the C API: inputs prepared once per step, and a request built
//! from them and handed to the server with the slot's callbacks (see `slot.rs`).

use std::ffi::{c_void, CString};

use super::ffi::{self, Api, ErrPtr, TsAllocator, TsRequest, TsResponse, MEMORY_CPU};
use super::server::Server;
use crate::tensor::InputTensor;

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

/// Builds a request for `step` with the callbacks `on_release`/`on_response` (their `userp`
/// is `userp`; the allocator's is `alloc_userp`) and hands it to the server. On error the
/// request is deleted and no callback will run.
///
/// # Safety
/// `userp` and `alloc_userp` must stay valid until every callback of the request has run,
/// and the step's data until the release callback.
#[allow(clippy::too_many_arguments)]
pub unsafe fn submit(
    server: &Server,
    model: &ModelTarget,
    step: &PreparedStep,
    seq: Option<SeqFields>,
    callbacks: Callbacks,
    before_submit: impl FnOnce(),
) -> Result<(), String> {
    let api = &*server.api;
    let mut request: *mut TsRequest = std::ptr::null_mut();
    let err = (api.request_new)(&mut request, server.raw, model.name.as_ptr(), model.version);
    api.check(err)
        .map_err(|e| format!("TRITONSERVER_InferenceRequestNew: {e}"))?;
    let setup = fill_request(api, server.allocator, request, model, step, seq, &callbacks);
    if let Err(e) = setup {
        // The server never saw the request; it is still the caller's to delete.
        let _ = api.check((api.request_delete)(request));
        return Err(e);
    }
    before_submit();
    // The request is complete; on success the server owns it until the release callback.
    let err = (api.server_infer_async)(server.raw, request, std::ptr::null_mut());
    if let Err(e) = api.check(err) {
        // A failed InferAsync leaves the request with the caller.
        let _ = api.check((api.request_delete)(request));
        return Err(format!("TRITONSERVER_ServerInferAsync: {e}"));
    }
    Ok(())
}

/// A request's callbacks and their context pointers.
#[derive(Clone, Copy)]
pub struct Callbacks {
    pub on_release: ffi::RequestReleaseFn,
    pub on_response: ffi::ResponseCompleteFn,
    pub userp: *mut c_void,
    pub alloc_userp: *mut c_void,
}

/// Flags, inputs, outputs and callbacks of a new request.
unsafe fn fill_request(
    api: &Api,
    allocator: *mut TsAllocator,
    request: *mut TsRequest,
    model: &ModelTarget,
    step: &PreparedStep,
    seq: Option<SeqFields>,
    cb: &Callbacks,
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
        (api.request_set_release_callback)(request, cb.on_release, cb.userp),
    )?;
    let err = (api.request_set_response_callback)(
        request,
        allocator,
        cb.alloc_userp,
        cb.on_response,
        cb.userp,
    );
    check("SetResponseCallback", err)
}

/// The response's error text, if it carries one (the error stays the response's).
///
/// # Safety
/// `response` must be a live response.
pub unsafe fn response_error(api: &Api, response: *mut TsResponse) -> Option<String> {
    let err = (api.response_error)(response);
    (!err.is_null()).then(|| api.error_text(err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DataType;

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
}
