//! `AlignedVec`: floats that start on a cache line. A `Vec<f32>` is only as aligned as the
//! allocator makes it (large blocks start 16 bytes into a line), and a vector load from a
//! row that straddles two lines costs two; the SpMM packing buffer and the benches'
//! aligned matrices are these.

use crate::CACHE_LINE_F32;

/// `len` floats starting on a 64-byte boundary, zeroed when made.
#[derive(Debug, Default)]
pub struct AlignedVec {
    buf: Vec<f32>,
    start: usize,
    len: usize,
}

impl AlignedVec {
    /// Empty (no allocation).
    pub const fn new() -> AlignedVec {
        AlignedVec {
            buf: Vec::new(),
            start: 0,
            len: 0,
        }
    }

    /// `len` zeros.
    pub fn zeroed(len: usize) -> AlignedVec {
        let buf = vec![0f32; len + CACHE_LINE_F32];
        let start = buf.as_ptr().align_offset(CACHE_LINE_F32 * 4);
        AlignedVec { buf, start, len }
    }

    /// Floats held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No floats.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The floats.
    pub fn as_slice(&self) -> &[f32] {
        &self.buf[self.start..self.start + self.len]
    }

    /// The floats, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_cache_line_and_holds_len_zeros() {
        for len in [0usize, 1, 15, 16, 17, 1000, 1 << 20] {
            let mut v = AlignedVec::zeroed(len);
            assert_eq!(v.len(), len);
            assert_eq!(v.as_slice().len(), len);
            assert!(v.as_slice().iter().all(|&x| x == 0.0));
            assert_eq!(v.as_mut_slice().as_ptr() as usize % 64, 0, "len {len}");
        }
        assert!(AlignedVec::new().is_empty());
    }
}
