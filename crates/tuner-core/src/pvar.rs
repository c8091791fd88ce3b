//! Performance variable sessions and handles: start, stop, typed reads.

use crate::catalogue::PvarInfo;
use crate::cvar::check_binding;
use crate::error::Result;
use crate::ffi::{self, Object};
use crate::meta::{Datatype, PvarClass};
use crate::session::MpiT;
use crate::value::Value;
use std::marker::PhantomData;

/// A PVAR session: an isolated set of handles, freed on drop (which frees
/// its handles too). Handles borrow their session.
#[derive(Debug)]
pub struct PvarSession<'t> {
    handle: ffi::SessionHandle,
    _mpit: PhantomData<&'t MpiT>,
}

impl<'t> PvarSession<'t> {
    /// Creates a session.
    pub fn new(_mpit: &'t MpiT) -> Result<PvarSession<'t>> {
        Ok(PvarSession {
            handle: ffi::pvar_session_create(ffi::api()?)?,
            _mpit: PhantomData,
        })
    }

    /// Allocates a handle on `info`, bound to `object` when the variable is
    /// bound. Non-continuous variables are not started: call
    /// [`Pvar::start`].
    pub fn open(&self, info: &PvarInfo, object: Object) -> Result<Pvar<'_>> {
        check_binding(&info.name, info.binding, object)?;
        let api = ffi::api()?;
        let (handle, count) = ffi::pvar_handle_alloc(api, self.handle, info.index, object)
            .map_err(|e| e.about(&info.name))?;
        let count = usize::try_from(count).unwrap_or(0);
        Ok(Pvar {
            session: self,
            reader: ffi::PvarReader::new(api)?,
            handle,
            name: info.name.clone(),
            class: info.class,
            datatype: info.datatype,
            continuous: info.continuous,
            count,
            started: false,
            object,
            buf: vec![0u64; (count.max(1) * info.datatype.size()).div_ceil(8) + 1],
        })
    }

    /// Stops every started handle of the session at once.
    pub fn stop_all(&self) -> Result<()> {
        ffi::pvar_stop_all(ffi::api()?, self.handle)
    }
}

impl Drop for PvarSession<'_> {
    fn drop(&mut self) {
        if let Ok(api) = ffi::api() {
            let _ = ffi::pvar_session_free(api, self.handle);
        }
    }
}

/// An allocated PVAR handle, freed on drop (stopped first if it was
/// started).
#[derive(Debug)]
pub struct Pvar<'s> {
    session: &'s PvarSession<'s>,
    reader: ffi::PvarReader,
    handle: ffi::PvarHandle,
    name: String,
    class: PvarClass,
    datatype: Datatype,
    continuous: bool,
    count: usize,
    started: bool,
    object: Object,
    buf: Vec<u64>,
}

impl Pvar<'_> {
    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The variable's class.
    pub fn class(&self) -> PvarClass {
        self.class
    }

    /// The number of elements; for bound variables it may depend on the
    /// object (e.g. the size of the communicator).
    pub fn count(&self) -> usize {
        self.count
    }

    /// The object the handle is bound to.
    pub fn object(&self) -> Object {
        self.object
    }

    /// Whether the variable runs without start/stop.
    pub fn is_continuous(&self) -> bool {
        self.continuous
    }

    /// Starts a non-continuous variable (a no-op for continuous ones).
    pub fn start(&mut self) -> Result<()> {
        if self.continuous || self.started {
            return Ok(());
        }
        ffi::pvar_start(ffi::api()?, self.session.handle, self.handle)
            .map_err(|e| e.about(&self.name))?;
        self.started = true;
        Ok(())
    }

    /// Stops a started variable.
    pub fn stop(&mut self) -> Result<()> {
        if !self.started {
            return Ok(());
        }
        ffi::pvar_stop(ffi::api()?, self.session.handle, self.handle)
            .map_err(|e| e.about(&self.name))?;
        self.started = false;
        Ok(())
    }

    /// Reads the current value.
    pub fn read(&mut self) -> Result<Value> {
        self.read_raw()?;
        Ok(Value::decode(self.datatype, self.count, &self.buf))
    }

    /// Reads the current value into `out` as doubles without allocating;
    /// returns the number of elements written (0 for strings).
    #[inline]
    pub fn read_into(&mut self, out: &mut [f64]) -> Result<usize> {
        self.read_raw()?;
        Ok(Value::decode_f64_into(
            self.datatype,
            self.count,
            &self.buf,
            out,
        ))
    }

    #[inline]
    fn read_raw(&mut self) -> Result<()> {
        self.reader
            .read(self.session.handle, self.handle, &mut self.buf)
            .map_err(|e| e.about(&self.name))
    }
}

impl Drop for Pvar<'_> {
    fn drop(&mut self) {
        if let Ok(api) = ffi::api() {
            if self.started {
                let _ = ffi::pvar_stop(api, self.session.handle, self.handle);
            }
            let _ = ffi::pvar_handle_free(api, self.session.handle, self.handle);
        }
    }
}
