//! Positions inside an `out` string: each decoded byte mapped back to its offset in the
//! virtual source, through the opening quote, a triple quote's trimmed newline, escapes and
//! line-ending backslashes.

/// Where an `out` string is: its decoded text maps back to the virtual source.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OutMap {
    /// `map[i]` = source offset of decoded byte `i` (one extra entry: the end).
    map: Vec<usize>,
}

impl OutMap {
    pub(crate) fn at(&self, i: usize) -> usize {
        self.map[i.min(self.map.len() - 1)]
    }
}

/// The source offsets of an `out` string's decoded bytes: past the opening quote (and the
/// newline trimmed after a triple quote), through every escape and line-ending backslash.
pub(crate) fn out_map(raw: &str, base: usize, decoded: &str) -> OutMap {
    let (open, basic) = if raw.starts_with("\"\"\"") {
        (3, true)
    } else if raw.starts_with("'''") {
        (3, false)
    } else if raw.starts_with('"') {
        (1, true)
    } else if raw.starts_with('\'') {
        (1, false)
    } else {
        (0, false)
    };
    let rb = raw.as_bytes();
    let mut j = open;
    if open == 3 {
        if raw[j..].starts_with("\r\n") {
            j += 2;
        } else if raw[j..].starts_with('\n') {
            j += 1;
        }
    }
    let mut map = Vec::with_capacity(decoded.len() + 1);
    for ch in decoded.chars() {
        // A line-ending backslash swallows the newline and the whitespace after it.
        while basic && rb.get(j) == Some(&b'\\') {
            let mut k = j + 1;
            while k < rb.len() && (rb[k] == b' ' || rb[k] == b'\t') {
                k += 1;
            }
            if k < rb.len() && (rb[k] == b'\n' || rb[k] == b'\r') {
                while k < rb.len() && rb[k].is_ascii_whitespace() {
                    k += 1;
                }
                j = k;
            } else {
                break;
            }
        }
        let adv = if basic && rb.get(j) == Some(&b'\\') {
            match rb.get(j + 1) {
                Some(b'u') => 6,
                Some(b'U') => 10,
                Some(b'x') => 4,
                _ => 2,
            }
        } else if ch == '\n' && rb.get(j) == Some(&b'\r') {
            2
        } else {
            ch.len_utf8()
        };
        map.extend(std::iter::repeat_n(base + j, ch.len_utf8()));
        j = (j + adv).min(raw.len());
    }
    map.push(base + j);
    OutMap { map }
}
