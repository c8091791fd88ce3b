//! The sampler: chooses PVARs, allocates handles (unbound ones once, bound
//! ones for every tracked communicator and window), starts non-continuous
//! ones, reads them on every tick into class-aware [`Metric`]s, and picks up
//! variables that appear later.
//!
//! It runs on the helper thread and calls only MPI_T routines.

use crate::run::Config;
use crate::sample::objects::{ObjectTable, Tracked, MAX_HANDLES_PER_OBJECT};
use crate::sample::toolmetrics::{self, Family};
use crate::sample::Metric;
use mpit::meta::{Binding, PvarClass};
use mpit::value::Value;
use mpit::MpiT;
use mpit::Result;
use mpit::{Catalogue, PvarInfo};
use mpit::{Object, OwnedPvarSession, PvarHandle, PvarReader, SessionHandle};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use vocab::record::{ObjectChange, SampleVar, SampledVariable};

/// What names one variable of a snapshot: the PVAR (or tool metric), the
/// object it is bound to, its class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarName {
    /// The PVAR's name, or a tool metric's (`tool.allreduce.calls`).
    pub name: String,
    /// The object it is bound to (`world`, `comm3`, `win1`), if bound.
    pub object: Option<String>,
    /// Its class.
    pub class: PvarClass,
}

/// The variables of a snapshot, in their order: the part of a snapshot
/// that changes only when the sampler's list of variables does (a
/// variable's first sample, a communicator tracked or freed, PVARs added by
/// a refresh, a tool metric's first call). Every snapshot of the same list
/// shares one layout (`Arc`), so a tick copies no name; a new list is a new
/// layout with a new [`Layout::id`], which tells readers that bound
/// variables to positions to bind them again.
#[derive(Debug, Default)]
pub struct Layout {
    id: u64,
    vars: Vec<VarName>,
}

/// The last layout id handed out (0 is the empty default layout's).
static LAYOUT_IDS: AtomicU64 = AtomicU64::new(0);

impl Layout {
    /// A layout of `vars`, with a new id.
    pub fn new(vars: Vec<VarName>) -> Layout {
        Layout {
            id: Layout::new_id(),
            vars,
        }
    }

    /// An id no layout of this process has had, for any list of values by
    /// position (the replay's PVARs, a benchmark's).
    pub fn new_id() -> u64 {
        LAYOUT_IDS.fetch_add(1, Relaxed) + 1
    }

    /// The id: two layouts of this process have the same id only if they
    /// are the same layout (0 for [`Layout::default`], which is empty).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The variables, in order.
    pub fn vars(&self) -> &[VarName] {
        &self.vars
    }

    /// The position of the variable `name`: unbound, or bound to `world`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.vars
            .iter()
            .position(|v| v.name == name && v.object.as_deref().is_none_or(|o| o == "world"))
    }
}

/// One variable of a snapshot: its name, object and class (from the
/// layout) and its metrics.
///
/// In the log it is written compactly, with the fields that mean something
/// for its class: `value` always; `delta` and `rate` for counters,
/// aggregates and timers; `changes` and `change_total` for watermarks;
/// `min`, `max` and `mean` for the others.
#[derive(Debug, Clone, Copy)]
pub struct SampledVar<'a> {
    /// The PVAR's name.
    pub name: &'a str,
    /// The object it is bound to (`world`, `comm3`, `win1`), if bound.
    pub object: Option<&'a str>,
    /// Its class.
    pub class: PvarClass,
    /// The metrics.
    pub metric: &'a Metric,
}

impl<'a> SampledVar<'a> {
    /// The sample entry of the log (borrowed: no copy of the values).
    pub fn record(&self) -> SampleVar<'a> {
        let m = self.metric;
        let (acc, wm) = (self.class.is_accumulating(), self.class.is_watermark());
        let other = !acc && !wm;
        SampleVar {
            name: Cow::Borrowed(self.name),
            object: self.object.map(Cow::Borrowed),
            class: self.class,
            value: Cow::Borrowed(&m.value),
            delta: acc.then_some(Cow::Borrowed(&m.delta[..])),
            rate: acc.then_some(Cow::Borrowed(&m.rate[..])),
            changes: wm.then_some(Cow::Borrowed(&m.changes[..])),
            change_total: wm.then_some(Cow::Borrowed(&m.change_total[..])),
            min: other.then_some(Cow::Borrowed(&m.min[..])),
            max: other.then_some(Cow::Borrowed(&m.max[..])),
            mean: other.then(|| m.mean()),
        }
    }
}

/// Everything the sampler knows at one tick, published lock-free for other
/// readers (policies, tests): the time, the [`Layout`] (shared with the
/// other snapshots of the same variables) and one [`Metric`] per variable
/// of the layout. [`Sampler::snapshot_into`] refills a snapshot in place.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Seconds since the tuner started.
    pub t: f64,
    /// Sample number (0 before the first sample).
    pub seq: u64,
    layout: Arc<Layout>,
    metrics: Vec<Metric>,
}

impl Snapshot {
    /// A snapshot of `vars` (a new layout), for tests and benchmarks.
    pub fn new(t: f64, seq: u64, vars: Vec<(VarName, Metric)>) -> Snapshot {
        let (names, metrics) = vars.into_iter().unzip();
        Snapshot {
            t,
            seq,
            layout: Arc::new(Layout::new(names)),
            metrics,
        }
    }

    /// The variables' names, objects and classes.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The variables, in the layout's order.
    pub fn vars(&self) -> impl ExactSizeIterator<Item = SampledVar<'_>> + '_ {
        self.layout
            .vars
            .iter()
            .zip(&self.metrics)
            .map(|(v, metric)| SampledVar {
                name: &v.name,
                object: v.object.as_deref(),
                class: v.class,
                metric,
            })
    }

    /// The latest value of the variable at `position` in the layout.
    pub fn value(&self, position: usize) -> Option<&[f64]> {
        self.metrics.get(position).map(|m| m.value.as_slice())
    }

    /// The variable named `name` (unbound, or bound to `world`), found by
    /// name: for the cold paths; the engine binds positions instead.
    pub fn get(&self, name: &str) -> Option<SampledVar<'_>> {
        let i = self.layout.position(name)?;
        self.vars().nth(i)
    }
}

/// A handle on an unbound variable.
#[derive(Debug)]
struct Unbound {
    info: PvarInfo,
    handle: PvarHandle,
    count: usize,
    started: bool,
    metric: Metric,
}

/// Per tracked object: the bound variables whose handles it carries (in the
/// order of its handles), their counts and metrics.
#[derive(Debug)]
struct ObjectVars {
    label: String,
    vars: Vec<(usize, usize, Metric)>,
}

/// What happened to objects during a tick, for the log.
#[derive(Debug, Clone, Serialize)]
pub struct ObjectEvent {
    /// `created` or `freed`.
    pub event: ObjectChange,
    /// `world`, `comm3`, `win1`.
    pub object: String,
    /// Handles allocated (created) for bound variables.
    pub handles: usize,
}

/// The sampler's state.
#[derive(Debug)]
pub struct Sampler {
    session: OwnedPvarSession,
    reader: PvarReader,
    catalogue: Catalogue,
    unbound: Vec<Unbound>,
    bound: Vec<PvarInfo>,
    objects: BTreeMap<u64, ObjectVars>,
    considered: HashSet<i32>,
    warnings: Vec<String>,
    buf: Vec<u64>,
    reaped: Vec<(u64, Object)>,
    /// The interposer's own counters (`tool.*`), for families with calls.
    tool: BTreeMap<String, (PvarClass, Metric)>,
    /// Variables whose read failed and was reported.
    read_failures: HashSet<String>,
    /// The variables of the snapshots, until they change.
    layout: Arc<Layout>,
    /// Whether the variables changed since `layout` was made.
    layout_stale: bool,
    /// Buffers of `sample`, kept from tick to tick: one variable's values,
    /// the objects whose handles are read.
    values: Vec<f64>,
    active: Vec<Tracked>,
}

impl Sampler {
    /// Creates the session and allocates handles for every selected unbound
    /// variable of `catalogue`.
    pub fn new(mpit: &MpiT, catalogue: Catalogue, config: &Config) -> Result<Sampler> {
        let mut sampler = Sampler {
            session: OwnedPvarSession::new(mpit)?,
            reader: PvarReader::current()?,
            catalogue,
            unbound: Vec::new(),
            bound: Vec::new(),
            objects: BTreeMap::new(),
            considered: HashSet::new(),
            warnings: Vec::new(),
            buf: vec![0; 64],
            reaped: Vec::new(),
            tool: BTreeMap::new(),
            read_failures: HashSet::new(),
            layout: Arc::default(),
            layout_stale: true,
            values: Vec::new(),
            active: Vec::new(),
        };
        sampler.adopt_new_variables(config);
        Ok(sampler)
    }

    /// The catalogue the sampler works from.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// Messages about variables that could not be sampled, since the last
    /// call.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Names of the variables sampled, with their binding, for the log
    /// header.
    pub fn sampled_variables(&self) -> Vec<SampledVariable> {
        let mut out: Vec<SampledVariable> = self
            .unbound
            .iter()
            .map(|u| SampledVariable {
                name: u.info.name.clone(),
                class: u.info.class,
                datatype: u.info.datatype,
                count: Some(u.count),
                binding: u.info.binding,
                continuous: u.info.continuous,
            })
            .collect();
        out.extend(self.bound.iter().map(|b| SampledVariable {
            name: b.name.clone(),
            class: b.class,
            datatype: b.datatype,
            count: None,
            binding: b.binding,
            continuous: b.continuous,
        }));
        out
    }

    /// Starts sampling the variables of `catalogue` (the library's, grown
    /// since the sampler's) that it does not sample yet.
    pub fn adopt(&mut self, catalogue: &Catalogue, config: &Config) {
        self.catalogue = catalogue.clone();
        self.adopt_new_variables(config);
    }

    fn adopt_new_variables(&mut self, config: &Config) {
        let session = self.session.handle();
        let fresh: Vec<PvarInfo> = self
            .catalogue
            .pvars()
            .iter()
            .filter(|p| !self.considered.contains(&p.index) && config.samples(&p.name))
            .cloned()
            .collect();
        let mut unloaded = Vec::new();
        // (error, variable): one warning per distinct error, not one per
        // variable (a library that refuses every start refuses hundreds).
        let mut not_started: Vec<(String, String)> = Vec::new();
        for info in fresh {
            self.considered.insert(info.index);
            // Open MPI registers PVARs of components it then closes (the
            // PSM2 MTL when the job runs over ob1): allocating a handle on
            // one fails, or segfaults inside libpsm2 in a singleton.
            let library = mpit::quirks::LibraryVersion::of_process();
            if mpit::quirks::applies(mpit::quirks::Quirk::UnloadedComponentVariables, &library)
                && mpit::quirks::openmpi_storage_unloaded(&info.name)
            {
                unloaded.push(info.name.clone());
                continue;
            }
            match info.binding {
                Binding::NoObject => match self.session.alloc(info.index, Object::None) {
                    Ok((handle, count)) => {
                        let started = !info.continuous
                            && match handle.start(session) {
                                Ok(()) => true,
                                Err(e) => {
                                    not_started.push((e.to_string(), info.name.clone()));
                                    if let Err(e) = handle.free(session) {
                                        self.warnings.push(format!(
                                            "freeing the handle of `{}`: {e}",
                                            info.name
                                        ));
                                    }
                                    continue;
                                }
                            };
                        self.unbound.push(Unbound {
                            metric: Metric::new(info.class),
                            count: usize::try_from(count).unwrap_or(0),
                            info,
                            handle,
                            started,
                        });
                    }
                    Err(e) => self.warnings.push(format!(
                        "cannot sample `{}`: {}",
                        info.name,
                        e.about(&info.name)
                    )),
                },
                Binding::Comm | Binding::Win => self.bound.push(info),
                other => self.warnings.push(format!(
                    "`{}` is bound to {} objects, which the tuner does not track; not sampled",
                    info.name,
                    other.short()
                )),
            }
        }
        if !unloaded.is_empty() {
            self.warnings.push(format!(
                "not sampled, their Open MPI component is not loaded in this process \
                 (reading them can crash the library): {}",
                unloaded.join(", ")
            ));
        }
        self.warnings.extend(not_started_warnings(not_started));
    }

    /// Allocates handles for objects created since the last tick and forgets
    /// objects the application freed. Returns what happened.
    pub fn track_objects(&mut self, table: &ObjectTable) -> Vec<ObjectEvent> {
        let mut events = Vec::new();
        self.reaped.clear();
        table.reap(&mut self.reaped);
        for (id, object) in &self.reaped {
            if let Some(obj) = self.objects.remove(id) {
                events.push(ObjectEvent {
                    event: ObjectChange::Freed,
                    object: obj.label,
                    handles: 0,
                });
            } else {
                // Freed while its handles were being allocated: never
                // sampled, but the log still says it existed.
                let label = label(*id, *object);
                for event in [ObjectChange::Created, ObjectChange::Freed] {
                    events.push(ObjectEvent {
                        event,
                        object: label.clone(),
                        handles: 0,
                    });
                }
            }
        }
        let new: Vec<Tracked> = table.new_objects().collect();
        for tracked in new {
            if tracked.object == Object::None {
                continue;
            }
            let label = label(tracked.id, tracked.object);
            let binding = tracked.object.binding();
            let owned = &self.session;
            let session = owned.handle();
            let mut vars = Vec::new();
            let mut warnings = Vec::new();
            let mut not_started = Vec::new();
            let bound = &self.bound;
            let activated = table.activate(tracked, || {
                let mut handles = Vec::new();
                for (i, info) in bound.iter().enumerate() {
                    if info.binding != binding || handles.len() >= MAX_HANDLES_PER_OBJECT {
                        continue;
                    }
                    match owned.alloc(info.index, tracked.object) {
                        Ok((handle, count)) => {
                            let started = !info.continuous && handle.start(session).is_ok();
                            if !info.continuous && !started {
                                if let Err(e) = handle.free(session) {
                                    warnings.push(format!(
                                        "freeing the handle of `{}` on {label}: {e}",
                                        info.name
                                    ));
                                }
                                not_started.push(info.name.clone());
                                continue;
                            }
                            vars.push((
                                i,
                                usize::try_from(count).unwrap_or(0),
                                Metric::new(info.class),
                            ));
                            handles.push((handle, started));
                        }
                        Err(e) => warnings.push(format!(
                            "cannot sample `{}` on {label}: {}",
                            info.name,
                            e.about(&info.name)
                        )),
                    }
                }
                (session, handles)
            });
            self.warnings.extend(warnings);
            match not_started.as_slice() {
                [] => {}
                [one] => self
                    .warnings
                    .push(format!("cannot start `{one}` on {label}")),
                names => self.warnings.push(format!(
                    "cannot start {} variables on {label}, not sampled there: {}",
                    names.len(),
                    name_list(names)
                )),
            }
            if activated {
                events.push(ObjectEvent {
                    event: ObjectChange::Created,
                    object: label.clone(),
                    handles: vars.len(),
                });
                self.objects.insert(tracked.id, ObjectVars { label, vars });
            }
        }
        // Bound variables came or went.
        self.layout_stale |= !events.is_empty();
        events
    }

    /// Reads every handle and updates the metrics; `time` is seconds since
    /// start. Allocates nothing once every variable has had its first
    /// sample (the buffers are kept from tick to tick).
    pub fn sample(&mut self, table: &ObjectTable, time: f64) {
        let reader = &self.reader;
        let session = self.session.handle();
        let values = &mut self.values;
        let mut failed = Vec::new();
        // A variable's first sample puts it in the snapshots.
        let mut first = false;
        for u in &mut self.unbound {
            if read(
                reader,
                session,
                &u.handle,
                &u.info,
                u.count,
                &mut self.buf,
                values,
                &mut failed,
            ) {
                first |= u.metric.samples == 0;
                u.metric.update(values, time);
            }
        }
        self.active.clear();
        self.active.extend(table.active_objects());
        for tracked in &self.active {
            let Some(obj) = self.objects.get_mut(&tracked.id) else {
                continue;
            };
            let bound = &self.bound;
            let buf = &mut self.buf;
            table.with_handles(*tracked, |session, handles| {
                for ((i, count, metric), handle) in obj.vars.iter_mut().zip(handles) {
                    if read(
                        reader,
                        session,
                        &handle,
                        &bound[*i],
                        *count,
                        buf,
                        values,
                        &mut failed,
                    ) {
                        first |= metric.samples == 0;
                        metric.update(values, time);
                    }
                }
            });
        }
        self.layout_stale |= first;
        for (name, error) in failed {
            if self.read_failures.insert(name.clone()) {
                self.warnings.push(format!(
                    "reading `{name}` failed ({error}); its values stop here until a read succeeds (said once per variable)"
                ));
            }
        }
    }

    /// Reads the interposer's counters into `tool.*` metrics.
    pub fn sample_tool_metrics(&mut self, time: f64) {
        let mut mpi_time = 0.0;
        let mut any = false;
        for family in Family::ALL {
            let f = toolmetrics::family_snapshot(family);
            if f.calls == 0 {
                continue;
            }
            any = true;
            mpi_time += f.seconds;
            let mut hist = [0.0; toolmetrics::BUCKETS];
            for (h, &n) in hist.iter_mut().zip(&f.hist) {
                *h = n as f64;
            }
            let entries: [(&str, PvarClass, &[f64]); 6] = [
                ("calls", PvarClass::Counter, &[f.calls as f64]),
                ("bytes", PvarClass::Counter, &[f.bytes as f64]),
                ("time", PvarClass::Timer, &[f.seconds]),
                (
                    "bytes_p50",
                    PvarClass::Level,
                    &[f.quantile_bytes(0.5) as f64],
                ),
                (
                    "bytes_p90",
                    PvarClass::Level,
                    &[f.quantile_bytes(0.9) as f64],
                ),
                ("hist", PvarClass::Counter, &hist),
            ];
            let names = toolmetrics::family_metric_names(f.family);
            for ((metric, class, values), key) in entries.into_iter().zip(names) {
                debug_assert!(key.ends_with(metric));
                // Names are formatted once per process, not on every tick.
                if let Some((_, m)) = self.tool.get_mut(key.as_str()) {
                    m.update(values, time);
                    continue;
                }
                // The counters start at zero with the process: the run's
                // total is counted from there, not from the first sample
                // that saw a call.
                let mut m = Metric::new(class);
                if class.is_accumulating() {
                    m.update(&vec![0.0; values.len()], 0.0);
                }
                m.update(values, time);
                self.tool.insert(key.clone(), (class, m));
                self.layout_stale = true;
            }
        }
        if any {
            const MPI_TIME: &str = "tool.mpi.time";
            if let Some((_, m)) = self.tool.get_mut(MPI_TIME) {
                m.update(&[mpi_time], time);
            } else {
                let mut m = Metric::new(PvarClass::Timer);
                m.update(&[0.0], 0.0);
                m.update(&[mpi_time], time);
                self.tool.insert(MPI_TIME.into(), (PvarClass::Timer, m));
                self.layout_stale = true;
            }
        }
    }

    /// The variables a snapshot holds, in order, with their metrics:
    /// unbound PVARs, bound ones per tracked object, tool metrics; only
    /// those sampled at least once.
    fn entries(&self) -> impl Iterator<Item = ((&str, Option<&str>, PvarClass), &Metric)> + '_ {
        let unbound = self
            .unbound
            .iter()
            .filter(|u| u.metric.samples > 0)
            .map(|u| ((u.info.name.as_str(), None, u.info.class), &u.metric));
        let bound = self.objects.values().flat_map(move |obj| {
            obj.vars
                .iter()
                .filter(|(_, _, metric)| metric.samples > 0)
                .map(move |(i, _, metric)| {
                    let info = &self.bound[*i];
                    (
                        (info.name.as_str(), Some(obj.label.as_str()), info.class),
                        metric,
                    )
                })
        });
        let tool = self
            .tool
            .iter()
            .map(|(name, (class, metric))| ((name.as_str(), None, *class), metric));
        unbound.chain(bound).chain(tool)
    }

    /// The current metrics as a new snapshot.
    pub fn snapshot(&mut self, time: f64, seq: u64) -> Snapshot {
        let mut snapshot = Snapshot::default();
        self.snapshot_into(&mut snapshot, time, seq);
        snapshot
    }

    /// Refills `snapshot` with the current metrics. Its layout is the
    /// sampler's (shared, made again only when the variables changed); its
    /// metrics are copied into the buffers it already has, so a tick whose
    /// variables and element counts did not change allocates nothing.
    pub fn snapshot_into(&mut self, snapshot: &mut Snapshot, time: f64, seq: u64) {
        if self.layout_stale {
            let names = self
                .entries()
                .map(|((name, object, class), _)| VarName {
                    name: name.to_string(),
                    object: object.map(str::to_string),
                    class,
                })
                .collect();
            self.layout = Arc::new(Layout::new(names));
            self.layout_stale = false;
        }
        if !Arc::ptr_eq(&snapshot.layout, &self.layout) {
            snapshot.layout = Arc::clone(&self.layout);
        }
        snapshot.t = time;
        snapshot.seq = seq;
        let n = self.layout.vars.len();
        snapshot.metrics.truncate(n);
        let metrics = &mut snapshot.metrics;
        for (i, (_, metric)) in self.entries().enumerate() {
            match metrics.get_mut(i) {
                Some(m) => m.clone_from(metric),
                None => metrics.push(metric.clone()),
            }
        }
        debug_assert_eq!(
            metrics.len(),
            n,
            "the sampler's variables changed without a new layout"
        );
    }

    /// Stops and frees the unbound handles and the session. Bound handles
    /// must have been freed first ([`ObjectTable::retire_all`]). Returns
    /// what the library refused, for the log.
    pub fn close(self) -> Vec<String> {
        let mut problems = Vec::new();
        let session = self.session.handle();
        // Handles before their session.
        for u in self.unbound {
            if u.started {
                if let Err(e) = u.handle.stop(session) {
                    problems.push(format!("at finalize, stopping `{}`: {e}", u.info.name));
                }
            }
            if let Err(e) = u.handle.free(session) {
                problems.push(format!(
                    "at finalize, freeing the handle of `{}`: {e}",
                    u.info.name
                ));
            }
        }
        if let Err(e) = self.session.close() {
            problems.push(format!("at finalize, freeing the PVAR session: {e}"));
        }
        problems
    }
}

/// The name of a tracked object in logs: `world`, `comm3`, `win4`.
fn label(id: u64, object: Object) -> String {
    match object {
        Object::Comm(_) if id == 0 => "world".to_string(),
        Object::Comm(_) => format!("comm{id}"),
        Object::Win(_) => format!("win{id}"),
        Object::None => format!("object{id}"),
    }
}

/// Reads one handle into `values`; false (and nothing changed) on error.
#[allow(clippy::too_many_arguments)] // a hot helper of `sample`, two call sites
fn read(
    reader: &PvarReader,
    session: SessionHandle,
    handle: &PvarHandle,
    info: &PvarInfo,
    count: usize,
    buf: &mut Vec<u64>,
    values: &mut Vec<f64>,
    failed: &mut Vec<(String, String)>,
) -> bool {
    if count == 0 || info.datatype == mpit::meta::Datatype::Char {
        return false;
    }
    let words = (count * info.datatype.size()).div_ceil(8) + 1;
    if buf.len() < words {
        buf.resize(words, 0);
    }
    if let Err(e) = reader.read(session, handle, &mut buf[..words]) {
        // Reported once per variable by the caller (cold path).
        failed.push((info.name.clone(), e.to_string()));
        return false;
    }
    values.resize(count, 0.0);
    Value::decode_f64_into(info.datatype, count, &buf[..words], values) == count
}

/// One warning per distinct error of `MPI_T_pvar_start` (`(error,
/// variable)` pairs, in the order met), naming the variables it refused
/// ([`name_list`]: the first ten, and how many more).
fn not_started_warnings(failures: Vec<(String, String)>) -> Vec<String> {
    let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
    for (error, name) in failures {
        match grouped.iter_mut().find(|(e, _)| *e == error) {
            Some((_, names)) => names.push(name),
            None => grouped.push((error, vec![name])),
        }
    }
    grouped
        .into_iter()
        .map(|(error, names)| match names.as_slice() {
            [one] => format!("cannot start `{one}`: {error}"),
            _ => format!(
                "cannot start {} variables ({error}), not sampled: {}",
                names.len(),
                name_list(&names)
            ),
        })
        .collect()
}

/// The first names of a list, quoted, and how many more there are (the
/// log's header lists every variable that is sampled).
fn name_list(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut list = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        list.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    list
}

#[cfg(test)]
mod tests {
    use super::not_started_warnings;

    #[test]
    fn start_failures_are_one_warning_per_error() {
        let pair = |e: &str, n: &str| (e.to_string(), n.to_string());
        let warnings = not_started_warnings(vec![
            pair("MPI_T_ERR_PVAR_NO_STARTSTOP", "a"),
            pair("MPI_ERR_OTHER", "b"),
            pair("MPI_T_ERR_PVAR_NO_STARTSTOP", "c"),
        ]);
        assert_eq!(
            warnings,
            [
                "cannot start 2 variables (MPI_T_ERR_PVAR_NO_STARTSTOP), not sampled: `a`, `c`",
                "cannot start `b`: MPI_ERR_OTHER",
            ]
        );
        assert!(not_started_warnings(Vec::new()).is_empty());
        let many: Vec<_> = (0..12).map(|i| pair("E", &format!("v{i}"))).collect();
        assert_eq!(
            not_started_warnings(many),
            [
                "cannot start 12 variables (E), not sampled: `v0`, `v1`, `v2`, `v3`, `v4`, \
              `v5`, `v6`, `v7`, `v8`, `v9` and 2 more"
            ]
        );
    }
}
