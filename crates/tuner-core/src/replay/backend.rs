//! The simulated side of a replay: the variables one rank's data has, as
//! the policy checker sees them, and the backend that serves them.

use super::*;

/// How a policy set writes a CVAR: the largest element count its literal
/// values and indices imply, and whether it writes text.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Written {
    pub(super) count: usize,
    pub(super) text: bool,
}

pub(super) fn written_by(set: &PolicySet) -> BTreeMap<String, Written> {
    let mut out: BTreeMap<String, Written> = BTreeMap::new();
    for p in set.policies() {
        for branch in [Branch::Then, Branch::Otherwise] {
            for action in p.actions(branch) {
                let ActionView::Set {
                    cvar, index, value, ..
                } = action
                else {
                    continue;
                };
                let (count, text) = match (index, value) {
                    (Some(i), _) => (i as usize + 1, false),
                    (None, SetValue::Numbers(xs)) => (xs.len().max(1), false),
                    (None, SetValue::Text(_)) => (1, true),
                    (None, SetValue::Number(_)) => (1, false),
                };
                let w = out.entry(cvar.to_string()).or_default();
                w.count = w.count.max(count);
                w.text |= text;
            }
        }
    }
    out
}

/// The variables of one rank's replay, as the policy checker sees them.
#[derive(Debug, Clone)]
pub(super) struct ReplayCatalogue {
    pub(super) declared: Declarations,
    /// PVARs the samples give, with their element count.
    pub(super) observed: BTreeMap<String, usize>,
    /// CVARs with a known value, with it.
    pub(super) known: BTreeMap<String, Value>,
    pub(super) written: BTreeMap<String, Written>,
}

impl ReplayCatalogue {
    fn new(trace: &RankTrace, set: &PolicySet) -> ReplayCatalogue {
        let mut observed = BTreeMap::new();
        let mut known = trace.initial_cvars.clone();
        for s in &trace.samples {
            for (name, v) in &s.pvars {
                observed.entry(name.clone()).or_insert(v.len());
            }
            for (name, v) in &s.cvars {
                known.entry(name.clone()).or_insert_with(|| v.clone());
            }
        }
        ReplayCatalogue {
            declared: trace.declared.clone(),
            observed,
            known,
            written: written_by(set),
        }
    }

    /// The CVAR `name` in the actuator's terms, if it exists.
    fn mpi_cvar(&self, name: &str) -> Option<(MpiCvarInfo, Option<usize>)> {
        let (scope, count, datatype, enumeration) = match self.declared.cvars.get(name) {
            Some(d) => (d.scope, d.count, d.datatype, d.enumeration.clone()),
            None => {
                let known = self.known.get(name);
                let written = self.written.get(name);
                if known.is_none() && written.is_none() {
                    return None;
                }
                let datatype = match known {
                    Some(Value::Str(_)) => Datatype::Char,
                    Some(Value::Double(_)) => Datatype::Double,
                    Some(_) => Datatype::Int,
                    None if written.is_some_and(|w| w.text) => Datatype::Char,
                    None => Datatype::Int,
                };
                (Scope::Local, None, datatype, None)
            }
        };
        Some((
            MpiCvarInfo {
                index: -1,
                name: name.to_string(),
                description: String::new(),
                verbosity: Verbosity::UserBasic,
                datatype,
                enumeration,
                binding: Binding::NoObject,
                scope,
            },
            count,
        ))
    }
}

impl VariableLookup for ReplayCatalogue {
    fn pvar(&self, name: &str) -> Option<PvarInfo> {
        let declared = self.declared.pvars.get(name);
        let observed = self.observed.get(name);
        if declared.is_none() && observed.is_none() {
            return None;
        }
        Some(PvarInfo {
            class: convert_class(declared.map_or(PvarClass::Generic, |d| d.class)),
            count: declared
                .and_then(|d| d.count)
                .or(observed.copied())
                .unwrap_or(1)
                .max(1),
        })
    }

    fn cvar(&self, name: &str) -> Option<CvarInfo> {
        let (info, count) = self.mpi_cvar(name)?;
        let count = count
            .or_else(|| self.known.get(name).map(Value::len))
            .or_else(|| self.written.get(name).map(|w| w.count))
            .unwrap_or(1);
        // A string's length is unknown offline: room for any value.
        let count = if info.datatype == Datatype::Char {
            count.max(4096)
        } else {
            count
        };
        // UNKNOWN cannot be declared (Scope::parse does not accept it).
        let scope = convert_scope(info.scope).unwrap_or(policies::Scope::Local);
        Some(crate::decide::cvar_info(&info, scope, count))
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .declared
            .cvars
            .keys()
            .chain(self.declared.pvars.keys())
            .chain(self.observed.keys())
            .chain(self.known.keys())
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        names
    }

    fn has_tool_metric(&self, name: &str) -> bool {
        self.observed.contains_key(name) || self.declared.pvars.contains_key(name)
    }
}

/// The backend of a replay: PVAR values from the current sample, CVAR
/// values simulated (written values read back as written), environment
/// variables recorded, nothing touched in this process.
#[derive(Debug, Clone)]
pub struct ReplayBackend {
    pub(super) catalogue: ReplayCatalogue,
    /// Every PVAR some sample gives, in one layout for the whole replay,
    /// with its latest value (none before a sample gave it).
    layout: u64,
    positions: HashMap<String, usize>,
    pvars: Vec<Option<Vec<f64>>>,
    pub(super) cvars: BTreeMap<String, Value>,
    pub(super) environment: BTreeMap<String, String>,
    /// Whether PVAR values are visible (not in pre-init and init).
    pub(super) sampling: bool,
    pub(super) now: f64,
}

impl ReplayBackend {
    /// A backend for `trace` under `set` (which tells which CVARs exist
    /// without being declared: those the policies write), before its first
    /// sample. The CVARs start at the trace's starting values and at those
    /// its first sample gives.
    pub fn new(trace: &RankTrace, set: &PolicySet) -> ReplayBackend {
        let mut cvars = trace.initial_cvars.clone();
        if let Some(first) = trace.samples.first() {
            cvars.extend(first.cvars.iter().cloned());
        }
        let catalogue = ReplayCatalogue::new(trace, set);
        let positions: HashMap<String, usize> = catalogue
            .observed
            .keys()
            .enumerate()
            .map(|(i, name)| (name.clone(), i))
            .collect();
        ReplayBackend {
            layout: crate::sample::Layout::new_id(),
            pvars: vec![None; positions.len()],
            positions,
            catalogue,
            cvars,
            environment: BTreeMap::new(),
            sampling: false,
            now: trace.samples.first().map_or(0.0, |s| s.t),
        }
    }

    /// Moves to `sample`: its time, its PVAR values (the others keep
    /// theirs), its CVAR values.
    pub fn advance(&mut self, sample: &Sample) {
        self.sampling = true;
        self.now = sample.t;
        for (name, v) in &sample.pvars {
            // Every name of a sample is in the layout (made from them all).
            if let Some(&i) = self.positions.get(name) {
                self.pvars[i] = Some(v.clone());
            }
        }
        for (name, v) in &sample.cvars {
            self.cvars.insert(name.clone(), v.clone());
        }
    }

    /// The simulated value of a CVAR.
    pub fn cvar_value(&self, name: &str) -> Option<&Value> {
        self.cvars.get(name)
    }

    /// The environment variables `setenv` actions set.
    pub fn environment(&self) -> &BTreeMap<String, String> {
        &self.environment
    }

    /// Sets the time (for the final phase).
    pub fn set_time(&mut self, t: f64) {
        self.now = t;
    }
}

impl Backend for ReplayBackend {
    fn layout(&self) -> u64 {
        self.layout
    }

    fn pvar_position(&self, name: &str) -> Option<usize> {
        self.positions.get(name).copied()
    }

    fn pvar_at(&self, position: usize) -> Option<&[f64]> {
        if !self.sampling {
            return None;
        }
        self.pvars.get(position)?.as_deref()
    }

    fn cvar(&mut self, name: &str) -> Option<Vec<f64>> {
        let v = self.cvars.get(name)?.to_f64s();
        (!v.is_empty()).then_some(v)
    }

    fn write(
        &mut self,
        name: &str,
        index: Option<u32>,
        request: &Request,
        when: When,
        dry_run: bool,
    ) -> CvarWrite {
        let mut record = CvarWrite::missing(name, index);
        let Some((info, declared_count)) = self.catalogue.mpi_cvar(name) else {
            record.error = Some(format!("the replayed data has no CVAR named `{name}`"));
            return record;
        };
        if let Some(why) = actuator::scope_refusal(&info, when) {
            record.outcome = Outcome::Refused;
            record.error = Some(why);
            return record;
        }
        record.old = self.cvars.get(name).cloned();
        let count = declared_count
            .or_else(|| record.old.as_ref().map(Value::len))
            .unwrap_or(match request {
                Request::Numbers(xs) => xs.len(),
                _ => 1,
            });
        let value = match actuator::convert(&info, count, index, request, record.old.as_ref()) {
            Ok(v) => v,
            Err(why) => {
                record.outcome = Outcome::Invalid;
                record.error = Some(format!("`{name}`: {why}"));
                return record;
            }
        };
        record.requested = Some(value.clone());
        if dry_run {
            record.outcome = Outcome::DryRun;
            record.readback = record.old.clone();
            return record;
        }
        self.cvars.insert(name.to_string(), value.clone());
        record.readback = Some(value);
        record.outcome = Outcome::Written;
        record
    }

    fn setenv(
        &mut self,
        name: &str,
        value: &str,
        dry_run: bool,
    ) -> Result<(), engine::SetenvError> {
        // Validation only: a replay never changes its own environment.
        engine::set_environment(name, value, true)?;
        if !dry_run {
            self.environment.insert(name.to_string(), value.to_string());
        }
        Ok(())
    }

    fn time(&self) -> f64 {
        self.now
    }
}
