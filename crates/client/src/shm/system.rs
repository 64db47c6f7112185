//! POSIX shared memory regions: `shm_open` + `ftruncate`, mapped read-write and
//! shared. A region created here belongs to this process alone: its name carries the pid and
//! a per-run nonce, `O_EXCL` refuses to reuse an existing one, and dropping it unmaps and
//! `shm_unlink`s it.
//!
//! Every live region is also listed in a lock-free list that `unlink_live_regions` walks
//! from the second-Ctrl-C signal handler, which exits without running destructors (the
//! region list registers it as the hook `signal::on_hard_exit` runs).

use std::ffi::CString;
use std::fs::File;
use std::os::fd::FromRawFd;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::OnceLock;

use memmap2::{Mmap, MmapMut, MmapOptions};

use crate::error::{Error, Result};

/// Prefix of every region name this client creates (then `<pid>_<nonce>_`).
pub const NAME_PREFIX: &str = "inferperf_";

/// The prefix of this process's region names: `inferperf_<pid>_<nonce>_`. The nonce tells
/// apart runs of a process that reuses a pid (containers) and is fixed for the process.
pub fn run_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as u64 ^ d.as_secs());
        let nonce = (nanos ^ (std::process::id() as u64).rotate_left(29)) & 0xff_ffff;
        format!("{NAME_PREFIX}{}_{nonce:06x}_", std::process::id())
    })
}

/// A name unique within the process: the run prefix, `label` without `/` and `\` (as
/// perf_analyzer strips them), and a sequence number.
pub fn region_name(label: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let clean: String = label.chars().filter(|c| !matches!(c, '/' | '\\')).collect();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}{clean}_{n}", run_prefix())
}

/// One entry of the live-region list. Entries are leaked (tens of bytes per region) so the
/// signal handler can read them without locks or frees.
struct LiveNode {
    key: CString,
    live: AtomicBool,
    next: *mut LiveNode,
}

static LIVE_HEAD: AtomicPtr<LiveNode> = AtomicPtr::new(ptr::null_mut());

fn push_live(key: CString) -> &'static LiveNode {
    crate::signal::on_hard_exit(unlink_live_regions);
    let node = Box::leak(Box::new(LiveNode {
        key,
        live: AtomicBool::new(true),
        next: ptr::null_mut(),
    }));
    let mut head = LIVE_HEAD.load(Ordering::Acquire);
    loop {
        node.next = head;
        match LIVE_HEAD.compare_exchange_weak(head, node, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return node,
            Err(now) => head = now,
        }
    }
}

/// Unlinks every region of this process still alive. Async-signal-safe: no allocation, no locks,
/// only `shm_unlink` (an `unlink` under `/dev/shm`).
pub fn unlink_live_regions() {
    let mut at = LIVE_HEAD.load(Ordering::Acquire);
    while !at.is_null() {
        // SAFETY: nodes are leaked, never freed, and fully written before being published.
        let node = unsafe { &*at };
        if node.live.swap(false, Ordering::AcqRel) {
            // SAFETY: the key is a valid NUL-terminated string.
            unsafe { libc::shm_unlink(node.key.as_ptr()) };
        }
        at = node.next;
    }
}

/// A shared memory region this process created.
pub struct Region {
    name: String,
    /// `"/" + name`, the `shm_open` key the server maps.
    key: String,
    len: usize,
    map: MmapMut,
    live: &'static LiveNode,
}

impl Region {
    /// Creates region `name` of `len` bytes (zero-filled). Fails if it already exists.
    pub fn create(name: &str, len: usize) -> Result<Region> {
        let key = format!("/{name}");
        let fail = |what: &str, e: std::io::Error| {
            Error::generic(format!("shared memory region '{key}': {what} failed: {e}"))
        };
        let c_key = CString::new(key.clone())
            .map_err(|_| Error::usage(format!("shared memory region '{key}': NUL in name")))?;
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
        let mode = libc::S_IRUSR | libc::S_IWUSR;
        // SAFETY: a valid C string; the returned fd is checked.
        let fd = unsafe { libc::shm_open(c_key.as_ptr(), flags, mode as libc::c_uint) };
        if fd < 0 {
            return Err(fail("shm_open", std::io::Error::last_os_error()));
        }
        // From here on the name exists: list it before anything else can fail.
        let live = push_live(c_key);
        // SAFETY: fd was just opened and is owned by the File from now on (closed on drop;
        // the mapping outlives it).
        let file = unsafe { File::from_raw_fd(fd) };
        // A zero-length mapping is refused by mmap: keep at least one byte.
        let mapped_len = len.max(1);
        let mapped = file
            .set_len(mapped_len as u64)
            .map_err(|e| fail("ftruncate", e))
            // SAFETY: the file was created here (O_EXCL); another process mapping it can only
            // change bytes, which are treated as plain data.
            .and_then(|_| {
                unsafe { MmapOptions::new().len(mapped_len).map_mut(&file) }
                    .map_err(|e| fail("mmap", e))
            });
        match mapped {
            Ok(map) => Ok(Region {
                name: name.to_string(),
                key,
                len,
                map,
                live,
            }),
            Err(e) => {
                unlink_node(live);
                Err(e)
            }
        }
    }

    /// A new region holding `data`.
    pub fn with_data(name: &str, data: &[u8]) -> Result<Region> {
        let mut region = Region::create(name, data.len())?;
        region.write(0, data)?;
        Ok(region)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Size in bytes (as registered with the server).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `data` into the region at `offset`.
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        let end = self.bounds(offset, data.len())?;
        self.map[offset..end].copy_from_slice(data);
        Ok(())
    }

    /// A second, read-only mapping of the region, which a load worker reads outputs from.
    /// It stays valid after the region is dropped (unlinked and unmapped here).
    pub fn view(&self) -> Result<RegionView> {
        let fail = |what: &str, e: std::io::Error| {
            Error::generic(format!(
                "shared memory region '{}': {what} failed: {e}",
                self.key
            ))
        };
        let c_key = CString::new(self.key.clone()).map_err(|_| {
            Error::usage(format!("shared memory region '{}': NUL in name", self.key))
        })?;
        // SAFETY: a valid C string; the returned fd is checked.
        let fd = unsafe { libc::shm_open(c_key.as_ptr(), libc::O_RDONLY, 0) };
        if fd < 0 {
            return Err(fail("shm_open", std::io::Error::last_os_error()));
        }
        // SAFETY: fd was just opened and is owned by the File (closed on drop; the mapping
        // outlives it).
        let file = unsafe { File::from_raw_fd(fd) };
        // SAFETY: a read-only shared mapping; the server changes its bytes, which are only
        // ever copied out as plain data. The length is what `create` mapped (at least 1).
        let map = unsafe { MmapOptions::new().len(self.map.len()).map(&file) }
            .map_err(|e| fail("mmap", e))?;
        Ok(RegionView { map, len: self.len })
    }

    /// `len` bytes at `offset`.
    pub fn read(&self, offset: usize, len: usize) -> Result<&[u8]> {
        let end = self.bounds(offset, len)?;
        Ok(&self.map[offset..end])
    }

    fn bounds(&self, offset: usize, len: usize) -> Result<usize> {
        offset
            .checked_add(len)
            .filter(|&end| end <= self.len)
            .ok_or_else(|| {
                Error::generic(format!(
                    "shared memory region '{}': {len} bytes at offset {offset} exceed its {} \
                     bytes",
                    self.name, self.len
                ))
            })
    }
}

/// A read-only mapping of a region (see [`Region::view`]); its bytes are the region's
/// `len` bytes.
pub struct RegionView {
    map: Mmap,
    len: usize,
}

impl AsRef<[u8]> for RegionView {
    fn as_ref(&self) -> &[u8] {
        &self.map[..self.len]
    }
}

fn unlink_node(node: &LiveNode) {
    if node.live.swap(false, Ordering::AcqRel) {
        // SAFETY: valid C string.
        unsafe { libc::shm_unlink(node.key.as_ptr()) };
    }
}

impl Drop for Region {
    /// Unlinks the name; the mapping is unmapped right after, when `map` drops.
    fn drop(&mut self) {
        unlink_node(self.live);
    }
}

/// Serialises the tests that create regions with the ones that unlink every live region.
#[cfg(any(test, feature = "test-support"))]
static TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub fn test_lock() -> std::sync::MutexGuard<'static, ()> {
    TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn dev_shm(name: &str) -> bool {
        Path::new("/dev/shm").join(name).exists()
    }

    #[test]
    fn create_write_read_and_unlink_on_drop() {
        let _lock = test_lock();
        let name = region_name("unit/in\\put");
        assert!(name.starts_with(run_prefix()));
        assert!(!name[run_prefix().len()..].contains('/'));
        let mut r = Region::create(&name, 16).unwrap();
        assert_eq!(r.key(), format!("/{name}"));
        assert!(dev_shm(&name));
        let view = r.view().unwrap();
        r.write(4, b"abcd").unwrap();
        assert_eq!(r.read(0, 8).unwrap(), b"\0\0\0\0abcd");
        // The read-only view sees writes made after it was mapped.
        assert_eq!(view.as_ref(), b"\0\0\0\0abcd\0\0\0\0\0\0\0\0");
        // Another mapping of the same key sees the bytes (what the server does).
        let on_disk = std::fs::read(Path::new("/dev/shm").join(&name)).unwrap();
        assert_eq!(&on_disk[4..8], b"abcd");
        drop(r);
        assert!(!dev_shm(&name));
        assert_eq!(
            &view.as_ref()[4..8],
            b"abcd",
            "the view outlives the region"
        );
    }

    #[test]
    fn out_of_range_access_is_an_error() {
        let _lock = test_lock();
        let mut r = Region::with_data(&region_name("range"), b"xyz").unwrap();
        let rows: &[(usize, usize)] = &[(0, 4), (3, 1), (usize::MAX, 2)];
        for &(offset, len) in rows {
            assert!(r.read(offset, len).is_err(), "{offset} {len}");
            assert!(
                r.write(offset, &vec![0; len.min(8)]).is_err(),
                "{offset} {len}"
            );
        }
        assert_eq!(r.read(1, 2).unwrap(), b"yz");
    }

    #[test]
    fn an_existing_name_is_refused_and_kept() {
        let _lock = test_lock();
        let name = region_name("excl");
        let first = Region::create(&name, 8).unwrap();
        let err = Region::create(&name, 8).err().unwrap();
        assert!(err.msg.contains("shm_open"), "{err}");
        // The failed attempt must not unlink the region that exists.
        assert!(dev_shm(&name));
        drop(first);
        assert!(!dev_shm(&name));
    }

    #[test]
    fn signal_cleanup_unlinks_live_regions_once() {
        let _lock = test_lock();
        let name = region_name("signal");
        let r = Region::create(&name, 0).unwrap();
        assert!(r.is_empty());
        unlink_live_regions();
        assert!(!dev_shm(&name));
        // Dropping afterwards must not unlink a name someone else may have created since.
        let again = Region::create(&name, 1).unwrap();
        drop(r);
        assert!(dev_shm(&name));
        drop(again);
    }
}
