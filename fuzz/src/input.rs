//! A cursor over the fuzz input: fixed-width reads that yield zeros past the end, so every
//! byte string is a valid (if short) instruction stream.

pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        u64::from_le_bytes(b)
    }

    /// Up to `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos = end;
        &self.data[start..end]
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(self.data.len())
    }
}

/// A plan's text up to the first NUL byte, then at most 4 NUL-separated `--set` overrides;
/// None when the bytes are not UTF-8 (the CLI reads a plan as a `String`).
pub fn plan_text(data: &[u8]) -> Option<(&str, Vec<&str>)> {
    let text = std::str::from_utf8(data).ok()?;
    let mut parts = text.split('\0');
    let file = parts.next().unwrap_or_default();
    Some((file, parts.take(4).collect()))
}
