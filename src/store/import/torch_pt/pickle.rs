//! The pickle machine: the opcodes Python's pickler emits at protocol 2 for a dict of
//! tensors or numpy arrays, building inert [`Value`]s (GLOBAL and REDUCE are records, never
//! calls), nesting bounded by [`MAX_DEPTH`]; any other opcode refused by name.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use crate::store::StoreError;

/// A pickle value. GLOBAL and REDUCE give inert records; nothing is ever called.
#[derive(Debug)]
pub(super) enum Value {
    None,
    Bool(bool),
    Int(i64),
    Str(String),
    /// A long string (`text`, UTF-8 checked) or bytes, left in the pickle at `start`.
    Blob {
        start: usize,
        len: usize,
        text: bool,
    },
    Tuple(Vec<Rc<Value>>, Depth),
    List(Vec<Rc<Value>>, Depth),
    Dict(Vec<(Rc<Value>, Rc<Value>)>, Depth),
    Global(String, String),
    /// `func(*args)`, not called.
    Reduce(Rc<Value>, Rc<Value>, Depth),
    /// `obj.__setstate__(state)`, not called.
    Build(Rc<Value>, Rc<Value>, Depth),
    PersId(Rc<Value>, Depth),
    Mark,
}

/// A composite value's nesting depth (a scalar's is 0), kept so that it is bounded by
/// [`MAX_DEPTH`] as values are built: dropping a value recurses through its nesting, and a
/// hostile pickle of a million nested tuples would overflow the stack there.
pub(super) type Depth = u32;

/// The deepest nesting a pickle may build. OGB's files nest 7 deep (dict, numpy array,
/// its state, the dtype, its arguments).
pub(super) const MAX_DEPTH: Depth = 32;

impl Value {
    fn depth(&self) -> Depth {
        match self {
            Value::Tuple(_, d)
            | Value::List(_, d)
            | Value::Dict(_, d)
            | Value::Reduce(_, _, d)
            | Value::Build(_, _, d)
            | Value::PersId(_, d) => *d,
            _ => 0,
        }
    }
}

/// One more than the deepest of `items`.
pub(super) fn over<'a>(items: impl IntoIterator<Item = &'a Rc<Value>>) -> Depth {
    1 + items.into_iter().map(|v| v.depth()).max().unwrap_or(0)
}

/// Strings longer than this stay in the pickle ([`Value::Blob`]): names and keys are short.
const MAX_NAME: usize = 4096;

/// The most values the stack may hold (a tuple of more is no shape this reader reads).
const MAX_TUPLE: usize = 1 << 20;

/// The pickle machine (see the module comment).
pub(super) struct Machine<'p> {
    path: &'p Path,
    stack: Vec<Rc<Value>>,
    /// Stack heights at each MARK.
    marks: Vec<usize>,
    memo: HashMap<u32, Rc<Value>>,
}

impl<'p> Machine<'p> {
    pub(super) fn new(path: &'p Path) -> Self {
        Machine {
            path,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
        }
    }

    pub(super) fn run(mut self, p: &[u8]) -> Result<Rc<Value>, StoreError> {
        let mut at = 0usize;
        loop {
            let pos = at;
            let op = *p
                .get(at)
                .ok_or_else(|| self.err(pos, "the pickle ends without STOP".into()))?;
            at += 1;
            if op == b'.' {
                // STOP
                if self.stack.len() != 1 || !self.marks.is_empty() {
                    return Err(self.err(
                        pos,
                        format!(
                            "STOP with {} values on the stack, expected 1",
                            self.stack.len()
                        ),
                    ));
                }
                return Ok(self.stack.pop().expect("one value"));
            }
            if !self.value_op(p, &mut at, pos, op)? {
                self.structure_op(p, &mut at, pos, op)?;
            }
            if self.stack.len() > MAX_TUPLE {
                return Err(self.err(pos, format!("more than {MAX_TUPLE} values on the stack")));
            }
            if self.stack.last().is_some_and(|v| v.depth() > MAX_DEPTH) {
                return Err(self.err(
                    pos,
                    format!("values nested more than {MAX_DEPTH} deep, expected a dict of arrays"),
                ));
            }
        }
    }

    /// An opcode that pushes a value read from the pickle (a literal, a mark, an empty
    /// container, a global's name); false for any other.
    fn value_op(
        &mut self,
        p: &[u8],
        at: &mut usize,
        pos: usize,
        op: u8,
    ) -> Result<bool, StoreError> {
        let path = self.path;
        let take = |at: &mut usize, n: usize| operand(p, at, n, (path, pos, op));
        match op {
            0x80 => {
                // PROTO
                let v = take(at, 1)?[0];
                if !(2..=5).contains(&v) {
                    return Err(self.err(pos, format!("pickle protocol {v}, expected 2 to 5")));
                }
            }
            b'(' => {
                self.marks.push(self.stack.len());
                self.stack.push(Rc::new(Value::Mark));
            }
            b'}' => self.push(Value::Dict(Vec::new(), 1)),
            b']' => self.push(Value::List(Vec::new(), 1)),
            b')' => self.push(Value::Tuple(Vec::new(), 1)),
            b'N' => self.push(Value::None),
            0x88 => self.push(Value::Bool(true)),
            0x89 => self.push(Value::Bool(false)),
            b'K' => {
                let v = take(at, 1)?[0];
                self.push(Value::Int(i64::from(v)));
            }
            b'M' => {
                let b = take(at, 2)?;
                self.push(Value::Int(i64::from(u16::from_le_bytes([b[0], b[1]]))));
            }
            b'J' => {
                let b = take(at, 4)?;
                self.push(Value::Int(i64::from(i32::from_le_bytes(
                    b.try_into().unwrap(),
                ))));
            }
            0x8a => {
                // LONG1: n bytes of two's-complement little-endian.
                let n = take(at, 1)?[0] as usize;
                let b = take(at, n)?;
                if n > 8 {
                    return Err(self.err(
                        pos,
                        format!("LONG1 of {n} bytes, expected an integer of at most 8"),
                    ));
                }
                let mut v: i64 = 0;
                for (i, &x) in b.iter().enumerate() {
                    v |= i64::from(x) << (8 * i);
                }
                if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                self.push(Value::Int(v));
            }
            b'X' => {
                let n = u32::from_le_bytes(take(at, 4)?.try_into().unwrap()) as usize;
                let start = *at;
                let b = take(at, n)?;
                let s = std::str::from_utf8(b)
                    .map_err(|_| self.err(pos, "BINUNICODE is not UTF-8".into()))?;
                if n <= MAX_NAME {
                    self.push(Value::Str(s.to_string()));
                } else {
                    // A numpy array's bytes (protocol 2): left in the pickle.
                    self.push(Value::Blob {
                        start,
                        len: n,
                        text: true,
                    });
                }
            }
            b'C' | b'B' => {
                // SHORT_BINBYTES, BINBYTES (protocol 3+)
                let n = if op == b'C' {
                    take(at, 1)?[0] as usize
                } else {
                    u32::from_le_bytes(take(at, 4)?.try_into().unwrap()) as usize
                };
                let start = *at;
                take(at, n)?;
                self.push(Value::Blob {
                    start,
                    len: n,
                    text: false,
                });
            }
            b'c' => {
                let module = self.line(p, at, pos)?;
                let name = self.line(p, at, pos)?;
                self.push(Value::Global(module, name));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// An opcode over the stack's values: the memo, tuples, REDUCE, BUILD, persistent
    /// ids, dict and list fills; any other is refused by name.
    fn structure_op(
        &mut self,
        p: &[u8],
        at: &mut usize,
        pos: usize,
        op: u8,
    ) -> Result<(), StoreError> {
        let path = self.path;
        let take = |at: &mut usize, n: usize| operand(p, at, n, (path, pos, op));
        match op {
            b'q' | b'r' => {
                let key = if op == b'q' {
                    u32::from(take(at, 1)?[0])
                } else {
                    u32::from_le_bytes(take(at, 4)?.try_into().unwrap())
                };
                let top = self.top(pos)?;
                self.memo.insert(key, top);
            }
            b'h' | b'j' => {
                let key = if op == b'h' {
                    u32::from(take(at, 1)?[0])
                } else {
                    u32::from_le_bytes(take(at, 4)?.try_into().unwrap())
                };
                let v = self
                    .memo
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| self.err(pos, format!("BINGET of memo {key}, never put")))?;
                self.stack.push(v);
            }
            b't' => {
                let items = self.pop_mark(pos)?;
                let d = over(&items);
                self.push(Value::Tuple(items, d));
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if self.stack.len() < n + self.marks.last().map_or(0, |m| m + 1) {
                    return Err(self.err(pos, format!("TUPLE{n} on a stack too short")));
                }
                let items = self.stack.split_off(self.stack.len() - n);
                let d = over(&items);
                self.push(Value::Tuple(items, d));
            }
            b'R' => {
                let args = self.pop(pos)?;
                let func = self.pop(pos)?;
                if !matches!(*args, Value::Tuple(..)) {
                    return Err(self.err(pos, "REDUCE's arguments are not a tuple".into()));
                }
                let d = over([&func, &args]);
                self.push(Value::Reduce(func, args, d));
            }
            b'b' => {
                // BUILD sets the state of `obj` in place: memo entries that hold it
                // (numpy reuses a dtype by BINGET) see the built object.
                let state = self.pop(pos)?;
                let obj = self.pop(pos)?;
                let d = over([&obj, &state]);
                self.replace_top_memo(&obj.clone(), Value::Build(obj, state, d));
            }
            b'Q' => {
                let id = self.pop(pos)?;
                let d = over([&id]);
                self.push(Value::PersId(id, d));
            }
            b's' | b'u' => {
                let items = if op == b's' {
                    let v = self.pop(pos)?;
                    let k = self.pop(pos)?;
                    vec![k, v]
                } else {
                    self.pop_mark(pos)?
                };
                if items.len() % 2 != 0 {
                    return Err(self.err(pos, "SETITEMS with an odd number of values".into()));
                }
                let d = self.pop(pos)?;
                let Value::Dict(entries, depth) = &*d else {
                    return Err(self.err(pos, "SETITEM(S) on a value that is not a dict".into()));
                };
                let depth = (*depth).max(over(&items));
                let mut entries: Vec<_> = entries.clone();
                for kv in items.chunks_exact(2) {
                    entries.push((kv[0].clone(), kv[1].clone()));
                }
                self.replace_top_memo(&d, Value::Dict(entries, depth));
            }
            b'a' | b'e' => {
                let items = if op == b'a' {
                    vec![self.pop(pos)?]
                } else {
                    self.pop_mark(pos)?
                };
                let l = self.pop(pos)?;
                let Value::List(old, depth) = &*l else {
                    return Err(self.err(pos, "APPEND(S) on a value that is not a list".into()));
                };
                let depth = (*depth).max(over(&items));
                let mut all = old.clone();
                all.extend(items);
                self.replace_top_memo(&l, Value::List(all, depth));
            }
            _ => {
                return Err(self.err(
                    pos,
                    format!(
                        "opcode {op:#04x} ({}) is not one torch.save writes for a dict of arrays; refused",
                        opcode_name(op)
                    ),
                ))
            }
        }
        Ok(())
    }
    /// Pushes `new` in place of `old` (a dict or list filled, or an object built, after it
    /// was memoised: the memo entries that held `old` now hold `new`, as Python's in-place
    /// mutation would show).
    fn replace_top_memo(&mut self, old: &Rc<Value>, new: Value) {
        let new = Rc::new(new);
        for v in self.memo.values_mut() {
            if Rc::ptr_eq(v, old) {
                *v = new.clone();
            }
        }
        self.stack.push(new);
    }

    fn err(&self, pos: usize, what: String) -> StoreError {
        StoreError::input(self.path, format!("data.pkl: offset {pos}: {what}"))
    }

    fn push(&mut self, v: Value) {
        self.stack.push(Rc::new(v));
    }

    fn top(&self, pos: usize) -> Result<Rc<Value>, StoreError> {
        match self.stack.last() {
            Some(v) if !matches!(**v, Value::Mark) => Ok(v.clone()),
            _ => Err(self.err(pos, "a value expected on the stack".into())),
        }
    }

    fn pop(&mut self, pos: usize) -> Result<Rc<Value>, StoreError> {
        let v = self.top(pos)?;
        if self.marks.last() == Some(&(self.stack.len() - 1)) {
            return Err(self.err(pos, "a value expected above the mark".into()));
        }
        self.stack.pop();
        Ok(v)
    }

    fn pop_mark(&mut self, pos: usize) -> Result<Vec<Rc<Value>>, StoreError> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.err(pos, "no MARK on the stack".into()))?;
        let items = self.stack.split_off(m + 1);
        self.stack.pop();
        Ok(items)
    }

    fn line(&self, p: &[u8], at: &mut usize, pos: usize) -> Result<String, StoreError> {
        let rest = &p[*at..];
        let end = rest
            .iter()
            .take(256)
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.err(pos, "GLOBAL name without its newline".into()))?;
        let s = std::str::from_utf8(&rest[..end])
            .map_err(|_| self.err(pos, "GLOBAL name is not UTF-8".into()))?;
        *at += end + 1;
        Ok(s.to_string())
    }
}

/// The pickle opcode's name, for messages.
pub(super) fn opcode_name(op: u8) -> &'static str {
    match op {
        b'0' => "POP",
        b'1' => "POP_MARK",
        b'2' => "DUP",
        b'F' => "FLOAT",
        b'G' => "BINFLOAT",
        b'I' => "INT",
        b'L' => "LONG",
        0x8b => "LONG4",
        b'P' => "PERSID",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        0x81 => "NEWOBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        b'i' => "INST",
        b'o' => "OBJ",
        b'd' => "DICT",
        b'l' => "LIST",
        b'g' => "GET",
        b'p' => "PUT",
        _ => "unknown",
    }
}

/// The next `n` bytes of the pickle `p` at `at` (moved past them): an opcode's operand; an
/// error naming the opcode `op` at offset `pos` of `path` when they run past the end.
fn operand<'b>(
    p: &'b [u8],
    at: &mut usize,
    n: usize,
    (path, pos, op): (&Path, usize, u8),
) -> Result<&'b [u8], StoreError> {
    let s = p.get(*at..at.saturating_add(n)).ok_or_else(|| {
        StoreError::input(
            path,
            format!("data.pkl: offset {pos}: opcode {op:#04x} runs past the pickle's end"),
        )
    })?;
    *at += n;
    Ok(s)
}
