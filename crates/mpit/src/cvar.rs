//! Control variable handles: typed reads and writes.

use crate::catalogue::CvarInfo;
use crate::error::{Error, Result};
use crate::ffi::{self, Object};
use crate::handle::CvarHandle;
use crate::session::MpiT;
use crate::value::Value;
use std::marker::PhantomData;

/// An open control variable: an MPI_T handle, freed on drop, that borrows
/// the [`MpiT`] guard it was opened under.
#[derive(Debug)]
pub struct Cvar<'t> {
    info: CvarInfo,
    /// `None` once closed.
    handle: Option<CvarHandle>,
    count: usize,
    _mpit: PhantomData<&'t MpiT>,
}

impl<'t> Cvar<'t> {
    /// Opens a handle on `info`, bound to `object` when the variable is
    /// bound (pass [`Object::None`] otherwise).
    pub fn open(_mpit: &'t MpiT, info: &CvarInfo, object: Object) -> Result<Cvar<'t>> {
        check_binding(&info.name, info.binding, object)?;
        let api = ffi::api()?;
        crate::quirks::refuse_unloaded(api, &info.name)?;
        let (handle, count) =
            ffi::cvar_handle_alloc(api, info.index, object).map_err(|e| e.about(&info.name))?;
        Ok(Cvar {
            info: info.clone(),
            handle: Some(handle),
            count: usize::try_from(count).unwrap_or(0),
            _mpit: PhantomData,
        })
    }

    /// The variable's metadata.
    pub fn info(&self) -> &CvarInfo {
        &self.info
    }

    /// The number of elements (characters for a string).
    pub fn count(&self) -> usize {
        self.count
    }

    fn buffer(&self) -> Vec<u64> {
        vec![0u64; (self.count.max(1) * self.info.datatype.size()).div_ceil(8) + 1]
    }

    /// Reads the current value.
    pub fn read(&self) -> Result<Value> {
        let mut buf = self.buffer();
        ffi::cvar_read(ffi::api()?, self.live()?, &mut buf)
            .map_err(|e| e.about(&self.info.name))?;
        Ok(Value::decode(self.info.datatype, self.count, &buf))
    }

    /// Reads the value of an enumerated variable as its item's name.
    pub fn read_enum_name(&self) -> Result<String> {
        let value = self.read()?;
        let enumeration = self
            .info
            .enumeration
            .as_ref()
            .ok_or_else(|| Error::BadValue {
                variable: self.info.name.clone(),
                message: "this variable is not an enumeration".into(),
            })?;
        let raw = value.as_i64().unwrap_or_default();
        Ok(enumeration
            .name_of(raw)
            .map_or_else(|| raw.to_string(), str::to_string))
    }

    /// Writes a value after checking the variable's scope (CONSTANT and
    /// READONLY refuse writes) and that the value fits its type and count.
    pub fn write(&self, value: &Value) -> Result<()> {
        if !self.info.scope.is_writable() {
            return Err(Error::NotWritable {
                variable: self.info.name.clone(),
                scope: self.info.scope.to_string(),
            });
        }
        self.write_unchecked(value)
    }

    /// Writes an enumerated variable by item name (case-insensitive).
    pub fn write_enum_name(&self, item: &str) -> Result<()> {
        let enumeration = self
            .info
            .enumeration
            .as_ref()
            .ok_or_else(|| Error::BadValue {
                variable: self.info.name.clone(),
                message: "this variable is not an enumeration".into(),
            })?;
        let value = enumeration.value_of(item).ok_or_else(|| Error::BadValue {
            variable: self.info.name.clone(),
            message: format!(
                "`{item}` is not one of {}",
                enumeration
                    .items
                    .iter()
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
        self.write(&Value::Int(vec![i64::from(value)]))
    }

    /// Writes without the scope check, leaving the decision to the MPI
    /// library (which answers `MPI_T_ERR_CVAR_SET_NEVER` or similar). For
    /// experiments and tests of the library's own behaviour.
    pub fn write_unchecked(&self, value: &Value) -> Result<()> {
        let buf = value
            .encode(self.info.datatype, self.count)
            .map_err(|e| Error::BadValue {
                variable: self.info.name.clone(),
                message: e.0,
            })?;
        ffi::cvar_write(ffi::api()?, self.live()?, &buf).map_err(|e| e.about(&self.info.name))
    }

    /// Writes a scalar integer variable (`MPI_INT`, `MPI_UNSIGNED` and the
    /// other integer types of one element) without allocating: for writes
    /// on the application's own calls (collective algorithm selection).
    /// Checks the scope like [`Cvar::write`]; errors name the variable.
    pub fn write_scalar_int(&self, value: i64) -> Result<()> {
        if !self.info.scope.is_writable() {
            return Err(Error::NotWritable {
                variable: self.info.name.clone(),
                scope: self.info.scope.to_string(),
            });
        }
        let size = self.info.datatype.size();
        let integer = self.info.datatype.is_integer();
        if self.count != 1 || !integer || size == 0 || size > 8 {
            return Err(Error::BadValue {
                variable: self.info.name.clone(),
                message: format!(
                    "not a scalar integer ({} x {})",
                    self.count,
                    self.info.datatype.short()
                ),
            });
        }
        // Little-endian hosts only store the low bytes first; the buffer is
        // the value's bytes in native order, truncated to the type's size.
        let mut buf = [0u64; 1];
        let bytes = value.to_ne_bytes();
        let mut out = [0u8; 8];
        if cfg!(target_endian = "little") {
            out[..size].copy_from_slice(&bytes[..size]);
        } else {
            out[..size].copy_from_slice(&bytes[8 - size..]);
        }
        buf[0] = u64::from_ne_bytes(out);
        ffi::cvar_write(ffi::api()?, self.live()?, &buf).map_err(|e| e.about(&self.info.name))
    }

    fn live(&self) -> Result<&CvarHandle> {
        // Only `close` (which takes `self`) empties it.
        self.handle.as_ref().ok_or(Error::NoMpi)
    }

    /// Frees the handle now and says whether the library did.
    pub fn close(mut self) -> Result<()> {
        let handle = self.handle.take();
        free(handle, &self.info.name)
    }
}

fn free(handle: Option<CvarHandle>, name: &str) -> Result<()> {
    match handle {
        Some(h) => ffi::cvar_handle_free(ffi::api()?, h).map_err(|e| e.about(name)),
        None => Ok(()),
    }
}

impl Drop for Cvar<'_> {
    fn drop(&mut self) {
        // A failed free leaks one handle; the caller that cares calls
        // `close` and records it, a plain drop says it on standard error.
        if let Err(e) = free(self.handle.take(), &self.info.name) {
            crate::say_always!("mpit-tuner: {e}");
        }
    }
}

/// Checks that an object is given exactly when the variable is bound, and of
/// the right kind.
pub(crate) fn check_binding(
    name: &str,
    binding: crate::meta::Binding,
    object: Object,
) -> Result<()> {
    use crate::meta::Binding;
    let message = match (binding, object) {
        (Binding::NoObject, Object::None) => return Ok(()),
        (b, o) if b == o.binding() => return Ok(()),
        (Binding::NoObject, o) => format!("is not bound, but a {} was given", o.binding().short()),
        (b, Object::None) => format!("is bound to {} objects; give one", b.short()),
        (b, o) => format!(
            "is bound to {} objects, not to a {}",
            b.short(),
            o.binding().short()
        ),
    };
    Err(Error::Binding {
        variable: name.to_string(),
        message,
    })
}
