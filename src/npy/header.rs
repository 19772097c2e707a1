//! The NPY header: [`NpyHeader`], its strict one-pass reader [`parse_npy_header`] and
//! [`NpyHeader::canonical`], the one writer of header bytes (numpy's layout: version 1.0,
//! the dictionary padded with spaces and a newline so the data starts at a multiple of 64
//! bytes). The reader hands npyz a canonical header; the writers put one in front of
//! their data.

/// The fields of an NPY header (see [`open_npy`](super::open_npy)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// The dtype string (`<f4`, `|u1`, ...): at most 32 characters of `<>|=` and
    /// alphanumerics.
    pub descr: String,
    /// Column-major data.
    pub fortran_order: bool,
    /// The dimensions.
    pub shape: Vec<u64>,
}

impl NpyHeader {
    /// The header of a little-endian f32 `[rows, cols]` array in C order: what every
    /// `.npy` saintflow writes has.
    pub fn f32_matrix(rows: usize, cols: usize) -> NpyHeader {
        NpyHeader {
            descr: "<f4".into(),
            fortran_order: false,
            shape: vec![rows as u64, cols as u64],
        }
    }

    /// A version-1 NPY preamble and header for these fields, padded as numpy pads (the
    /// data starts at a multiple of 64 bytes).
    pub fn canonical(&self) -> Vec<u8> {
        let dims: Vec<String> = self.shape.iter().map(u64::to_string).collect();
        let shape = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        let fo = if self.fortran_order { "True" } else { "False" };
        let mut text = format!(
            "{{'descr': '{}', 'fortran_order': {fo}, 'shape': {shape}, }}",
            self.descr
        );
        while (10 + text.len() + 1) % 64 != 0 {
            text.push(' ');
        }
        text.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(text.len() as u16).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
        out
    }
}

/// Reads an NPY header's text: a Python dict of exactly the keys `descr` (a string),
/// `fortran_order` (`True`/`False`) and `shape` (a tuple of non-negative integers), in any
/// order, with an optional trailing comma, then only whitespace. One pass, no backtracking.
pub fn parse_npy_header(text: &[u8]) -> Result<NpyHeader, String> {
    struct P<'a> {
        t: &'a [u8],
        i: usize,
    }
    impl P<'_> {
        fn ws(&mut self) {
            while self.i < self.t.len() && self.t[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }
        fn peek(&mut self) -> Option<u8> {
            self.ws();
            self.t.get(self.i).copied()
        }
        fn eat(&mut self, c: u8) -> Result<(), String> {
            match self.peek() {
                Some(b) if b == c => {
                    self.i += 1;
                    Ok(())
                }
                Some(b) => Err(format!(
                    "expected `{}` at byte {}, found `{}`",
                    c as char,
                    self.i,
                    (b as char).escape_default()
                )),
                None => Err(format!("expected `{}`, found the end", c as char)),
            }
        }
        fn string(&mut self) -> Result<&str, String> {
            let q = match self.peek() {
                Some(q @ (b'\'' | b'"')) => q,
                _ => return Err(format!("expected a string at byte {}", self.i)),
            };
            let start = self.i + 1;
            let len = self.t[start..]
                .iter()
                .position(|&b| b == q)
                .ok_or("unterminated string")?;
            self.i = start + len + 1;
            std::str::from_utf8(&self.t[start..start + len])
                .map_err(|_| "a string not in UTF-8".into())
        }
        fn word(&mut self) -> &[u8] {
            self.ws();
            let start = self.i;
            while self.i < self.t.len() && self.t[self.i].is_ascii_alphanumeric() {
                self.i += 1;
            }
            &self.t[start..self.i]
        }
    }
    let mut p = P { t: text, i: 0 };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    p.eat(b'{')?;
    while p.peek() != Some(b'}') {
        let key = p.string()?.to_string();
        p.eat(b':')?;
        match key.as_str() {
            "descr" if descr.is_none() => {
                let d = p.string()?;
                if d.is_empty()
                    || d.len() > 32
                    || !d
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"<>|=".contains(&b))
                {
                    return Err(format!(
                        "unsupported dtype {d:?} (a plain dtype string like '<f4')"
                    ));
                }
                descr = Some(d.to_string());
            }
            "fortran_order" if fortran.is_none() => {
                fortran = Some(match p.word() {
                    b"True" => true,
                    b"False" => false,
                    w => {
                        return Err(format!(
                            "fortran_order {:?}, expected True or False",
                            String::from_utf8_lossy(w)
                        ))
                    }
                });
            }
            "shape" if shape.is_none() => {
                p.eat(b'(')?;
                let mut dims = Vec::new();
                while p.peek() != Some(b')') {
                    let w = p.word();
                    let w = w.strip_suffix(b"L").unwrap_or(w);
                    let d = std::str::from_utf8(w)
                        .ok()
                        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(|s| s.parse::<u64>().ok())
                        .ok_or_else(|| {
                            format!(
                                "a shape entry at byte {} is not a non-negative integer",
                                p.i
                            )
                        })?;
                    if dims.len() == 32 {
                        return Err("a shape of more than 32 dimensions".into());
                    }
                    dims.push(d);
                    if p.peek() == Some(b',') {
                        p.i += 1;
                    } else {
                        break;
                    }
                }
                p.eat(b')')?;
                shape = Some(dims);
            }
            k => return Err(format!("unexpected or repeated key {k:?}")),
        }
        if p.peek() == Some(b',') {
            p.i += 1;
        } else {
            break;
        }
    }
    p.eat(b'}')?;
    p.ws();
    if p.i != text.len() {
        return Err(format!(
            "unexpected text after the dictionary at byte {}",
            p.i
        ));
    }
    let shape: Vec<u64> = shape.ok_or("no 'shape'")?;
    // npyz multiplies the dimensions (and the element size) without checking.
    if shape
        .iter()
        .try_fold(16u64, |a, &d| a.checked_mul(d))
        .is_none()
    {
        return Err(format!("shape {shape:?} has more bytes than a u64 counts"));
    }
    Ok(NpyHeader {
        descr: descr.ok_or("no 'descr'")?,
        fortran_order: fortran.ok_or("no 'fortran_order'")?,
        shape,
    })
}

#[cfg(test)]
mod tests {
    use super::{parse_npy_header, NpyHeader};

    #[test]
    fn npy_headers_parse_strictly_and_round_trip() {
        let h = |d: &str, f: bool, s: &[u64]| NpyHeader {
            descr: d.into(),
            fortran_order: f,
            shape: s.to_vec(),
        };
        let plain = b"{'descr': '<f4', 'fortran_order': False, 'shape': (24, 3), }          \n";
        assert_eq!(parse_npy_header(plain), Ok(h("<f4", false, &[24, 3])));
        // Keys in any order, double quotes, a 1-tuple, Python 2's `L`, no trailing comma.
        let other = b"{\"shape\": (7L,), \"fortran_order\": True, \"descr\": \"|u1\"}";
        assert_eq!(parse_npy_header(other), Ok(h("|u1", true, &[7])));
        assert_eq!(
            parse_npy_header(b"{'descr':'<f8','fortran_order':False,'shape':()}"),
            Ok(h("<f8", false, &[]))
        );
        for (bad, why) in [
            (
                &b"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}"[..],
                "string",
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': [[[[3]]]]}",
                "`(`",
            ),
            (b"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"),
            (
                b"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}",
                "repeated",
            ),
            (
                b"{'descr': '<f4', 'fortran_order': 1, 'shape': ()}",
                "True or False",
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (1e5,)}",
                "non-negative integer",
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
                "non-negative integer",
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': ()} x",
                "after the dictionary",
            ),
            (b"{'descr': '<f4", "unterminated"),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
                "more bytes than a u64",
            ),
        ] {
            let e = parse_npy_header(bad).unwrap_err();
            assert!(e.contains(why), "{}: {e}", String::from_utf8_lossy(bad));
        }
        // The canonical header is numpy's layout: data at a multiple of 64, and it parses
        // back to the same fields.
        for x in [
            h("<f4", false, &[24, 3]),
            h("|u1", true, &[7]),
            h("<i8", false, &[]),
        ] {
            let c = x.canonical();
            assert_eq!(c.len() % 64, 0);
            assert_eq!(c.last(), Some(&b'\n'));
            assert_eq!(parse_npy_header(&c[10..]), Ok(x));
        }
    }

    #[test]
    fn the_f32_matrix_header_is_numpys_bytes() {
        let c = NpyHeader::f32_matrix(2708, 64).canonical();
        let dict = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2708, 64), }";
        assert_eq!(&c[..8], b"\x93NUMPY\x01\x00");
        assert_eq!(u16::from_le_bytes([c[8], c[9]]) as usize, c.len() - 10);
        assert_eq!(&c[10..10 + dict.len()], dict);
        assert_eq!(
            c.len(),
            128,
            "10 + 63 + padding + newline, to a multiple of 64"
        );
        assert!(c[10 + dict.len()..c.len() - 1].iter().all(|&b| b == b' '));
        assert_eq!(c[c.len() - 1], b'\n');
    }
}
