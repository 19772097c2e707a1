//! Importers: GraphSAINT's dataset directories and whitespace edge lists. This file holds
//! the readers they share: NPY arrays (through `npyz`), `class_map.json`, `role.json`, and
//! the streaming feature copy with optional standardisation.

pub mod edgelist;
pub mod graphsaint;

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Chain, Cursor, Read};
use std::path::Path;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use crate::store::format::{Dtype, LabelKind, Role, SectionEntry, SectionId, NO_LABEL};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

pub use edgelist::{import_edgelist, EdgeListOptions};
pub use graphsaint::{import_graphsaint, GraphSaintOptions, Resplit, TrainGraphMode};

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImportReport {
    /// N.
    pub n_nodes: u64,
    /// Directed entries in the full graph.
    pub entries: u64,
    /// Directed entries in the training graph.
    pub train_entries: u64,
    /// Self loops dropped from the full graph.
    pub self_loops: u64,
    /// Duplicate entries dropped from the full graph.
    pub duplicates: u64,
    /// Wall time.
    pub seconds: f64,
}

impl ImportReport {
    /// The report of an import that wrote `graph` for `n_nodes` nodes, started at `start`.
    pub fn new(
        n_nodes: u64,
        graph: &crate::store::build::GraphSections,
        start: std::time::Instant,
    ) -> Self {
        ImportReport {
            n_nodes,
            entries: graph.n_entries,
            train_entries: graph.n_train_entries,
            self_loops: graph.stats.self_loops,
            duplicates: graph.stats.duplicates,
            seconds: start.elapsed().as_secs_f64(),
        }
    }
}

/// Labels read from a file, one row per node.
pub struct LabelTable {
    /// Single or multi.
    pub kind: LabelKind,
    /// C.
    pub n_classes: u64,
    /// Single: one u32 per node (NO_LABEL if absent). Multi: ⌈C/8⌉ bytes per node.
    pub data: Vec<u8>,
}

impl LabelTable {
    /// No labels at all: single-label with C = 0, every node unlabelled.
    pub fn none(n: usize) -> Self {
        LabelTable {
            kind: LabelKind::Single,
            n_classes: 0,
            data: bytemuck::cast_slice(&vec![NO_LABEL; n]).to_vec(),
        }
    }

    fn row_bytes(&self) -> usize {
        match self.kind {
            LabelKind::Single => 4,
            LabelKind::Multi => self.n_classes.div_ceil(8) as usize,
        }
    }

    /// Whether node `v` has a label.
    pub fn is_labelled(&self, v: usize) -> bool {
        let r = self.row_bytes();
        match self.kind {
            LabelKind::Single => {
                u32::from_le_bytes(self.data[v * 4..v * 4 + 4].try_into().unwrap()) != NO_LABEL
            }
            LabelKind::Multi => self.data[v * r..(v + 1) * r].iter().any(|&b| b != 0),
        }
    }

    /// Writes the labels section.
    pub fn write(&self, w: &StoreWriter) -> Result<SectionEntry, StoreError> {
        let dtype = match self.kind {
            LabelKind::Single => Dtype::U32,
            LabelKind::Multi => Dtype::U8,
        };
        let mut s = w.section(SectionId::Labels, dtype)?;
        s.write_bytes(&self.data)?;
        s.finish()
    }
}

/// Checks that every node with a role has a label; the error names `path`.
pub fn require_labels(path: &Path, labels: &LabelTable, roles: &[u8]) -> Result<(), StoreError> {
    if let Some(v) =
        (0..roles.len()).find(|&v| roles[v] != Role::None as u8 && !labels.is_labelled(v))
    {
        return Err(StoreError::input(
            path,
            format!(
                "node {v} is in the split ({:?}) but has no label",
                Role::from_byte(roles[v]).unwrap()
            ),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- class_map.json

/// One class_map value as first seen; fixes the kind and, for multi-label, C.
enum Seen {
    Nothing,
    Single { max: u64 },
    Multi { c: usize },
}

/// Maps a node id as written in an input file to its store id (`import edgelist
/// --remap`); None: the id names no node.
pub type IdMap<'a> = &'a dyn Fn(&str) -> Option<usize>;

struct ClassMapSeed<'a> {
    n: usize,
    map: Option<IdMap<'a>>,
    single: &'a mut Vec<u32>,
    multi: &'a mut Vec<u8>,
    seen: &'a mut Seen,
}

impl<'de> DeserializeSeed<'de> for ClassMapSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ClassMapSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object mapping node ids to a class id or a list of 0/1")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut present = vec![false; self.n];
        while let Some(key) = map.next_key::<String>()? {
            let v: usize = match self.map {
                Some(map) => map(&key).ok_or_else(|| {
                    de::Error::custom(format!(
                        "node id {key:?} does not appear in the edge list (--remap numbers its nodes only)"
                    ))
                })?,
                None => key
                    .parse()
                    .map_err(|_| de::Error::custom(format!("key {key:?} is not a node id")))?,
            };
            if v >= self.n {
                return Err(de::Error::custom(format!(
                    "node id {v} out of range, expected < N = {}",
                    self.n
                )));
            }
            if std::mem::replace(&mut present[v], true) {
                return Err(de::Error::custom(format!("node id {v} appears twice")));
            }
            let value: LabelValue = map.next_value()?;
            match (value, &mut *self.seen) {
                (LabelValue::Class(c), Seen::Nothing) => {
                    *self.seen = Seen::Single { max: c };
                    *self.single = vec![NO_LABEL; self.n];
                    self.single[v] = class_u32(c, v)?;
                }
                (LabelValue::Class(c), Seen::Single { max }) => {
                    *max = (*max).max(c);
                    self.single[v] = class_u32(c, v)?;
                }
                (LabelValue::Bits(bits), Seen::Nothing) => {
                    let c = bits.len();
                    *self.seen = Seen::Multi { c };
                    *self.multi = vec![0u8; self.n * c.div_ceil(8)];
                    set_bits(self.multi, v, c, &bits);
                }
                (LabelValue::Bits(bits), Seen::Multi { c }) => {
                    if bits.len() != *c {
                        return Err(de::Error::custom(format!(
                            "node {v}: label list expected length {c} (as for the first node), got {}",
                            bits.len()
                        )));
                    }
                    set_bits(self.multi, v, *c, &bits);
                }
                (_, _) => {
                    return Err(de::Error::custom(format!(
                        "node {v}: mixes single-label (integer) and multi-label (list) values"
                    )))
                }
            }
        }
        Ok(())
    }
}

fn class_u32<E: de::Error>(c: u64, v: usize) -> Result<u32, E> {
    if c >= u64::from(NO_LABEL) {
        return Err(E::custom(format!("node {v}: class id {c} too large")));
    }
    Ok(c as u32)
}

fn set_bits(multi: &mut [u8], v: usize, c: usize, bits: &[bool]) {
    let r = c.div_ceil(8);
    for (j, &b) in bits.iter().enumerate() {
        if b {
            multi[v * r + j / 8] |= 1 << (j % 8);
        }
    }
}

enum LabelValue {
    Class(u64),
    Bits(Vec<bool>),
}

impl<'de> de::Deserialize<'de> for LabelValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LabelValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a non-negative class id or a list of 0/1")
            }
            fn visit_u64<E: de::Error>(self, x: u64) -> Result<LabelValue, E> {
                Ok(LabelValue::Class(x))
            }
            fn visit_i64<E: de::Error>(self, x: i64) -> Result<LabelValue, E> {
                u64::try_from(x)
                    .map(LabelValue::Class)
                    .map_err(|_| E::custom(format!("class id {x} is negative")))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LabelValue, A::Error> {
                let mut bits = Vec::new();
                while let Some(x) = seq.next_element::<i64>()? {
                    match x {
                        0 => bits.push(false),
                        1 => bits.push(true),
                        _ => {
                            return Err(de::Error::custom(format!(
                                "multi-label entry {x}, expected 0 or 1"
                            )))
                        }
                    }
                }
                Ok(LabelValue::Bits(bits))
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads a GraphSAINT `class_map.json` for `n` nodes (streaming: no JSON tree in memory).
pub fn read_class_map(path: &Path, n: usize) -> Result<LabelTable, StoreError> {
    read_class_map_with(path, n, None)
}

/// [`read_class_map`] with its keys translated by `map` (None: keys are store ids).
pub fn read_class_map_with(
    path: &Path,
    n: usize,
    map: Option<IdMap<'_>>,
) -> Result<LabelTable, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 20, file));
    let (mut single, mut multi, mut seen) = (Vec::new(), Vec::new(), Seen::Nothing);
    ClassMapSeed {
        n,
        map,
        single: &mut single,
        multi: &mut multi,
        seen: &mut seen,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end())
    .map_err(|e| StoreError::input(path, format!("invalid class map: {e}")))?;
    Ok(match seen {
        Seen::Nothing => LabelTable::none(n),
        Seen::Single { max } => LabelTable {
            kind: LabelKind::Single,
            n_classes: max + 1,
            data: bytemuck::cast_slice(&single).to_vec(),
        },
        Seen::Multi { c } => LabelTable {
            kind: LabelKind::Multi,
            n_classes: c as u64,
            data: multi,
        },
    })
}

// ---------------------------------------------------------------- role.json

/// Reads a GraphSAINT `role.json` (`{"tr": [...], "va": [...], "te": [...]}`) into one
/// role byte per node; ids out of range or in two lists are errors.
pub fn read_roles(path: &Path, n: usize) -> Result<Vec<u8>, StoreError> {
    read_roles_with(path, n, None)
}

/// [`read_roles`] with the ids translated by `map` (None: they are store ids); with a
/// map, ids may be numbers or strings, as the edge list wrote them.
pub fn read_roles_with(
    path: &Path,
    n: usize,
    map: Option<IdMap<'_>>,
) -> Result<Vec<u8>, StoreError> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum RoleId {
        Int(i64),
        Str(String),
    }
    #[derive(serde::Deserialize)]
    struct RoleFile {
        tr: Vec<RoleId>,
        va: Vec<RoleId>,
        te: Vec<RoleId>,
    }
    let file = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    let parsed: RoleFile = serde_json::from_reader(BufReader::new(file)).map_err(|e| {
        StoreError::input(
            path,
            format!("expected {{\"tr\": [ids], \"va\": [ids], \"te\": [ids]}}: {e}"),
        )
    })?;
    let mut roles = vec![Role::None as u8; n];
    for (list, name, role) in [
        (&parsed.tr, "tr", Role::Train),
        (&parsed.va, "va", Role::Val),
        (&parsed.te, "te", Role::Test),
    ] {
        for id in list {
            let v = match (id, map) {
                (RoleId::Int(id), None) => {
                    usize::try_from(*id).ok().filter(|&v| v < n).ok_or_else(|| {
                        StoreError::input(
                            path,
                            format!("\"{name}\": node id {id} out of range, expected 0..{n}"),
                        )
                    })?
                }
                (RoleId::Str(s), None) => {
                    return Err(StoreError::input(
                        path,
                        format!("\"{name}\": node id {s:?} is not a number (string ids need import --remap)"),
                    ))
                }
                (id, Some(map)) => {
                    let key = match id {
                        RoleId::Int(i) => i.to_string(),
                        RoleId::Str(s) => s.clone(),
                    };
                    map(&key).ok_or_else(|| {
                        StoreError::input(
                            path,
                            format!("\"{name}\": node id {key:?} does not appear in the edge list (--remap numbers its nodes only)"),
                        )
                    })?
                }
            };
            if roles[v] != Role::None as u8 {
                let other = ["", "tr", "va", "te"][roles[v] as usize];
                let what = if roles[v] == role as u8 {
                    format!("node {v} is listed twice in \"{name}\"")
                } else {
                    format!(
                        "node {v} is in both \"{other}\" and \"{name}\": roles must not overlap"
                    )
                };
                return Err(StoreError::input(path, what));
            }
            roles[v] = role as u8;
        }
    }
    Ok(roles)
}

// ---------------------------------------------------------------- NPY

/// Longest NPY header text read: numpy's own default limit (`np.load(max_header_size=
/// 10000)`). A plain array's header is under 128 bytes.
pub const MAX_NPY_HEADER_BYTES: usize = 10_000;

/// An NPY stream whose header was vetted: a canonical header in front of the rest.
pub type VettedNpy<R> = npyz::NpyFile<Chain<Cursor<Vec<u8>>, R>>;

/// Opens an NPY stream through npyz after reading its preamble and header ourselves, since
/// npyz takes them on trust: it allocates the declared header length (a u32, up to 4 GiB)
/// before reading it, and parses the text with a backtracking parser whose time explodes on
/// hostile input (a header 16 `[` deep took 30 s, and a 1 KB one of nested numeric
/// literals over 30 s, both found by fuzzing). Here the header is at most
/// [`MAX_NPY_HEADER_BYTES`] and must be the plain dictionary numpy writes for a simple
/// dtype (`{'descr': '<f4', 'fortran_order': False, 'shape': (2708, 1433), }`, keys in any
/// order), read by [`parse_npy_header`] in one pass; npyz is then given a header written
/// anew from the parsed fields, so its parser never sees input text. Structured dtypes,
/// which no importer reads, are refused. The error is a bare message; callers add the
/// file (and member).
pub fn open_npy<R: Read>(mut r: R) -> Result<VettedNpy<R>, String> {
    let eof = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "not a valid NPY file: truncated header".to_string(),
        _ => format!("not a valid NPY file: reading the header: {e}"),
    };
    let mut head = [0u8; 8];
    r.read_exact(&mut head).map_err(eof)?;
    if &head[..6] != b"\x93NUMPY" {
        return Err("not a valid NPY file: magic not found".into());
    }
    let len_bytes = match (head[6], head[7]) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        (a, b) => {
            return Err(format!(
                "not a valid NPY file: unsupported version ({a}, {b})"
            ))
        }
    };
    let mut len = [0u8; 4];
    r.read_exact(&mut len[..len_bytes]).map_err(eof)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_NPY_HEADER_BYTES {
        return Err(format!(
            "not a valid NPY file: header of {len} bytes, expected at most {MAX_NPY_HEADER_BYTES}"
        ));
    }
    let mut text = vec![0u8; len];
    r.read_exact(&mut text).map_err(eof)?;
    let h = parse_npy_header(&text).map_err(|e| format!("not a valid NPY file: header: {e}"))?;
    npyz::NpyFile::new(Cursor::new(h.canonical()).chain(r))
        .map_err(|e| format!("not a valid NPY file: {e}"))
}

/// The fields of an NPY header (see [`open_npy`]).
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

/// An NPY file opened for streaming, with its element type resolved.
pub struct Npy {
    file: VettedNpy<BufReader<File>>,
    /// Shape as stored.
    pub shape: Vec<u64>,
    type_str: String,
}

impl Npy {
    /// Opens an `.npy` file; must be C order.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let f = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
        let file = open_npy(BufReader::with_capacity(1 << 20, f))
            .map_err(|e| StoreError::input(path, e))?;
        if file.order() != npyz::Order::C {
            return Err(StoreError::input(
                path,
                "array is in Fortran order, expected C order",
            ));
        }
        let type_str = match file.dtype() {
            npyz::DType::Plain(t) => t.to_string(),
            other => {
                return Err(StoreError::input(
                    path,
                    format!("unsupported dtype {}", other.descr()),
                ))
            }
        };
        Ok(Npy {
            shape: file.shape().to_vec(),
            file,
            type_str,
        })
    }

    /// Streams the elements as f64 (from f4/f8/integers), calling `each` in order.
    pub fn for_each_f64(
        self,
        path: &Path,
        mut each: impl FnMut(f64) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let read_err =
            |e: std::io::Error| StoreError::input(path, format!("reading array data: {e}"));
        macro_rules! stream {
            ($t:ty) => {{
                let data = self
                    .file
                    .data::<$t>()
                    .map_err(|e| StoreError::input(path, e.to_string()))?;
                for x in data {
                    each(x.map_err(read_err)? as f64)?;
                }
            }};
        }
        match self.type_str.as_str() {
            "<f4" => stream!(f32),
            "<f8" => stream!(f64),
            "<i4" => stream!(i32),
            "<i8" => stream!(i64),
            "|u1" | "<u1" => stream!(u8),
            "|i1" | "<i1" => stream!(i8),
            "|b1" => {
                let data = self
                    .file
                    .data::<bool>()
                    .map_err(|e| StoreError::input(path, e.to_string()))?;
                for x in data {
                    each(if x.map_err(read_err)? { 1.0 } else { 0.0 })?;
                }
            }
            t => {
                return Err(StoreError::input(
                    path,
                    format!("unsupported dtype {t}, expected little-endian float or integer"),
                ))
            }
        }
        Ok(())
    }

    /// Whether the elements are integers (or booleans).
    pub fn is_integer(&self) -> bool {
        !self.type_str.contains('f')
    }
}

/// Writes the features section from an `(n, F)` NPY file, standardised when `standardize`
/// with the mean and population standard deviation of the training rows (`roles`); a
/// zero-variance column is only centred, as scikit-learn's StandardScaler does. Streams
/// the file (twice when standardising): memory is O(F). Returns F and the entry.
pub fn write_features_npy(
    w: &StoreWriter,
    path: &Path,
    n: usize,
    standardize: bool,
    roles: &[u8],
) -> Result<(u64, SectionEntry), StoreError> {
    let fit = |v: usize| roles[v] == Role::Train as u8;
    let fit_rows: Option<&dyn Fn(usize) -> bool> = standardize.then_some(&fit);
    let npy = Npy::open(path)?;
    let f = match npy.shape.as_slice() {
        [rows, cols] if *rows == n as u64 => *cols as usize,
        [rows] if *rows == n as u64 => 1,
        s => {
            return Err(StoreError::input(
                path,
                format!("shape expected ({n}, F), got {s:?}"),
            ))
        }
    };
    let transform = match fit_rows {
        None => None,
        Some(fit) => {
            let (mut sum, mut sumsq, mut count) = (vec![0f64; f], vec![0f64; f], 0u64);
            let mut i = 0usize;
            Npy::open(path)?.for_each_f64(path, |x| {
                let (v, j) = (i / f.max(1), i % f.max(1));
                if fit(v) {
                    sum[j] += x;
                    sumsq[j] += x * x;
                    if j == 0 {
                        count += 1;
                    }
                }
                i += 1;
                Ok(())
            })?;
            if count == 0 {
                return Err(StoreError::input(
                    path,
                    "cannot standardise: no training nodes to fit on",
                ));
            }
            let mean: Vec<f64> = sum.iter().map(|s| s / count as f64).collect();
            let scale: Vec<f64> = (0..f)
                .map(|j| {
                    let var = (sumsq[j] / count as f64 - mean[j] * mean[j]).max(0.0);
                    if var > 0.0 {
                        1.0 / var.sqrt()
                    } else {
                        1.0
                    }
                })
                .collect();
            Some((mean, scale))
        }
    };
    let mut s = w.section(SectionId::Features, Dtype::F32)?;
    let mut buf: Vec<f32> = Vec::with_capacity(1 << 16);
    let mut i = 0usize;
    let mut flush_err = None;
    npy.for_each_f64(path, |x| {
        let j = i % f.max(1);
        let y = match &transform {
            Some((mean, scale)) => (x - mean[j]) * scale[j],
            None => x,
        };
        if !y.is_finite() {
            return Err(StoreError::input(
                path,
                format!(
                    "element {i} (row {}, column {j}) is not finite: {x}",
                    i / f.max(1)
                ),
            ));
        }
        buf.push(y as f32);
        i += 1;
        if buf.len() == buf.capacity() {
            if let Err(e) = s.write_f32s(&buf) {
                flush_err = Some(e);
            }
            buf.clear();
        }
        Ok(())
    })?;
    if let Some(e) = flush_err {
        return Err(e);
    }
    s.write_f32s(&buf)?;
    Ok((f as u64, s.finish()?))
}

/// Reads labels from an NPY file: 1-D integers → single-label (negative = unlabelled),
/// 2-D 0/1 → multi-label.
pub fn read_labels_npy(path: &Path, n: usize) -> Result<LabelTable, StoreError> {
    let npy = Npy::open(path)?;
    if !npy.is_integer() {
        return Err(StoreError::input(
            path,
            "labels expected an integer or boolean dtype",
        ));
    }
    match npy.shape.clone().as_slice() {
        [rows] if *rows == n as u64 => {
            let mut out = Vec::with_capacity(n);
            let mut max = None::<u64>;
            npy.for_each_f64(path, |x| {
                if x < 0.0 {
                    out.push(NO_LABEL);
                } else if x >= f64::from(NO_LABEL) {
                    return Err(StoreError::input(
                        path,
                        format!("node {}: class id {x} too large", out.len()),
                    ));
                } else {
                    out.push(x as u32);
                    max = Some(max.map_or(x as u64, |m: u64| m.max(x as u64)));
                }
                Ok(())
            })?;
            Ok(LabelTable {
                kind: LabelKind::Single,
                n_classes: max.map_or(0, |m| m + 1),
                data: bytemuck::cast_slice(&out).to_vec(),
            })
        }
        [rows, c] if *rows == n as u64 => {
            let c = *c as usize;
            let r = c.div_ceil(8);
            let mut data = vec![0u8; n * r];
            let mut i = 0usize;
            npy.for_each_f64(path, |x| {
                let (v, j) = (i / c, i % c);
                if x == 1.0 {
                    data[v * r + j / 8] |= 1 << (j % 8);
                } else if x != 0.0 {
                    return Err(StoreError::input(
                        path,
                        format!("node {v}, class {j}: expected 0 or 1, got {x}"),
                    ));
                }
                i += 1;
                Ok(())
            })?;
            Ok(LabelTable {
                kind: LabelKind::Multi,
                n_classes: c as u64,
                data,
            })
        }
        s => Err(StoreError::input(
            path,
            format!("labels shape expected ({n},) or ({n}, C), got {s:?}"),
        )),
    }
}

/// Reads a labels file by extension: `.json` (class_map) or `.npy`.
pub fn read_labels(path: &Path, n: usize) -> Result<LabelTable, StoreError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => read_class_map(path, n),
        Some("npy") => read_labels_npy(path, n),
        _ => Err(StoreError::input(
            path,
            "labels file expected a .json class map or a .npy array",
        )),
    }
}

/// Writes the roles section.
pub fn write_roles(w: &StoreWriter, roles: &[u8]) -> Result<SectionEntry, StoreError> {
    let mut s = w.section(SectionId::Roles, Dtype::U8)?;
    s.write_bytes(roles)?;
    s.finish()
}

/// Writes an all-empty features section (F = 0).
pub fn write_no_features(w: &StoreWriter) -> Result<SectionEntry, StoreError> {
    w.section(SectionId::Features, Dtype::F32)?.finish()
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
}
