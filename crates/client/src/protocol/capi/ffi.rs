//! Raw declarations of the Triton in-process server C API (`tritonserver.h`, API 1.x) and the
//! table of entry points resolved once from `libtritonserver.so`.
//!
//! Only the entry points perf_analyzer's C API service kind calls are bound. Every pointer is
//! resolved when the library is opened, so a missing symbol fails the run up front with its
//! name instead of at the first request.

use std::ffi::{c_char, c_int, c_void};

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use crate::error::{Error, Result};

/// Opaque C types: only ever handled through pointers.
macro_rules! opaque {
    ($($name:ident),*) => {$(
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}
opaque!(
    TsError,
    TsMessage,
    TsServer,
    TsOptions,
    TsRequest,
    TsResponse,
    TsAllocator,
    TsTrace
);

/// `TRITONSERVER_Error*`: null means success.
pub type ErrPtr = *mut TsError;

/// The API version this binding was written against: the major must match the library's, and
/// the library's minor must be at least this binding's (1.23 added `SetPriorityUInt64`, the newest
/// entry point bound here).
pub const API_MAJOR: u32 = 1;
pub const API_MINOR: u32 = 23;

/// `TRITONSERVER_Error_Code` values.
pub const ERROR_UNKNOWN: u32 = 0;
pub const ERROR_INTERNAL: u32 = 1;
pub const ERROR_NOT_FOUND: u32 = 2;
pub const ERROR_INVALID_ARG: u32 = 3;
pub const ERROR_UNAVAILABLE: u32 = 4;
pub const ERROR_UNSUPPORTED: u32 = 5;
pub const ERROR_ALREADY_EXISTS: u32 = 6;
pub const ERROR_CANCELLED: u32 = 7;

/// `TRITONSERVER_MemoryType::TRITONSERVER_MEMORY_CPU` (host memory).
pub const MEMORY_CPU: u32 = 0;

/// `TRITONSERVER_RequestFlag` bits.
pub const REQUEST_FLAG_SEQUENCE_START: u32 = 1;
pub const REQUEST_FLAG_SEQUENCE_END: u32 = 2;
/// `TRITONSERVER_ResponseCompleteFlag`: no more responses follow for the request.
pub const RESPONSE_COMPLETE_FINAL: u32 = 1;

/// `TRITONSERVER_ResponseAllocatorAllocFn_t`.
pub type AllocFn = unsafe extern "C" fn(
    allocator: *mut TsAllocator,
    tensor_name: *const c_char,
    byte_size: usize,
    memory_type: u32,
    memory_type_id: i64,
    userp: *mut c_void,
    buffer: *mut *mut c_void,
    buffer_userp: *mut *mut c_void,
    actual_memory_type: *mut u32,
    actual_memory_type_id: *mut i64,
) -> ErrPtr;
/// `TRITONSERVER_ResponseAllocatorReleaseFn_t`.
pub type ReleaseFn = unsafe extern "C" fn(
    allocator: *mut TsAllocator,
    buffer: *mut c_void,
    buffer_userp: *mut c_void,
    byte_size: usize,
    memory_type: u32,
    memory_type_id: i64,
) -> ErrPtr;
/// `TRITONSERVER_ResponseAllocatorStartFn_t`.
pub type StartFn = unsafe extern "C" fn(allocator: *mut TsAllocator, userp: *mut c_void) -> ErrPtr;
/// `TRITONSERVER_InferenceRequestReleaseFn_t`.
pub type RequestReleaseFn =
    unsafe extern "C" fn(request: *mut TsRequest, flags: u32, userp: *mut c_void);
/// `TRITONSERVER_InferenceResponseCompleteFn_t`.
pub type ResponseCompleteFn =
    unsafe extern "C" fn(response: *mut TsResponse, flags: u32, userp: *mut c_void);

/// Declares the entry-point table: field name, C symbol, C signature.
macro_rules! entry_points {
    ($($field:ident = $sym:literal : fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// Every bound entry point, resolved once; the library stays open while this lives.
        pub struct Api {
            $(pub $field: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
            /// Kept last so it is dropped after nothing can call into it any more.
            _library: Library,
        }

        impl Api {
            /// Resolves every entry point; the error names the first missing symbol.
            fn resolve(library: Library, path: &str) -> Result<Api> {
                $(
                    // SAFETY: the declared signature is the one tritonserver.h gives this
                    // symbol; the pointer is only used while `_library` keeps it mapped.
                    let $field = unsafe {
                        *library
                            .get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>($sym)
                            .map_err(|e| missing_symbol(path, $sym, e))?
                    };
                )*
                Ok(Api { $($field,)* _library: library })
            }
        }
    };
}

entry_points! {
    api_version = "TRITONSERVER_ApiVersion": fn(*mut u32, *mut u32) -> ErrPtr;
    error_new = "TRITONSERVER_ErrorNew": fn(u32, *const c_char) -> ErrPtr;
    error_code = "TRITONSERVER_ErrorCode": fn(ErrPtr) -> u32;
    error_message = "TRITONSERVER_ErrorMessage": fn(ErrPtr) -> *const c_char;
    error_delete = "TRITONSERVER_ErrorDelete": fn(ErrPtr);
    message_serialize_to_json = "TRITONSERVER_MessageSerializeToJson":
        fn(*mut TsMessage, *mut *const c_char, *mut usize) -> ErrPtr;
    message_delete = "TRITONSERVER_MessageDelete": fn(*mut TsMessage) -> ErrPtr;
    response_allocator_new = "TRITONSERVER_ResponseAllocatorNew":
        fn(*mut *mut TsAllocator, AllocFn, ReleaseFn, Option<StartFn>) -> ErrPtr;
    response_allocator_delete = "TRITONSERVER_ResponseAllocatorDelete":
        fn(*mut TsAllocator) -> ErrPtr;
    options_new = "TRITONSERVER_ServerOptionsNew": fn(*mut *mut TsOptions) -> ErrPtr;
    options_delete = "TRITONSERVER_ServerOptionsDelete": fn(*mut TsOptions) -> ErrPtr;
    options_set_model_repository_path = "TRITONSERVER_ServerOptionsSetModelRepositoryPath":
        fn(*mut TsOptions, *const c_char) -> ErrPtr;
    options_set_cuda_memory_pool_byte_size =
        "TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize":
        fn(*mut TsOptions, c_int, u64) -> ErrPtr;
    options_set_log_verbose = "TRITONSERVER_ServerOptionsSetLogVerbose":
        fn(*mut TsOptions, c_int) -> ErrPtr;
    options_set_log_info = "TRITONSERVER_ServerOptionsSetLogInfo":
        fn(*mut TsOptions, bool) -> ErrPtr;
    options_set_backend_directory = "TRITONSERVER_ServerOptionsSetBackendDirectory":
        fn(*mut TsOptions, *const c_char) -> ErrPtr;
    options_set_repo_agent_directory = "TRITONSERVER_ServerOptionsSetRepoAgentDirectory":
        fn(*mut TsOptions, *const c_char) -> ErrPtr;
    options_set_strict_model_config = "TRITONSERVER_ServerOptionsSetStrictModelConfig":
        fn(*mut TsOptions, bool) -> ErrPtr;
    options_set_min_supported_compute_capability =
        "TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability":
        fn(*mut TsOptions, f64) -> ErrPtr;
    server_new = "TRITONSERVER_ServerNew": fn(*mut *mut TsServer, *mut TsOptions) -> ErrPtr;
    server_delete = "TRITONSERVER_ServerDelete": fn(*mut TsServer) -> ErrPtr;
    server_is_live = "TRITONSERVER_ServerIsLive": fn(*mut TsServer, *mut bool) -> ErrPtr;
    server_is_ready = "TRITONSERVER_ServerIsReady": fn(*mut TsServer, *mut bool) -> ErrPtr;
    server_metadata = "TRITONSERVER_ServerMetadata":
        fn(*mut TsServer, *mut *mut TsMessage) -> ErrPtr;
    server_model_metadata = "TRITONSERVER_ServerModelMetadata":
        fn(*mut TsServer, *const c_char, i64, *mut *mut TsMessage) -> ErrPtr;
    server_model_config = "TRITONSERVER_ServerModelConfig":
        fn(*mut TsServer, *const c_char, i64, u32, *mut *mut TsMessage) -> ErrPtr;
    server_model_statistics = "TRITONSERVER_ServerModelStatistics":
        fn(*mut TsServer, *const c_char, i64, *mut *mut TsMessage) -> ErrPtr;
    server_unload_model = "TRITONSERVER_ServerUnloadModel":
        fn(*mut TsServer, *const c_char) -> ErrPtr;
    server_infer_async = "TRITONSERVER_ServerInferAsync":
        fn(*mut TsServer, *mut TsRequest, *mut TsTrace) -> ErrPtr;
    request_new = "TRITONSERVER_InferenceRequestNew":
        fn(*mut *mut TsRequest, *mut TsServer, *const c_char, i64) -> ErrPtr;
    request_delete = "TRITONSERVER_InferenceRequestDelete": fn(*mut TsRequest) -> ErrPtr;
    request_set_id = "TRITONSERVER_InferenceRequestSetId":
        fn(*mut TsRequest, *const c_char) -> ErrPtr;
    request_set_flags = "TRITONSERVER_InferenceRequestSetFlags": fn(*mut TsRequest, u32) -> ErrPtr;
    request_set_correlation_id = "TRITONSERVER_InferenceRequestSetCorrelationId":
        fn(*mut TsRequest, u64) -> ErrPtr;
    request_set_correlation_id_string = "TRITONSERVER_InferenceRequestSetCorrelationIdString":
        fn(*mut TsRequest, *const c_char) -> ErrPtr;
    request_set_priority_uint64 = "TRITONSERVER_InferenceRequestSetPriorityUInt64":
        fn(*mut TsRequest, u64) -> ErrPtr;
    request_set_timeout_microseconds = "TRITONSERVER_InferenceRequestSetTimeoutMicroseconds":
        fn(*mut TsRequest, u64) -> ErrPtr;
    request_add_input = "TRITONSERVER_InferenceRequestAddInput":
        fn(*mut TsRequest, *const c_char, u32, *const i64, u64) -> ErrPtr;
    request_append_input_data = "TRITONSERVER_InferenceRequestAppendInputData":
        fn(*mut TsRequest, *const c_char, *const c_void, usize, u32, i64) -> ErrPtr;
    request_add_requested_output = "TRITONSERVER_InferenceRequestAddRequestedOutput":
        fn(*mut TsRequest, *const c_char) -> ErrPtr;
    request_set_release_callback = "TRITONSERVER_InferenceRequestSetReleaseCallback":
        fn(*mut TsRequest, RequestReleaseFn, *mut c_void) -> ErrPtr;
    request_set_response_callback = "TRITONSERVER_InferenceRequestSetResponseCallback":
        fn(*mut TsRequest, *mut TsAllocator, *mut c_void, ResponseCompleteFn, *mut c_void)
            -> ErrPtr;
    response_delete = "TRITONSERVER_InferenceResponseDelete": fn(*mut TsResponse) -> ErrPtr;
    response_error = "TRITONSERVER_InferenceResponseError": fn(*mut TsResponse) -> ErrPtr;
    response_output_count = "TRITONSERVER_InferenceResponseOutputCount":
        fn(*mut TsResponse, *mut u32) -> ErrPtr;
    response_output = "TRITONSERVER_InferenceResponseOutput":
        fn(
            *mut TsResponse,
            u32,
            *mut *const c_char,
            *mut u32,
            *mut *const i64,
            *mut u64,
            *mut *const c_void,
            *mut usize,
            *mut u32,
            *mut i64,
            *mut *mut c_void
        ) -> ErrPtr;
}

fn missing_symbol(path: &str, symbol: &str, e: libloading::Error) -> Error {
    Error::generic(format!(
        "--triton-server-directory: {path} has no symbol {symbol} ({e}); it is not a \
         compatible libtritonserver.so"
    ))
}

impl Api {
    /// Opens `path` (`RTLD_NOW | RTLD_LOCAL`, as perf_analyzer does), resolves every entry
    /// point and checks the API version.
    pub fn load(path: &str) -> Result<Api> {
        // SAFETY: loading runs the library's initialisers; libtritonserver.so (or a stand-in
        // implementing the same API) has no requirements on the loading thread.
        let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
            Error::generic(format!(
                "--triton-server-directory: cannot load the Triton server library {path}: {e}"
            ))
        })?;
        let api = Api::resolve(library, path)?;
        let (mut major, mut minor) = (0u32, 0u32);
        // SAFETY: both out-pointers are valid for writes.
        let err = unsafe { (api.api_version)(&mut major, &mut minor) };
        api.check(err)
            .map_err(|e| Error::generic(format!("{path}: TRITONSERVER_ApiVersion: {e}")))?;
        check_api_version(path, major, minor)?;
        Ok(api)
    }

    /// Turns a returned `TRITONSERVER_Error*` into a result, deleting the error object.
    pub(crate) fn check(&self, err: ErrPtr) -> std::result::Result<(), String> {
        if err.is_null() {
            return Ok(());
        }
        Err(self.take_error(err))
    }

    /// The message of a non-null error, prefixed with its code name; the error is deleted.
    pub(crate) fn take_error(&self, err: ErrPtr) -> String {
        let text = self.error_text(err);
        // SAFETY: `err` is a live error object the caller owns; it is deleted once, here.
        unsafe { (self.error_delete)(err) };
        text
    }

    /// The message of a non-null error, prefixed with its code name; the error is left alone
    /// (an inference response owns its error object).
    pub(crate) fn error_text(&self, err: ErrPtr) -> String {
        // SAFETY: `err` is a live error object returned by the library; its message is copied
        // before anything can free it.
        unsafe {
            let code = (self.error_code)(err);
            let msg = (self.error_message)(err);
            let text = if msg.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(msg).to_string_lossy().into_owned()
            };
            format!("{}: {text}", error_code_name(code))
        }
    }
}

/// The library's API must be 1.x with x ≥ [`API_MINOR`].
pub fn check_api_version(path: &str, major: u32, minor: u32) -> Result<()> {
    if major != API_MAJOR || minor < API_MINOR {
        return Err(Error::generic(format!(
            "{path}: Triton server API version {major}.{minor} is not supported \
             (need {API_MAJOR}.x with x >= {API_MINOR})"
        )));
    }
    Ok(())
}

/// The name `TRITONSERVER_ErrorCodeString` would give a code.
pub fn error_code_name(code: u32) -> &'static str {
    match code {
        ERROR_UNKNOWN => "Unknown",
        ERROR_INTERNAL => "Internal",
        ERROR_NOT_FOUND => "Not found",
        ERROR_INVALID_ARG => "Invalid argument",
        ERROR_UNAVAILABLE => "Unavailable",
        ERROR_UNSUPPORTED => "Unsupported",
        ERROR_ALREADY_EXISTS => "Already exists",
        ERROR_CANCELLED => "Cancelled",
        _ => "Error",
    }
}

/// `TRITONSERVER_DataType` of a tensor datatype (the enum's order).
pub fn datatype_code(dt: crate::tensor::DataType) -> u32 {
    use crate::tensor::DataType as D;
    match dt {
        D::Bool => 1,
        D::U8 => 2,
        D::U16 => 3,
        D::U32 => 4,
        D::U64 => 5,
        D::I8 => 6,
        D::I16 => 7,
        D::I32 => 8,
        D::I64 => 9,
        D::F16 => 10,
        D::F32 => 11,
        D::F64 => 12,
        D::Bytes => 13,
        D::Bf16 => 14,
    }
}

/// The tensor datatype of a `TRITONSERVER_DataType` (`None` for INVALID or unknown codes).
pub fn datatype_of(code: u32) -> Option<crate::tensor::DataType> {
    use crate::tensor::DataType as D;
    const ORDER: [D; 14] = [
        D::Bool,
        D::U8,
        D::U16,
        D::U32,
        D::U64,
        D::I8,
        D::I16,
        D::I32,
        D::I64,
        D::F16,
        D::F32,
        D::F64,
        D::Bytes,
        D::Bf16,
    ];
    (code as usize)
        .checked_sub(1)
        .and_then(|i| ORDER.get(i))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DataType;

    #[test]
    fn datatype_codes_round_trip() {
        for code in 1..=14 {
            let dt = datatype_of(code).unwrap();
            assert_eq!(datatype_code(dt), code, "{dt:?}");
        }
        assert_eq!(datatype_of(0), None);
        assert_eq!(datatype_of(15), None);
        assert_eq!(datatype_code(DataType::F32), 11);
        assert_eq!(datatype_code(DataType::Bytes), 13);
    }

    #[test]
    fn api_version_rules() {
        let rows = [
            (1, 23, true),
            (1, 40, true),
            (1, 22, false),
            (2, 30, false),
            (0, 99, false),
        ];
        for (major, minor, ok) in rows {
            assert_eq!(
                check_api_version("lib.so", major, minor).is_ok(),
                ok,
                "{major}.{minor}"
            );
        }
        let e = check_api_version("/x/lib.so", 2, 0).unwrap_err();
        assert!(
            e.msg.contains("/x/lib.so") && e.msg.contains("2.0"),
            "{}",
            e.msg
        );
    }

    #[test]
    fn missing_library_names_the_path() {
        let e = Api::load("/nonexistent/dir/lib/libtritonserver.so")
            .err()
            .unwrap();
        assert!(
            e.msg.contains("/nonexistent/dir/lib/libtritonserver.so"),
            "{}",
            e.msg
        );
        assert_eq!(e.exit_code(), 99);
    }
}
