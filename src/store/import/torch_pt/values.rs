//! Values to arrays: a tensor (`_rebuild_tensor_v2` over a persistent storage) or a numpy
//! array (`_reconstruct` then BUILD) described as a [`PtArray`], matched by the globals'
//! names.

use std::path::Path;
use std::rc::Rc;

use crate::store::StoreError;

use super::pickle::Value;
use super::{latin1_len, Data, Inline, PtArray, PtDtype};

pub(super) fn global_is(v: &Value, module: &str, name: &str) -> bool {
    matches!(v, Value::Global(m, n) if m == module && n == name)
}

pub(super) fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

pub(super) fn as_str(v: &Value) -> Option<&str> {
    match v {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

pub(super) fn as_tuple(v: &Value) -> Option<&[Rc<Value>]> {
    match v {
        Value::Tuple(t, _) => Some(t),
        _ => None,
    }
}

/// A tuple of non-negative integers (a shape or strides).
pub(super) fn dims(v: &Value) -> Option<Vec<u64>> {
    as_tuple(v)?
        .iter()
        .map(|x| as_int(x).and_then(|i| u64::try_from(i).ok()))
        .collect()
}

/// Bytes pickled at protocol 2 (`_codecs.encode(str, 'latin1')`) or 3+ (BINBYTES).
pub(super) fn bytes_of(v: &Value, pickle: &[u8]) -> Option<Inline> {
    match v {
        Value::Blob {
            start,
            len,
            text: false,
        } => Some(Inline::Raw {
            start: *start,
            len: *len,
        }),
        Value::Reduce(f, args, _) if global_is(f, "_codecs", "encode") => {
            let a = as_tuple(args)?;
            let [s, enc] = a else { return None };
            if as_str(enc)? != "latin1" {
                return None;
            }
            match &**s {
                Value::Str(s) => {
                    let mut out = Vec::with_capacity(s.len());
                    for c in s.chars() {
                        out.push(u8::try_from(u32::from(c)).ok()?);
                    }
                    Some(Inline::Owned(Rc::new(out)))
                }
                Value::Blob {
                    start,
                    len,
                    text: true,
                } => Some(Inline::Latin1 {
                    start: *start,
                    len: *len,
                    bytes: latin1_len(&pickle[*start..start + len])?,
                }),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The dict at the root, its values described.
pub(super) fn describe(
    path: &Path,
    root: &Value,
    pickle: &[u8],
) -> Result<Vec<(String, PtArray)>, StoreError> {
    let Value::Dict(items, _) = root else {
        return Err(StoreError::input(
            path,
            format!(
                "the pickle holds a {}, expected a dict of arrays",
                kind(root)
            ),
        ));
    };
    let mut out: Vec<(String, PtArray)> = Vec::with_capacity(items.len());
    for (k, v) in items {
        let key = as_str(k).ok_or_else(|| {
            StoreError::input(
                path,
                format!("a dict key is a {}, expected a string", kind(k)),
            )
        })?;
        let a = array(v, pickle)
            .map_err(|what| StoreError::input(path, format!("key {key:?}: {what}")))?;
        if out.iter().any(|(k, _)| k == key) {
            return Err(StoreError::input(path, format!("key {key:?} twice")));
        }
        out.push((key.to_string(), a));
    }
    Ok(out)
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::None => "None",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Str(_) => "str",
        Value::Blob { text: true, .. } => "str",
        Value::Blob { text: false, .. } => "bytes",
        Value::Tuple(..) => "tuple",
        Value::List(..) => "list",
        Value::Dict(..) => "dict",
        Value::Global(..) => "global",
        Value::Reduce(..) => "reduced object",
        Value::Build(..) => "built object",
        Value::PersId(..) => "persistent id",
        Value::Mark => "mark",
    }
}

/// A tensor or a numpy array.
pub(super) fn array(v: &Value, pickle: &[u8]) -> Result<PtArray, String> {
    match v {
        Value::Reduce(f, args, _) if global_is(f, "torch._utils", "_rebuild_tensor_v2") => {
            tensor(as_tuple(args).expect("REDUCE checks its tuple"))
        }
        Value::Build(obj, state, _) => numpy(obj, state, pickle),
        Value::Reduce(f, _, _) => match &**f {
            Value::Global(m, n) => Err(format!(
                "an object built by {m}.{n}, expected a tensor (torch._utils._rebuild_tensor_v2) or a numpy array"
            )),
            _ => Err("an object built by a non-global, expected a tensor or a numpy array".into()),
        },
        other => Err(format!(
            "a {}, expected a tensor or a numpy array",
            kind(other)
        )),
    }
}

/// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[,
/// metadata])`.
pub(super) fn tensor(args: &[Rc<Value>]) -> Result<PtArray, String> {
    if !(6..=7).contains(&args.len()) {
        return Err(format!(
            "_rebuild_tensor_v2 with {} arguments, expected 6 or 7",
            args.len()
        ));
    }
    let Value::PersId(id, _) = &*args[0] else {
        return Err("a tensor whose storage is not a persistent id".into());
    };
    let id = as_tuple(id).ok_or("a storage id that is not a tuple")?;
    let [tag, class, key, _location, numel] = id else {
        return Err(format!(
            "a storage id of {} fields, expected ('storage', class, key, location, numel)",
            id.len()
        ));
    };
    if as_str(tag) != Some("storage") {
        return Err("a persistent id that is not a storage".into());
    }
    let dtype = match &**class {
        Value::Global(m, n) if m == "torch" => match n.as_str() {
            "LongStorage" => PtDtype::I64,
            "IntStorage" => PtDtype::I32,
            "FloatStorage" => PtDtype::Other("float32"),
            "DoubleStorage" => PtDtype::Other("float64"),
            "HalfStorage" => PtDtype::Other("float16"),
            "BFloat16Storage" => PtDtype::Other("bfloat16"),
            "ShortStorage" => PtDtype::Other("int16"),
            "CharStorage" => PtDtype::Other("int8"),
            "ByteStorage" => PtDtype::Other("uint8"),
            "BoolStorage" => PtDtype::Other("bool"),
            _ => PtDtype::Other("an unknown torch storage"),
        },
        _ => return Err("a storage class that is not torch.<Type>Storage".into()),
    };
    let key = match &**key {
        Value::Str(s)
            if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            s.clone()
        }
        _ => return Err("a storage key that is not a plain name".into()),
    };
    let numel = as_int(numel)
        .and_then(|i| u64::try_from(i).ok())
        .ok_or("a storage size that is not a non-negative integer")?;
    let offset = as_int(&args[1])
        .and_then(|i| u64::try_from(i).ok())
        .ok_or("a storage offset that is not a non-negative integer")?;
    let shape = dims(&args[2]).ok_or("a size that is not a tuple of non-negative integers")?;
    let stride = dims(&args[3]).ok_or("a stride that is not a tuple of non-negative integers")?;
    if shape.len() != stride.len() {
        return Err(format!(
            "size {shape:?} and stride {stride:?} of different lengths"
        ));
    }
    if shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .is_none()
    {
        return Err(format!("size {shape:?} overflows"));
    }
    Ok(PtArray {
        dtype,
        shape,
        stride,
        offset,
        data: Data::Storage { key, numel },
    })
}

/// `_reconstruct(ndarray, (0,), b'b')` then BUILD with `(1, shape, dtype, fortran, data)`.
pub(super) fn numpy(obj: &Value, state: &Value, pickle: &[u8]) -> Result<PtArray, String> {
    let ok_ctor = match obj {
        Value::Reduce(f, args, _) => {
            (global_is(f, "numpy.core.multiarray", "_reconstruct")
                || global_is(f, "numpy._core.multiarray", "_reconstruct"))
                && as_tuple(args)
                    .and_then(|a| a.first())
                    .is_some_and(|c| global_is(c, "numpy", "ndarray"))
        }
        _ => false,
    };
    if !ok_ctor {
        return Err("a built object that is not a numpy array".into());
    }
    let st = as_tuple(state).ok_or("a numpy array whose state is not a tuple")?;
    let [version, shape, dtype, fortran, data] = st else {
        return Err(format!(
            "a numpy array state of {} fields, expected 5",
            st.len()
        ));
    };
    if as_int(version) != Some(1) {
        return Err("a numpy array state of an unknown version".into());
    }
    let shape = dims(shape).ok_or("a numpy shape that is not a tuple of non-negative integers")?;
    let n = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("numpy shape {shape:?} overflows"))?;
    if !matches!(**fortran, Value::Bool(false)) {
        return Err("a Fortran-order numpy array, expected C order".into());
    }
    let dtype = numpy_dtype(dtype)?;
    let data = bytes_of(data, pickle).ok_or("a numpy array whose data is not bytes")?;
    if dtype.size() > 0 && data.len() != n.saturating_mul(dtype.size()) {
        return Err(format!(
            "numpy shape {shape:?} of {} needs {} bytes, its data holds {}",
            dtype.name(),
            n.saturating_mul(dtype.size()),
            data.len()
        ));
    }
    let mut stride = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * shape[d + 1];
    }
    Ok(PtArray {
        dtype,
        shape,
        stride,
        offset: 0,
        data: Data::Inline(data),
    })
}

/// `dtype('i8', False, True)` then BUILD with `(3, '<', ...)`: little-endian int64/int32.
pub(super) fn numpy_dtype(v: &Value) -> Result<PtDtype, String> {
    let Value::Build(obj, state, _) = v else {
        return Err("a numpy dtype that is not a built numpy.dtype".into());
    };
    let Value::Reduce(f, args, _) = &**obj else {
        return Err("a numpy dtype that is not numpy.dtype(...)".into());
    };
    if !global_is(f, "numpy", "dtype") {
        return Err("a numpy dtype that is not numpy.dtype(...)".into());
    }
    let name = as_tuple(args)
        .and_then(|a| a.first())
        .and_then(|s| as_str(s))
        .ok_or("a numpy dtype without its name")?;
    let order = as_tuple(state)
        .and_then(|s| s.get(1))
        .and_then(|s| as_str(s))
        .ok_or("a numpy dtype without its byte order")?;
    Ok(match (name, order) {
        ("i8", "<") => PtDtype::I64,
        ("i4", "<") => PtDtype::I32,
        ("i8" | "i4", _) => PtDtype::Other("big-endian integer"),
        ("f4", _) => PtDtype::Other("float32"),
        ("f8", _) => PtDtype::Other("float64"),
        ("f2", _) => PtDtype::Other("float16"),
        ("b1", _) => PtDtype::Other("bool"),
        ("u1", _) => PtDtype::Other("uint8"),
        _ => PtDtype::Other("an unsupported numpy dtype"),
    })
}
