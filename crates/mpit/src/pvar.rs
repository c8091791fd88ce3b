//! Performance variable sessions and handles: start, stop, typed reads.

use crate::catalogue::PvarInfo;
use crate::cvar::check_binding;
use crate::error::{Error, Result};
use crate::ffi::{self, Object};
use crate::handle::{PvarHandle, SessionHandle};
use crate::meta::{Datatype, PvarClass};
use crate::session::MpiT;
use crate::value::Value;
use std::marker::PhantomData;

/// A PVAR session that owns its MPI_T session without borrowing the
/// [`MpiT`] guard, for state that lives across calls (the sampler). Its
/// [`PvarHandle`]s are plain values it allocates: free them
/// ([`PvarHandle::free`]) before the session, then [`close`] it; dropping
/// it unclosed frees the session there, and says on this rank's standard
/// error if the library refused.
///
/// [`close`]: OwnedPvarSession::close
#[derive(Debug)]
pub struct OwnedPvarSession {
    handle: Option<SessionHandle>,
}

impl OwnedPvarSession {
    /// Creates a session (`MPI_T_pvar_session_create`).
    pub fn new(_mpit: &MpiT) -> Result<OwnedPvarSession> {
        Ok(OwnedPvarSession {
            handle: Some(ffi::pvar_session_create(ffi::api()?)?),
        })
    }

    /// The session's handle, for [`PvarHandle`] calls and reads.
    pub fn handle(&self) -> SessionHandle {
        self.handle
            .expect("an OwnedPvarSession holds its session until closed")
    }

    /// Allocates a handle on variable `index`, bound to `object`; returns it
    /// with its element count.
    pub fn alloc(&self, index: i32, object: Object) -> Result<(PvarHandle, i32)> {
        ffi::pvar_handle_alloc(ffi::api()?, self.handle(), index, object)
    }

    /// Frees the session now (`MPI_T_pvar_session_free`); its handles must
    /// have been freed first.
    pub fn close(mut self) -> Result<()> {
        match self.handle.take() {
            Some(session) => ffi::pvar_session_free(ffi::api()?, session),
            None => Ok(()),
        }
    }
}

impl Drop for OwnedPvarSession {
    fn drop(&mut self) {
        if let Some(session) = self.handle.take() {
            if let Err(e) = ffi::api().and_then(|api| ffi::pvar_session_free(api, session)) {
                crate::say_always!("mpit-tuner: freeing a PVAR session: {e}");
            }
        }
    }
}

impl PvarHandle {
    /// Starts the variable (`MPI_T_pvar_start`).
    pub fn start(&self, session: SessionHandle) -> Result<()> {
        ffi::pvar_start(ffi::api()?, session, self)
    }

    /// Stops the variable (`MPI_T_pvar_stop`).
    pub fn stop(&self, session: SessionHandle) -> Result<()> {
        ffi::pvar_stop(ffi::api()?, session, self)
    }

    /// Frees the handle (`MPI_T_pvar_handle_free`) in the session it was
    /// allocated in.
    pub fn free(self, session: SessionHandle) -> Result<()> {
        ffi::pvar_handle_free(ffi::api()?, session, self)
    }
}

/// A PVAR session: an isolated set of handles, freed on drop (which frees
/// its handles too). Handles borrow their session.
#[derive(Debug)]
pub struct PvarSession<'t> {
    inner: OwnedPvarSession,
    _mpit: PhantomData<&'t MpiT>,
}

impl<'t> PvarSession<'t> {
    /// Creates a session.
    pub fn new(mpit: &'t MpiT) -> Result<PvarSession<'t>> {
        Ok(PvarSession {
            inner: OwnedPvarSession::new(mpit)?,
            _mpit: PhantomData,
        })
    }

    fn handle(&self) -> SessionHandle {
        self.inner.handle()
    }

    /// Allocates a handle on `info`, bound to `object` when the variable is
    /// bound. Non-continuous variables are not started: call
    /// [`Pvar::start`].
    pub fn open(&self, info: &PvarInfo, object: Object) -> Result<Pvar<'_>> {
        check_binding(&info.name, info.binding, object)?;
        let api = ffi::api()?;
        crate::quirks::refuse_unloaded(api, &info.name)?;
        let (handle, count) = ffi::pvar_handle_alloc(api, self.handle(), info.index, object)
            .map_err(|e| e.about(&info.name))?;
        let count = usize::try_from(count).unwrap_or(0);
        Ok(Pvar {
            session: self,
            reader: ffi::PvarReader::new(api)?,
            handle: Some(handle),
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
        ffi::pvar_stop_all(ffi::api()?, self.handle())
    }

    /// Frees the session now, returning the library's error (dropping it
    /// does the same and says an error on standard error).
    pub fn close(self) -> Result<()> {
        self.inner.close()
    }
}

/// An allocated PVAR handle, freed on drop (stopped first if it was
/// started).
#[derive(Debug)]
pub struct Pvar<'s> {
    session: &'s PvarSession<'s>,
    reader: ffi::PvarReader,
    handle: Option<PvarHandle>,
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
        ffi::pvar_start(ffi::api()?, self.session.handle(), self.live()?)
            .map_err(|e| e.about(&self.name))?;
        self.started = true;
        Ok(())
    }

    /// Stops a started variable.
    pub fn stop(&mut self) -> Result<()> {
        if !self.started {
            return Ok(());
        }
        ffi::pvar_stop(ffi::api()?, self.session.handle(), self.live()?)
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
        let handle = self.handle.as_ref().ok_or(Error::NoMpi)?;
        self.reader
            .read(self.session.handle(), handle, &mut self.buf)
            .map_err(|e| e.about(&self.name))
    }

    fn live(&self) -> Result<&PvarHandle> {
        self.handle.as_ref().ok_or(Error::NoMpi)
    }

    /// Stops the variable if it was started and frees its handle now,
    /// returning the first error (dropping it does the same and says the
    /// errors on standard error).
    pub fn close(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        let Some(handle) = self.handle.take() else {
            return Ok(());
        };
        let session = self.session.handle();
        let stopped = if self.started {
            handle.stop(session).map_err(|e| e.about(&self.name))
        } else {
            Ok(())
        };
        let freed = handle.free(session).map_err(|e| e.about(&self.name));
        stopped.and(freed)
    }
}

impl Drop for Pvar<'_> {
    fn drop(&mut self) {
        // Handles before their session: the session outlives this borrow.
        if let Err(e) = self.release() {
            crate::say_always!("mpit-tuner: {e}");
        }
    }
}
