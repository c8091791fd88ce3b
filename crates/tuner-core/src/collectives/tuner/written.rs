//! The variables the tuner writes around the application's calls: writes
//! checked and read back, and what one costs.

use super::*;

/// A variable the tuner writes around the application's calls.
pub(super) struct Written<V: AlgorithmVar> {
    pub(super) cvar: V,
    /// The value set now (process-wide).
    pub(super) current: AtomicI64,
    /// The first write error, reported once.
    pub(super) failed: AtomicBool,
    /// The application wrote the variable itself: never written again.
    pub(super) foreign: AtomicBool,
}

impl<V: AlgorithmVar> Written<V> {
    pub(super) fn new(cvar: V, value: i64) -> Written<V> {
        Written {
            cvar,
            current: AtomicI64::new(value),
            failed: AtomicBool::new(false),
            foreign: AtomicBool::new(false),
        }
    }

    /// Whether `value` is set now (the compare the wrapper inlines).
    #[inline(always)]
    pub(super) fn holds(&self, value: i64) -> bool {
        self.current.load(Relaxed) == value
    }

    /// Writes `value` unless it is set already, or the application's own.
    pub(super) fn put(&self, value: i64) -> mpit::Result<()> {
        if !self.holds(value) && !self.foreign.load(Relaxed) {
            self.cvar.write_int(value)?;
            self.current.store(value, Relaxed);
        }
        Ok(())
    }

    pub(super) fn name(&self) -> &str {
        self.cvar.var_name()
    }
}

/// Writes `value` to `cvar` and reads it back: `Err` says why the library
/// does not take it (`refused: ...` or `reads back as ...`).
pub fn try_write(cvar: &Cvar<'_>, value: i64) -> Result<(), String> {
    match cvar.write_scalar_int(value).and_then(|()| cvar.read()) {
        Ok(v) if v.as_i64() == Some(value) => Ok(()),
        Ok(v) => Err(format!("reads back as {v:?}")),
        Err(e) => Err(format!("refused: {e}")),
    }
}

/// Opens the integer variable `info` (no object) and reads its value; an
/// error names it and says what failed.
pub(super) fn open_int(
    mpit: &'static MpiT,
    info: &CvarInfo,
) -> Result<(Cvar<'static>, i64), String> {
    let name = &info.name;
    let cvar = Cvar::open(mpit, info, mpit::Object::None)
        .map_err(|e| format!("{name}: cannot open it: {e}"))?;
    let value = cvar
        .read()
        .map_err(|e| format!("{name}: cannot read it: {e}"))?
        .as_i64()
        .ok_or_else(|| format!("{name}: its value is not an integer"))?;
    Ok((cvar, value))
}

/// What one write of `cvar` costs (ns): the fastest of a few batches of
/// writes of `value`, the value already set (so nothing changes), timed
/// per batch so that the clock's own cost is not in it.
pub fn write_cost(cvar: &Cvar<'static>, value: i64) -> mpit::Result<u64> {
    const BATCH: u32 = 64;
    let mut best = u64::MAX;
    for _ in 0..4 {
        let start = Instant::now();
        for _ in 0..BATCH {
            cvar.write_scalar_int(value)?;
        }
        best = best.min(start.elapsed().as_nanos() as u64 / u64::from(BATCH));
    }
    Ok(best)
}
