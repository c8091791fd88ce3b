//! Steering: the requests of `mpit-tuner set`, `pause`, `resume` and
//! `reload`, read from the run directory on the helper thread's tick.
//!
//! No socket and no thread of its own: on its tick (at most every
//! `POLL_EVERY`) the helper learns the request files in `RUN_DIR/control/`,
//! handles each new one once ([`vocab::steering`] defines them) and
//! answers with a `control` record, flushed at once so the command sees
//! it. One rank of each node lists the directory and reads the requests,
//! the node's other ranks take them from node-local memory ([`node`]);
//! where that cannot be set up, each rank lists it, with a warning. Only
//! files the job's user owns, that nobody else may write, are read;
//! anything else is ignored with a warning in the log. A file that is not
//! a request gets an `error` answer; nothing a file holds can stop the
//! rank.
//!
//! A `set` goes through the actuator like a policy's write (scope, type,
//! range, read-back), with the rule for user requests: a request reaches
//! each rank at its own moment, so a variable every rank must hold the
//! same value of (ALL_EQ, GROUP_EQ, and the collective algorithm
//! variables) is never written here. Those of them that online collective
//! tuning drives are handed to it as a pending choice, which every rank
//! pins at an agreed point of the collective (see
//! [`crate::collectives`]); the others are refused, with what is
//! missing. `reload` compiles and checks the file on this rank before it
//! replaces the running policies.

mod node;

use super::{Peers, Service, Start, Tick};
use crate::collectives;
use crate::decide::actuator::{self, Request as WriteRequest, When};
use crate::run::log::LogWriter;
use mpit::meta::{Datatype, Scope};
use mpit::{Catalogue, MpiT};
use node::{Listing, Node, Poll, Read};
use policies::{HostSelector, RankSelector};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use vocab::record::{self, Record, SteeringAnswer, SteeringKind, SteeringOutcome, SteeringWrite};
use vocab::steering::{self, Action, Request, CONTROL_DIR, MAX_REQUEST_BYTES};

/// The shortest time between two polls for requests: a listing of the
/// control directory by one rank a node, a look at node-local memory by
/// the others.
pub(crate) const POLL_EVERY: Duration = Duration::from_millis(100);

/// The name of the count of this rank's listings of the control directory
/// among the service's quantities (and in the close record).
pub(crate) const LISTINGS: &str = "tool.control.listings";

/// Steering as a service: a rank with a run directory and a log reads
/// requests; one without answers none.
#[derive(Debug, Default)]
pub struct Steering {
    state: Option<State>,
}

impl Service for Steering {
    fn name(&self) -> &'static str {
        "steering"
    }

    fn start(&mut self, start: &mut Start<'_>) {
        self.state = State::new(
            start.dir,
            start.log.path(),
            start.info.rank,
            start.info.size,
        );
        // MPIT_TUNER_NODE_DIR=off: every rank lists.
        if let (Some(state), Some(dir)) = (&mut self.state, &start.config.node_dir) {
            state.join_node(dir, start.log);
        }
    }

    fn tick(&mut self, tick: &mut Tick<'_>, peers: &mut Peers<'_>) {
        if let Some(state) = &mut self.state {
            state.poll(tick, peers);
        }
    }

    fn quantities(&self) -> Vec<(String, &'static str, f64)> {
        self.state
            .iter()
            .map(|s| (LISTINGS.to_string(), "total", s.listings as f64))
            .collect()
    }

    fn close(&mut self, _log: &mut LogWriter, _t: f64) -> Vec<String> {
        if let Some(node) = self.state.as_mut().and_then(|s| s.node.take()) {
            node.leave();
        }
        Vec::new()
    }
}

/// The steering state of one rank.
#[derive(Debug)]
struct State {
    dir: PathBuf,
    /// The job's user: the owner of this rank's own log file.
    owner: u32,
    handled: HashSet<String>,
    next_poll: Instant,
    rank: u32,
    size: u32,
    host: String,
    /// This rank's part in its node's polling; `None`: it lists the
    /// control directory itself.
    node: Option<Node>,
    /// The requests read so far, by file name (while this rank lists).
    read: HashMap<String, Read>,
    /// How many times this rank listed the control directory.
    listings: u64,
}

/// What a handler decided.
type Answer = (SteeringOutcome, Option<String>, Option<SteeringWrite>);

impl State {
    /// Steering for a rank with a run directory and a log file (which tells
    /// the job's user); `None` without them.
    fn new(run_dir: Option<&Path>, log: &Path, rank: i32, size: i32) -> Option<State> {
        let owner = std::fs::metadata(log).ok()?.uid();
        Some(State {
            dir: run_dir?.join(CONTROL_DIR),
            owner,
            handled: HashSet::new(),
            next_poll: Instant::now(),
            rank: rank.max(0) as u32,
            size: size.max(1) as u32,
            host: mpit::host_name(),
            node: None,
            read: HashMap::new(),
            listings: 0,
        })
    }

    /// Joins the polling of this rank's node through `dir`, or says in the
    /// log why this rank lists the control directory itself.
    fn join_node(&mut self, dir: &Path, log: &mut LogWriter) {
        let run_dir = self.dir.parent().unwrap_or(&self.dir);
        match Node::join(dir, &self.host, run_dir, self.owner) {
            Ok(node) => self.node = Some(node),
            Err(why) => log.record(&Record::Warning(record::Warning::new(
                0.0,
                format!(
                    "steering: {why} (MPIT_TUNER_NODE_DIR): this rank lists {} itself",
                    self.dir.display()
                ),
            ))),
        }
    }

    /// Handles the requests that arrived since the last poll, in the order
    /// of their names (ids start with the time they were made).
    fn poll(&mut self, tick: &mut Tick<'_>, peers: &mut Peers<'_>) {
        let now = Instant::now();
        if now < self.next_poll {
            return;
        }
        self.next_poll = now + POLL_EVERY;
        let listing = match self.node.as_mut() {
            None => list(&self.dir, self.owner, &mut self.read, &mut self.listings),
            Some(node) => {
                let (dir, owner, read, listings) =
                    (&self.dir, self.owner, &mut self.read, &mut self.listings);
                match node.poll(|| list(dir, owner, read, listings)) {
                    Ok(Poll::Unchanged) => return,
                    Ok(Poll::Listing(listing)) => listing,
                    Err(why) => {
                        // This rank lists from now on.
                        if let Some(node) = self.node.take() {
                            node.leave();
                        }
                        let message = format!(
                            "steering: {why}: this rank lists {} itself from now on",
                            self.dir.display()
                        );
                        tick.log
                            .record(&Record::Warning(record::Warning::new(tick.t, message)));
                        list(&self.dir, self.owner, &mut self.read, &mut self.listings)
                    }
                }
            }
        };
        // Requests the command removed (every rank answered) are
        // forgotten: the set stays as small as the directory.
        self.handled
            .retain(|n| listing.iter().any(|(present, _)| present == n));
        let mut fresh = false;
        for (name, read) in listing {
            if self.handled.insert(name.clone()) {
                self.handle(&name, read, tick, peers);
                fresh = true;
            }
        }
        if fresh {
            tick.log.flush();
        }
    }

    fn handle(&self, name: &str, read: Read, tick: &mut Tick<'_>, peers: &mut Peers<'_>) {
        let t = tick.t;
        let path = self.dir.join(name);
        let id = steering::id_of_file_name(name).unwrap_or(name).to_string();
        let answer = |log: &mut LogWriter, kind: SteeringKind, request: String, answer: Answer| {
            let (outcome, message, write) = answer;
            log.record(&Record::Steering(SteeringAnswer {
                t,
                id: id.clone(),
                kind,
                request,
                outcome,
                message,
                write,
            }));
        };
        let bytes = match read {
            Read::Bytes(bytes) => bytes,
            Read::Ignored(why) => {
                // A warning only: an answer would be read as coming from
                // the job's user.
                let message = format!("steering request {} ignored: {why}", path.display());
                return tick
                    .log
                    .record(&Record::Warning(record::Warning::new(t, message)));
            }
            Read::Failed(why) => {
                let a = (SteeringOutcome::Error, Some(why), None);
                return answer(tick.log, SteeringKind::NotARequest, String::new(), a);
            }
        };
        let request = match Request::parse(&bytes) {
            Ok(r) if r.id == id => r,
            Ok(r) => {
                let why = format!("the request's id {:?} is not its file's name", r.id);
                return answer(
                    tick.log,
                    SteeringKind::NotARequest,
                    String::new(),
                    (SteeringOutcome::Error, Some(why), None),
                );
            }
            Err(e) => {
                let a = (SteeringOutcome::Error, Some(format!("{name}: {e}")), None);
                return answer(tick.log, SteeringKind::NotARequest, String::new(), a);
            }
        };
        // A variable every rank must hold the same value of: for every
        // rank or none, whatever `ranks` and `hosts` select.
        let equal = match &request.action {
            Action::Set { cvar, value } => {
                set_equal(tick.catalogue, cvar, value, &request, self.rank)
            }
            _ => None,
        };
        let result = match (equal, self.selects(&request)) {
            (Some(answer), _) => answer,
            (None, Err(why)) => (SteeringOutcome::Refused, Some(why), None),
            (None, Ok(false)) => (SteeringOutcome::NotForThisRank, None, None),
            (None, Ok(true)) => apply(&request.action, tick, peers),
        };
        answer(tick.log, request.action.kind(), request.describe(), result);
    }

    /// Whether the request's `ranks` and `hosts` select this rank, or why
    /// they do not parse.
    fn selects(&self, request: &Request) -> Result<bool, String> {
        if let Some(text) = &request.ranks {
            let ranks =
                RankSelector::from_text(text).map_err(|e| format!("ranks {text:?}: {e}"))?;
            if !ranks.applies_to(self.rank, self.size) {
                return Ok(false);
            }
        }
        if !request.hosts.is_empty() {
            let hosts = HostSelector::new(&request.hosts)
                .map_err(|(i, why)| format!("hosts {:?}: {why}", request.hosts[i]))?;
            if !hosts.matches(&self.host) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// What a request selecting this rank does: a `set` through the actuator,
/// anything else by the service it is for.
fn apply(action: &Action, tick: &mut Tick<'_>, peers: &mut Peers<'_>) -> Answer {
    let answer = match action {
        Action::Set { cvar, value } => return set(tick.mpit, tick.catalogue, cvar, value),
        other => peers.steer(other, tick).unwrap_or_else(|| {
            Err(format!(
                "no service of this job takes `{}` requests",
                other.kind()
            ))
        }),
    };
    match answer {
        Ok(said) => (SteeringOutcome::Applied, Some(said), None),
        Err(why) => (SteeringOutcome::Refused, Some(why), None),
    }
}

/// The requests in `dir`, in name order, each read once (what `read`
/// holds from earlier listings is reused, and forgotten once its file is
/// gone); `listings` counts the listing. A directory that cannot be listed
/// (not made yet) holds none.
fn list(dir: &Path, owner: u32, read: &mut HashMap<String, Read>, listings: &mut u64) -> Listing {
    *listings += 1;
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| steering::id_of_file_name(n).is_some())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    read.retain(|n, _| names.contains(n));
    names
        .into_iter()
        .map(|name| {
            let r = read
                .entry(name.clone())
                .or_insert_with(|| read_request(&dir.join(&name), owner))
                .clone();
            (name, r)
        })
        .collect()
}

/// The bytes of a request file, unless it is to be ignored (not a
/// regular file, another user's, or writable by others) or cannot be
/// read.
fn read_request(path: &Path, owner: u32) -> Read {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return Read::Failed(format!("cannot read {}: {e}", path.display())),
    };
    if !meta.file_type().is_file() {
        return Read::Ignored("it is not a regular file".into());
    }
    if meta.uid() != owner {
        return Read::Ignored(format!(
            "it belongs to uid {}, and only the job's user (uid {}) may steer the job",
            meta.uid(),
            owner
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Read::Ignored(format!(
            "others may write it (mode {:o}); a request must be writable by the job's user only",
            meta.mode() & 0o7777
        ));
    }
    if meta.len() > MAX_REQUEST_BYTES {
        return Read::Failed(format!(
            "{} has {} bytes; a request has at most {MAX_REQUEST_BYTES}",
            path.display(),
            meta.len()
        ));
    }
    match std::fs::read(path) {
        Ok(bytes) => Read::Bytes(bytes),
        Err(e) => Read::Failed(format!("cannot read {}: {e}", path.display())),
    }
}

/// What a request must do to change a variable every rank holds the same
/// value of while the job runs.
const EQUAL_RULE: &str = "only collective algorithm variables can be changed while the job \
     runs, and only while online collective tuning runs (on by default, unless \
     MPIT_TUNER_COLLECTIVES=off), which switches every rank at the same call";

/// The answer to a `set` of a variable every rank must hold the same value
/// of (scope ALL_EQ or GROUP_EQ, or a collective's algorithm variable,
/// whatever scope the library gives it), or `None` for any other (the
/// actuator's rules apply). Such a variable is never written here: the
/// ones online collective tuning drives are handed to it, to be pinned on
/// every rank at an agreed point; the others are refused with what is
/// missing. The answer is the same on every rank (the tuner's collectives
/// and candidates are agreed at start), so a request is taken everywhere
/// or nowhere.
fn set_equal(
    catalogue: &Catalogue,
    cvar: &str,
    value: &str,
    request: &Request,
    rank: u32,
) -> Option<Answer> {
    let info = catalogue.cvar(cvar)?;
    let collective = collectives::algorithm_variable(cvar);
    if !info.scope.is_writable() || !(info.scope.requires_equal_values() || collective.is_some()) {
        return None;
    }
    let scope = info.scope;
    let refuse = |why: String| Some((SteeringOutcome::Refused, Some(why), None));
    if request.ranks.is_some() || !request.hosts.is_empty() {
        let label = if matches!(scope, Scope::GroupEq) {
            "GROUP_EQ"
        } else {
            "ALL_EQ"
        };
        let narrowed = match (&request.ranks, request.hosts.is_empty()) {
            (Some(r), true) => format!("--ranks {r}"),
            (Some(r), false) => format!("--ranks {r} --hosts {}", request.hosts.join(",")),
            (None, _) => format!("--hosts {}", request.hosts.join(",")),
        };
        return refuse(format!(
            "{label}: every rank must take the same value, so `{cvar}` (scope {scope}) cannot be \
             set on some ranks only ({narrowed}); send the request to every rank"
        ));
    }
    let Some(collective) = collective else {
        return refuse(format!(
            "`{cvar}` has scope {scope}; {EQUAL_RULE}; `{cvar}` is not one: set it before the job \
             starts (its environment variable, or a pre-init or init policy)"
        ));
    };
    let Some(tuner) = collectives::tuner() else {
        let missing = match collectives::off_reason() {
            Some(why) => format!("online collective tuning is off in this job: {why}"),
            None => "online collective tuning does not run in this job (start the job with \
                     MPIT_TUNER_COLLECTIVES=tune, `mpit-tuner run --tune-collectives`, or \
                     `tune = true` in the policy file's [collectives] table)"
                .to_string(),
        };
        return refuse(format!(
            "`{cvar}` has scope {scope}; {EQUAL_RULE}; {missing}"
        ));
    };
    if tuner.stopped() {
        return refuse(format!(
            "`{cvar}` has scope {scope}; {EQUAL_RULE}; online collective tuning stopped on rank \
             {} (the `collective` records say why): the library's defaults run from now on",
            rank
        ));
    }
    if tuner.measuring() {
        return refuse(format!(
            "`{cvar}` has scope {scope}; {EQUAL_RULE}; this job only measures the collectives \
             (MPIT_TUNER_COLLECTIVES=measure) and switches nothing"
        ));
    }
    let Some(target) = tuner.driving(cvar) else {
        let driven: Vec<&str> = tuner.tuned().map(|t| t.cvar.name.as_str()).collect();
        return refuse(format!(
            "`{cvar}` has scope {scope}; {EQUAL_RULE}; online collective tuning runs but does not \
             tune {} here (it tunes {}; the `skipped` collective records say why)",
            collective.name(),
            driven.join(", ")
        ));
    };
    let wanted = value.trim();
    let number = wanted.parse::<i64>().ok();
    let Some(candidate) = target
        .candidates
        .iter()
        .position(|(n, v)| n.eq_ignore_ascii_case(wanted) || Some(*v) == number)
    else {
        let all: Vec<String> = target
            .candidates
            .iter()
            .map(|(n, v)| format!("{n} ({v})"))
            .collect();
        return refuse(format!(
            "`{cvar}`: `{wanted}` is not one of the algorithms tuned for {} here: {}",
            collective.name(),
            all.join(", ")
        ));
    };
    if !tuner.request_pin(target.collective, candidate, &request.id) {
        return refuse(format!(
            "`{cvar}`: the collective tuner did not take the request"
        ));
    }
    let (name, number) = &target.candidates[candidate];
    let coll = collective.name();
    Some((
        SteeringOutcome::Applied,
        Some(format!(
            "applied at the next agreed point: {coll} pinned to {name} ({cvar} = {number}) on \
             every communicator, at its next agreed point once every rank holds this request; \
             nothing is switched by this answer: the `pinned` collective records with request \
             {} say where it took effect; searching stops for {coll}",
            request.id
        )),
        None,
    ))
}

/// A user's CVAR write through the actuator, with the value read as the
/// variable's type takes it.
fn set(mpit: &MpiT, catalogue: &Catalogue, cvar: &str, value: &str) -> Answer {
    let info = catalogue.cvar(cvar);
    let request = match info.map(|i| (i.datatype, i.enumeration.is_some())) {
        Some((Datatype::Char, _)) => WriteRequest::Text(value.to_string()),
        datatype => {
            let numbers: Option<Vec<f64>> = value
                .split(',')
                .map(|p| p.trim().parse::<f64>().ok().filter(|x| x.is_finite()))
                .collect();
            match numbers {
                Some(xs) => {
                    let integral = !matches!(datatype, Some((Datatype::Double, _)));
                    if integral && xs.iter().any(|x| x.fract() != 0.0) {
                        let why = format!("`{cvar}` takes integers, not {value}");
                        return (SteeringOutcome::Refused, Some(why), None);
                    }
                    if xs.len() == 1 {
                        WriteRequest::Number(xs[0])
                    } else {
                        WriteRequest::Numbers(xs)
                    }
                }
                None => WriteRequest::Text(value.trim().to_string()),
            }
        }
    };
    let w = actuator::write(
        mpit,
        catalogue,
        cvar,
        None,
        &request,
        When::UserRequest,
        false,
    );
    let outcome = if w.outcome.applied() {
        SteeringOutcome::Applied
    } else {
        SteeringOutcome::Refused
    };
    let message = w.error.clone().or_else(|| {
        Some(format!(
            "{}: {} -> {}",
            w.outcome.as_str(),
            show(w.old.as_ref()),
            show(w.readback.as_ref())
        ))
    });
    (outcome, message, Some(SteeringWrite::from(w)))
}

/// A value in a message (`4`, `[1, 2]`, `"text"`).
fn show(v: Option<&mpit::value::Value>) -> String {
    v.and_then(|v| serde_json::to_value(v).ok())
        .map_or_else(|| "?".into(), |j| j.to_string())
}
