//! Responses' outputs: the host-memory response allocator (each slot reuses a few buffers)
//! and the copy of a response's outputs into an HTTP binary-style body, written into a
//! reused buffer without building JSON values.

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_void, CStr};
use std::io::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};

use super::ffi::{self, Api, ErrPtr, TsAllocator, TsResponse, MEMORY_CPU};

/// Buffers a slot keeps for its responses' outputs (a decoupled model may hold a few
/// responses at once; a model with more outputs than this falls back to `malloc`).
const CACHED: usize = 8;

/// One cached buffer; its address is the buffer's `userp`, so the release finds it.
struct Cell {
    buf: *mut u8,
    cap: usize,
    /// The cache that owns the cell and the cell's bit (set when taken).
    cache: *const BufCache,
    bit: u32,
}

/// A slot's output buffers: taken and given back through a bit mask, grown when an output
/// is larger than the buffer, freed when the slot is dropped.
pub struct BufCache {
    taken: AtomicU32,
    cells: [UnsafeCell<Cell>; CACHED],
}

// SAFETY: a cell is only touched by the thread that set its bit in `taken` (Acquire), until
// that thread clears it again (Release).
unsafe impl Sync for BufCache {}
unsafe impl Send for BufCache {}

impl Default for BufCache {
    fn default() -> BufCache {
        BufCache {
            taken: AtomicU32::new(0),
            cells: std::array::from_fn(|_| {
                UnsafeCell::new(Cell {
                    buf: std::ptr::null_mut(),
                    cap: 0,
                    cache: std::ptr::null(),
                    bit: 0,
                })
            }),
        }
    }
}

impl BufCache {
    /// A buffer of at least `size` bytes and its `userp` for [`host_release`] (null: it
    /// came from `malloc`).
    fn take(&self, size: usize) -> (*mut c_void, *mut c_void) {
        let mut seen = self.taken.load(Ordering::Relaxed);
        loop {
            let free = !seen & ((1u32 << CACHED) - 1);
            if free == 0 {
                // SAFETY: plain allocation, freed by `host_release` (null userp).
                return (unsafe { libc::malloc(size) }, std::ptr::null_mut());
            }
            let bit = free.trailing_zeros();
            match self.taken.compare_exchange_weak(
                seen,
                seen | (1 << bit),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break self.fill(bit, size),
                Err(now) => seen = now,
            }
        }
    }

    /// The cell `bit` (just taken) with room for `size` bytes.
    fn fill(&self, bit: u32, size: usize) -> (*mut c_void, *mut c_void) {
        let ptr = self.cells[bit as usize].get();
        // SAFETY: this thread owns the cell until it clears the bit.
        let cell = unsafe { &mut *ptr };
        if cell.cap < size {
            // SAFETY: the old buffer (or null) came from malloc and nobody else holds it.
            unsafe {
                libc::free(cell.buf.cast());
                cell.buf = libc::malloc(size).cast();
            }
            cell.cap = if cell.buf.is_null() { 0 } else { size };
        }
        cell.cache = self;
        cell.bit = bit;
        (cell.buf.cast(), ptr.cast())
    }
}

impl Drop for BufCache {
    fn drop(&mut self) {
        for cell in &mut self.cells {
            // SAFETY: every buffer was given back (the slot outlives its responses).
            unsafe { libc::free(cell.get_mut().buf.cast()) };
        }
    }
}

/// Allocator callback: host memory from the slot's [`BufCache`] (the request's allocator
/// `userp`), or from `malloc` without one; a zero-byte output gets no buffer.
pub(super) unsafe extern "C" fn host_alloc(
    _allocator: *mut TsAllocator,
    _tensor_name: *const c_char,
    byte_size: usize,
    _memory_type: u32,
    _memory_type_id: i64,
    userp: *mut c_void,
    buffer: *mut *mut c_void,
    buffer_userp: *mut *mut c_void,
    actual_memory_type: *mut u32,
    actual_memory_type_id: *mut i64,
) -> ErrPtr {
    // Nothing here can panic: pointer writes, atomics and libc calls.
    let (ptr, cell) = if byte_size == 0 {
        (std::ptr::null_mut(), std::ptr::null_mut())
    } else if userp.is_null() {
        (libc::malloc(byte_size), std::ptr::null_mut())
    } else {
        (*userp.cast::<BufCache>()).take(byte_size)
    };
    *buffer = ptr;
    *buffer_userp = cell;
    *actual_memory_type = MEMORY_CPU;
    *actual_memory_type_id = 0;
    std::ptr::null_mut()
}

/// Allocator release callback: gives back what `host_alloc` handed out.
pub(super) unsafe extern "C" fn host_release(
    _allocator: *mut TsAllocator,
    buffer: *mut c_void,
    buffer_userp: *mut c_void,
    _byte_size: usize,
    _memory_type: u32,
    _memory_type_id: i64,
) -> ErrPtr {
    if buffer_userp.is_null() {
        if !buffer.is_null() {
            libc::free(buffer);
        }
    } else {
        // SAFETY: a cell taken by `host_alloc`, still owned by this buffer.
        let cell = &*buffer_userp.cast::<Cell>();
        (*cell.cache)
            .taken
            .fetch_and(!(1u32 << cell.bit), Ordering::Release);
    }
    std::ptr::null_mut()
}

/// Appends a response's outputs as an HTTP binary-data body: the JSON header with
/// `binary_data_size` per output, then the raw bytes in order.
///
/// # Safety
/// `response` must be a live response.
pub(super) unsafe fn write_outputs(
    api: &Api,
    response: *mut TsResponse,
    body: &mut Vec<u8>,
) -> Result<(), String> {
    let mut count = 0u32;
    api.check((api.response_output_count)(response, &mut count))
        .map_err(|e| format!("TRITONSERVER_InferenceResponseOutputCount: {e}"))?;
    body.extend_from_slice(b"{\"outputs\":[");
    for i in 0..count {
        let o = raw_output(api, response, i)?;
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(b"{\"name\":");
        match o.name {
            Some(name) => json_str(body, name.to_bytes()),
            None => {
                let _ = write!(body, "\"output{i}\"");
            }
        }
        let _ = write!(body, ",\"datatype\":\"{}\",\"shape\":[", o.datatype.name());
        for (k, d) in o.shape.iter().enumerate() {
            let _ = write!(body, "{}{d}", if k > 0 { "," } else { "" });
        }
        let _ = write!(
            body,
            "],\"parameters\":{{\"binary_data_size\":{}}}}}",
            o.data.len()
        );
    }
    body.extend_from_slice(b"]}");
    for i in 0..count {
        body.extend_from_slice(raw_output(api, response, i)?.data);
    }
    Ok(())
}

/// A JSON string literal of `s` (names are UTF-8 in practice; other bytes pass through).
fn json_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f => {
                let _ = write!(out, "\\u{b:04x}");
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// One output as read from a response (borrowed until the response is deleted).
struct RawOutput<'a> {
    name: Option<&'a CStr>,
    datatype: crate::tensor::DataType,
    shape: &'a [i64],
    data: &'a [u8],
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
    let name = (!name.is_null()).then(|| CStr::from_ptr(name));
    let shown = || name.map_or_else(|| format!("output{index}"), |n| n.to_string_lossy().into());
    let datatype = ffi::datatype_of(datatype)
        .ok_or_else(|| format!("output '{}': unknown datatype code {datatype}", shown()))?;
    if mem != MEMORY_CPU && size > 0 {
        return Err(format!(
            "output '{}': not in host memory (memory type {mem})",
            shown()
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
