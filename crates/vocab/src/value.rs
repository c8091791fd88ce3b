//! Typed values of MPI_T variables, and their conversion to and from the
//! raw buffers MPI_T reads and writes.

use crate::meta::Datatype;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The value of a variable: `count` elements of its datatype, or a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Value {
    /// Signed integers (`MPI_INT`, `MPI_COUNT`, `MPI_LONG`, `MPI_LONG_LONG`).
    Int(Vec<i64>),
    /// Unsigned integers (`MPI_UNSIGNED`, `MPI_UNSIGNED_LONG`, `MPI_UNSIGNED_LONG_LONG`).
    Uint(Vec<u64>),
    /// Doubles (`MPI_DOUBLE`).
    Double(Vec<f64>),
    /// A string (`MPI_CHAR`).
    Str(String),
}

impl Value {
    /// The number of elements (1 for a string).
    pub fn len(&self) -> usize {
        match self {
            Value::Int(v) => v.len(),
            Value::Uint(v) => v.len(),
            Value::Double(v) => v.len(),
            Value::Str(_) => 1,
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a double (`None` for strings or out of range).
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match self {
            Value::Int(v) => v.get(i).map(|x| *x as f64),
            Value::Uint(v) => v.get(i).map(|x| *x as f64),
            Value::Double(v) => v.get(i).copied(),
            Value::Str(_) => None,
        }
    }

    /// All elements as doubles (empty for strings).
    pub fn to_f64s(&self) -> Vec<f64> {
        (0..self.len()).filter_map(|i| self.get_f64(i)).collect()
    }

    /// The first element as a signed integer, when it is a number.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => v.first().copied(),
            Value::Uint(v) => v.first().and_then(|x| i64::try_from(*x).ok()),
            Value::Double(v) => v.first().map(|x| *x as i64),
            Value::Str(_) => None,
        }
    }

    /// The string, when it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Decodes `count` elements of `datatype` from a raw buffer.
    pub fn decode(datatype: Datatype, count: usize, buf: &[u64]) -> Value {
        let bytes = as_bytes(buf);
        let n = count.min(bytes.len() / datatype.size().max(1));
        let word = |i: usize, size: usize| -> [u8; 8] {
            let mut w = [0u8; 8];
            w[..size].copy_from_slice(&bytes[i * size..(i + 1) * size]);
            w
        };
        match datatype {
            Datatype::Char => {
                let text = &bytes[..count.min(bytes.len())];
                let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
                Value::Str(String::from_utf8_lossy(&text[..end]).into_owned())
            }
            Datatype::Double => {
                Value::Double((0..n).map(|i| f64::from_ne_bytes(word(i, 8))).collect())
            }
            Datatype::Int => Value::Int(
                (0..n)
                    .map(|i| {
                        let w = word(i, 4);
                        i32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as i64
                    })
                    .collect(),
            ),
            Datatype::Unsigned => Value::Uint(
                (0..n)
                    .map(|i| {
                        let w = word(i, 4);
                        u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64
                    })
                    .collect(),
            ),
            Datatype::Count | Datatype::Long | Datatype::LongLong => {
                let size = datatype.size();
                Value::Int((0..n).map(|i| signed(word(i, size), size)).collect())
            }
            Datatype::UnsignedLong
            | Datatype::UnsignedLongLong
            | Datatype::CBool
            | Datatype::Unknown => {
                let size = datatype.size();
                Value::Uint((0..n).map(|i| u64::from_ne_bytes(word(i, size))).collect())
            }
        }
    }

    /// Decodes into a slice of doubles without allocating; returns how many
    /// elements were written. Strings write nothing.
    #[inline]
    pub fn decode_f64_into(
        datatype: Datatype,
        count: usize,
        buf: &[u64],
        out: &mut [f64],
    ) -> usize {
        if datatype == Datatype::Char {
            return 0;
        }
        let bytes = as_bytes(buf);
        let size = datatype.size().max(1);
        let n = count.min(bytes.len() / size).min(out.len());
        let (src, out) = (&bytes[..n * size], &mut out[..n]);
        // One loop per element type, with fixed-size chunks (no
        // variable-length copy per element): this runs for every PVAR on
        // every sampling tick.
        fn each<const N: usize>(src: &[u8], out: &mut [f64], f: impl Fn([u8; N]) -> f64) {
            for (o, chunk) in out.iter_mut().zip(src.chunks_exact(N)) {
                let mut w = [0u8; N];
                w.copy_from_slice(chunk);
                *o = f(w);
            }
        }
        match (datatype, size) {
            (Datatype::Double, 8) => each::<8>(src, out, f64::from_ne_bytes),
            (Datatype::Int | Datatype::Long | Datatype::LongLong | Datatype::Count, 4) => {
                each::<4>(src, out, |w| i32::from_ne_bytes(w) as f64)
            }
            (Datatype::Long | Datatype::LongLong | Datatype::Count, 8) => {
                each::<8>(src, out, |w| i64::from_ne_bytes(w) as f64)
            }
            (_, 4) => each::<4>(src, out, |w| u32::from_ne_bytes(w) as f64),
            (_, 8) => each::<8>(src, out, |w| u64::from_ne_bytes(w) as f64),
            _ => {
                for (i, slot) in out.iter_mut().enumerate() {
                    let mut w = [0u8; 8];
                    let size = size.min(8);
                    w[..size].copy_from_slice(&src[i * size..(i + 1) * size]);
                    *slot = u64::from_ne_bytes(w) as f64;
                }
            }
        }
        n
    }

    /// Encodes this value as `count` elements of `datatype` (in words of 8
    /// bytes, as MPI_T buffers are aligned), checking that it fits.
    pub fn encode(&self, datatype: Datatype, count: usize) -> Result<Vec<u64>, ValueError> {
        let bad = ValueError;
        let size = datatype.size();
        let mut bytes = vec![0u8; (count.max(1) * size).div_ceil(8) * 8];
        match (datatype, self) {
            (Datatype::Char, Value::Str(s)) => {
                if s.len() + 1 > count {
                    return Err(bad(format!(
                        "a string of {} bytes does not fit in {count} characters",
                        s.len()
                    )));
                }
                bytes[..s.len()].copy_from_slice(s.as_bytes());
            }
            (Datatype::Char, _) => return Err(bad("this variable takes a string".into())),
            (_, Value::Str(_)) => {
                return Err(bad(format!(
                    "this variable takes {} number(s) of type {}, not a string",
                    count,
                    datatype.short()
                )))
            }
            _ => {
                if self.len() != count {
                    return Err(bad(format!(
                        "this variable has {count} element(s), the value has {}",
                        self.len()
                    )));
                }
                for i in 0..count {
                    let x = self.get_f64(i).unwrap_or(0.0);
                    let chunk = &mut bytes[i * size..(i + 1) * size];
                    encode_one(datatype, self, i, x, chunk).map_err(ValueError)?;
                }
            }
        }
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}

/// Why a value does not fit a variable (its type, count or range).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValueError(pub String);

fn encode_one(
    datatype: Datatype,
    value: &Value,
    i: usize,
    x: f64,
    out: &mut [u8],
) -> Result<(), String> {
    let int = || -> Result<i128, String> {
        match value {
            Value::Int(v) => Ok(v[i] as i128),
            Value::Uint(v) => Ok(v[i] as i128),
            _ if x.fract() == 0.0 && x.is_finite() => Ok(x as i128),
            _ => Err(format!("{x} is not an integer")),
        }
    };
    let range = |v: i128, lo: i128, hi: i128| {
        if v < lo || v > hi {
            Err(format!("{v} is out of range for {}", datatype.short()))
        } else {
            Ok(v)
        }
    };
    match datatype {
        Datatype::Double => out.copy_from_slice(&x.to_ne_bytes()),
        Datatype::Int => out.copy_from_slice(
            &(range(int()?, i32::MIN as i128, i32::MAX as i128)? as i32).to_ne_bytes(),
        ),
        Datatype::Unsigned => {
            out.copy_from_slice(&(range(int()?, 0, u32::MAX as i128)? as u32).to_ne_bytes())
        }
        Datatype::CBool => out.copy_from_slice(&[range(int()?, 0, 1)? as u8]),
        Datatype::Count | Datatype::Long | Datatype::LongLong => {
            let v = range(int()?, i64::MIN as i128, i64::MAX as i128)? as i64;
            out.copy_from_slice(&v.to_ne_bytes()[..out.len()]);
        }
        _ => {
            let v = range(int()?, 0, u64::MAX as i128)? as u64;
            out.copy_from_slice(&v.to_ne_bytes()[..out.len()]);
        }
    }
    Ok(())
}

fn signed(w: [u8; 8], size: usize) -> i64 {
    if size == 4 {
        i32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as i64
    } else {
        i64::from_ne_bytes(w)
    }
}

fn as_bytes(buf: &[u64]) -> &[u8] {
    bytemuck::cast_slice(buf)
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, v: &[T]) -> fmt::Result {
            if v.len() == 1 {
                return write!(f, "{}", v[0]);
            }
            f.write_str("[")?;
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{x}")?;
            }
            f.write_str("]")
        }
        match self {
            Value::Int(v) => list(f, v),
            Value::Uint(v) => list(f, v),
            Value::Double(v) => list(f, v),
            Value::Str(s) => write!(f, "\"{s}\""),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_datatype() {
        let cases = [
            (Datatype::Int, Value::Int(vec![-5, 7, i32::MAX as i64])),
            (Datatype::Unsigned, Value::Uint(vec![1, u32::MAX as u64])),
            (Datatype::UnsignedLong, Value::Uint(vec![u64::MAX, 0])),
            (Datatype::UnsignedLongLong, Value::Uint(vec![42])),
            (Datatype::Count, Value::Int(vec![-1, 1 << 40])),
            (Datatype::Long, Value::Int(vec![-3, 1 << 40])),
            (Datatype::LongLong, Value::Int(vec![i64::MIN, i64::MAX])),
            (Datatype::Double, Value::Double(vec![0.5, -2.25, 1e300])),
            (Datatype::CBool, Value::Uint(vec![1, 0, 1])),
        ];
        for (dt, v) in cases {
            let buf = v.encode(dt, v.len()).unwrap();
            assert_eq!(Value::decode(dt, v.len(), &buf), v, "{dt}");
            let mut out = vec![0.0; v.len()];
            assert_eq!(Value::decode_f64_into(dt, v.len(), &buf, &mut out), v.len());
            assert_eq!(out, v.to_f64s());
        }
        // A boolean takes 0 or 1 only.
        assert!(Value::Int(vec![2]).encode(Datatype::CBool, 1).is_err());
        let s = Value::Str("hello".into());
        let buf = s.encode(Datatype::Char, 16).unwrap();
        assert_eq!(Value::decode(Datatype::Char, 16, &buf), s);
    }

    #[test]
    fn refuses_what_does_not_fit() {
        assert!(Value::Int(vec![1 << 40]).encode(Datatype::Int, 1).is_err());
        assert!(Value::Int(vec![-1]).encode(Datatype::Unsigned, 1).is_err());
        assert!(Value::Double(vec![1.5]).encode(Datatype::Int, 1).is_err());
        assert!(Value::Int(vec![1, 2]).encode(Datatype::Int, 1).is_err());
        assert!(Value::Str("toolong".into())
            .encode(Datatype::Char, 4)
            .is_err());
        let err = Value::Str("x".into()).encode(Datatype::Int, 1).unwrap_err();
        assert!(err.0.contains("not a string"), "{err}");
    }
}
