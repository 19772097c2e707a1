//! A process-wide free-list of dense value buffers. A training step allocates and frees
//! dozens of n×1024 matrices (tens of MB each); fresh allocations of that size are fresh
//! mappings, so every step paid page faults and the kernel's zeroing for each of them.
//! The runners ([`Executor`](crate::exec::Executor), the interpreter) hand a value's
//! buffer here when its last reader is done ([`recycle_value`]);
//! [`Tensor::zeros`](super::Tensor::zeros) and [`Tensor::scratch`](super::Tensor::scratch)
//! draw from here first. Below `value.rs`: values reach the list through [`Recyclable`],
//! so this file names no value type (issue 54 item 6).
//!
//! Rules: only buffers of at least [`MIN_LEN`] floats are kept (malloc serves small ones
//! well); a request of `len` takes the smallest kept buffer whose capacity is in
//! `len..=len + len/4` (subgraph sizes differ from step to step by a few percent); the
//! kept bytes never exceed the capacity ([`set_capacity`], default
//! [`DEFAULT_CAPACITY`]); when a new buffer would exceed it, the least recently kept
//! buffers are released first. A buffer handed out always holds initialised `f32`s
//! (zeroed by `Tensor::zeros`, stale values for `Tensor::scratch`), so reuse never exposes
//! uninitialised memory. One mutex guards the list: a take or a give is a few map
//! operations, negligible next to filling the buffer.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Smallest buffer kept, in floats (256 KiB).
pub const MIN_LEN: usize = 64 * 1024;

/// Default cap on the kept bytes (1 GiB: a few times the peak of the JPDC Table-3 step).
pub const DEFAULT_CAPACITY: usize = 1 << 30;

struct FreeList {
    /// Buffers by capacity (floats), each with the stamp of when it was kept.
    by_cap: BTreeMap<usize, Vec<(u64, Vec<f32>)>>,
    bytes: usize,
    capacity: usize,
    stamp: u64,
}

static FREE: Mutex<FreeList> = Mutex::new(FreeList {
    by_cap: BTreeMap::new(),
    bytes: 0,
    capacity: DEFAULT_CAPACITY,
    stamp: 0,
});

fn lock() -> std::sync::MutexGuard<'static, FreeList> {
    // The list holds plain buffers: a panic elsewhere cannot leave it inconsistent.
    FREE.lock().unwrap_or_else(|p| p.into_inner())
}

impl FreeList {
    fn take(&mut self, len: usize) -> Option<Vec<f32>> {
        let c = *self.by_cap.range(len..=len + len / 4).next()?.0;
        let list = self.by_cap.get_mut(&c).expect("present");
        let (_, buf) = list.pop().expect("non-empty lists only");
        if list.is_empty() {
            self.by_cap.remove(&c);
        }
        self.bytes -= buf.capacity() * 4;
        Some(buf)
    }

    fn give(&mut self, buf: Vec<f32>) {
        let bytes = buf.capacity() * 4;
        if bytes > self.capacity {
            return;
        }
        while self.bytes + bytes > self.capacity && self.evict_oldest() {}
        self.stamp += 1;
        self.bytes += bytes;
        self.by_cap
            .entry(buf.capacity())
            .or_default()
            .push((self.stamp, buf));
    }

    fn evict_oldest(&mut self) -> bool {
        let oldest = self
            .by_cap
            .iter()
            .flat_map(|(&c, v)| v.iter().enumerate().map(move |(k, e)| (e.0, c, k)))
            .min();
        let Some((_, c, k)) = oldest else {
            return false;
        };
        let list = self.by_cap.get_mut(&c).expect("present");
        let (_, buf) = list.swap_remove(k);
        if list.is_empty() {
            self.by_cap.remove(&c);
        }
        self.bytes -= buf.capacity() * 4;
        true
    }
}

/// Sets the cap on kept bytes (0 disables keeping); releases buffers above it now.
pub fn set_capacity(bytes: usize) {
    let mut f = lock();
    f.capacity = bytes;
    while f.bytes > f.capacity && f.evict_oldest() {}
}

/// The cap on kept bytes as it was when made, restored when dropped (what a phase that
/// changes the cap for a while — an out-of-core pass, a streamed chunk — holds).
pub struct CapacityGuard {
    before: usize,
}

impl CapacityGuard {
    /// Remembers the cap now.
    pub fn new() -> CapacityGuard {
        CapacityGuard { before: capacity() }
    }

    /// Raises the cap to at least the remembered one plus `bytes`.
    pub fn hold_more(&self, bytes: usize) {
        let want = self.before.saturating_add(bytes);
        if capacity() < want {
            set_capacity(want);
        }
    }
}

impl Default for CapacityGuard {
    fn default() -> CapacityGuard {
        CapacityGuard::new()
    }
}

impl Drop for CapacityGuard {
    fn drop(&mut self) {
        set_capacity(self.before);
    }
}

/// The cap on kept bytes.
pub fn capacity() -> usize {
    lock().capacity
}

/// Bytes currently kept.
pub fn kept_bytes() -> usize {
    lock().bytes
}

/// Releases every kept buffer.
pub fn clear() {
    let mut f = lock();
    f.by_cap.clear();
    f.bytes = 0;
}

/// A kept buffer able to hold `len` floats without reallocating (its contents are stale
/// but initialised), or `None`.
pub fn take(len: usize) -> Option<Vec<f32>> {
    if len < MIN_LEN {
        return None;
    }
    lock().take(len)
}

/// Keeps `buf` for a later [`take`], or drops it (too small, or over the cap).
pub fn give(buf: Vec<f32>) {
    if buf.capacity() >= MIN_LEN {
        lock().give(buf);
    }
}

/// A value that may own a dense buffer to hand back (`Value`, in `value.rs`).
pub trait Recyclable {
    /// The buffer, when this reference is the only one to it; None otherwise (a shared
    /// value is simply dropped by this reference).
    fn into_buffer(self) -> Option<Vec<f32>>;
}

/// Hands a dead value's buffers to the free-list when nothing else shares them.
pub fn recycle_value<V: Recyclable>(v: V) {
    if let Some(buf) = v.into_buffer() {
        give(buf);
    }
}

/// `len` floats whose contents are unspecified (a recycled buffer's stale values, or
/// zeros): [`Tensor::scratch`](super::Tensor::scratch)'s buffer.
pub(crate) fn scratch(len: usize) -> Vec<f32> {
    match take(len) {
        Some(mut buf) => {
            // Stale values are initialised f32s: truncating or growing within the
            // capacity writes no uninitialised memory into view.
            if buf.len() >= len {
                buf.truncate(len);
            } else {
                buf.resize(len, 0.0);
            }
            buf
        }
        None => fresh(len),
    }
}

/// Buffers at least this large (bytes) ask for transparent huge pages.
const HUGE_MIN_BYTES: usize = 4 << 20;

/// `len` zeros in a new buffer; a large one backed by transparent huge pages where the
/// kernel has them ([`advise_huge`]). A buffer the free-list would keep gets
/// [`headroom`] beyond `len` (zero pages the kernel maps only when written), so that
/// the next step's value, a few rows larger, takes it instead of faulting in a new one:
/// without it every step that set a new largest subgraph allocated all its buffers
/// afresh (a 1-thread GraphSAGE step on Kronecker 20: 310–370 ms against 112).
fn fresh(len: usize) -> Vec<f32> {
    let mut buf = vec![0.0; len + headroom(len)];
    buf.truncate(len);
    advise_huge(&buf, len);
    buf
}

/// The spare capacity of a fresh recyclable buffer of `len` floats: 1/16 (within the
/// quarter a [`take`] accepts), none below [`MIN_LEN`].
fn headroom(len: usize) -> usize {
    if len < MIN_LEN {
        0
    } else {
        len / 16
    }
}

/// Asks Linux to back the 2 MiB-aligned interior of `buf`'s first `len` floats of
/// capacity with transparent huge pages (`MADV_HUGEPAGE`; the machine's THP setting is
/// usually `madvise`, so nothing is huge unless asked). The step's n × 1024 values are
/// 24 MiB: with 4 KiB pages every pass over one walks 6,000 page-table entries, more than
/// the TLB holds. A hint: refused or unsupported, nothing changes.
fn advise_huge(buf: &Vec<f32>, len: usize) {
    const HUGE: usize = 2 << 20;
    let bytes = len.min(buf.capacity()) * 4;
    if bytes < HUGE_MIN_BYTES {
        return;
    }
    let start = buf.as_ptr() as usize;
    let (lo, hi) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
    if hi <= lo {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: [lo, hi) lies inside the buffer's allocation (its first `bytes` bytes of
    // capacity), which this process owns; MADV_HUGEPAGE changes how pages are backed,
    // never their contents.
    unsafe {
        libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
    }
}

/// Buffers of a recycled [`Tensor::zeros`](super::Tensor::zeros) start zeroed.
pub(crate) fn zeroed(len: usize) -> Vec<f32> {
    match take(len) {
        Some(mut buf) => {
            buf.clear();
            buf.resize(len, 0.0);
            buf
        }
        None => fresh(len),
    }
}

/// A copy of `src` in a recycled buffer when one fits.
pub(crate) fn copied(src: &[f32]) -> Vec<f32> {
    match take(src.len()) {
        Some(mut buf) => {
            buf.clear();
            buf.extend_from_slice(src);
            buf
        }
        None => {
            let mut buf = Vec::with_capacity(src.len() + headroom(src.len()));
            advise_huge(&buf, src.len());
            buf.extend_from_slice(src);
            buf
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The free-list is process-wide and tests run in parallel: each test uses lengths
    // no other test (and no other code in this test binary) requests.

    #[test]
    fn the_cap_releases_the_oldest_buffers_first() {
        let mut f = FreeList {
            by_cap: BTreeMap::new(),
            bytes: 0,
            capacity: 4 * 300,
            stamp: 0,
        };
        f.give(Vec::with_capacity(100)); // oldest
        f.give(Vec::with_capacity(110));
        f.give(Vec::with_capacity(120)); // 330 floats: the 100 goes
        assert_eq!(f.bytes, 4 * 230);
        assert_eq!(f.by_cap.keys().copied().collect::<Vec<_>>(), vec![110, 120]);
        f.give(Vec::with_capacity(400)); // larger than the cap: not kept
        assert_eq!(f.by_cap.len(), 2);
        assert_eq!(f.take(108).map(|b| b.capacity()), Some(110));
        assert_eq!(f.take(120).map(|b| b.capacity()), Some(120));
        assert_eq!(f.bytes, 0);
    }
}
