//! Starting online collective tuning after `MPI_Init`, in two steps
//! around the runtime's start agreement, with no collective of its own:
//! [`open`] finds which collectives and candidates this library allows,
//! tries every candidate on this rank (written, read back, the default
//! written back) and opens each variable for good; the start agreement
//! carries what each rank refused or holds, and the signature of what it
//! would tune ([`Pending::agreement`]); [`start`] drops the refusals on
//! every rank alike, follows a rank stuck on a candidate, and starts the
//! same tuner on every rank. The start agreement is a nonblocking
//! reduction where the library reads algorithm variables in every call
//! ([`mpit::collective::Collectives::agree_start`]), so a rank holding a
//! candidate it could not undo still agrees with its peers. (Before: a
//! reduce and a broadcast for allreduce's candidates and an agreement on
//! the tuner after it, three calls that cost 0.1-0.2 s each with 32 ranks
//! on 2 cores.) The runtime calls both once, on the application's thread.

use super::store::{Stored, STORE_AGREEMENT_LEN};
use crate::run::log::LogWriter;
use crate::run::serde_name;
use crate::run::{Config, RunInfo};
use mpit::collective::{Collectives, Mixed};
use mpit::{Catalogue, MpiT, Object, Result};
use vocab::record::{CollectiveEvent, Record};

/// Records made before the log's header is written, written after it.
#[derive(Default)]
pub(crate) struct Notes(Vec<Record<'static>>);

impl Notes {
    fn record(&mut self, r: &Record<'static>) {
        self.0.push(r.clone());
    }
}

/// What [`open`] found and tried, for the start agreement and [`start`].
pub(crate) struct Pending {
    notes: Notes,
    why_not: Option<String>,
    targets: Vec<crate::collectives::Target>,
    fallback: Option<crate::collectives::Fallback>,
    by_comms: Option<crate::collectives::ByComms>,
    bins: crate::collectives::Bins,
    params: crate::collectives::Params,
    measure: bool,
    /// Asked for (the environment or the policy file), not the default:
    /// rank 0 says on its terminal that tuning started or why not.
    asked: bool,
    rank: i32,
    /// This rank's refusals ([`try_all`]'s rows).
    refused: Vec<i64>,
    /// The targets' handles and what one write costs, in their order.
    cvars: Vec<Option<(mpit::Cvar<'static>, u64)>>,
    /// [`tune::signature`] of the targets before any rank's refusals.
    ///
    /// [`tune::signature`]: crate::collectives::signature
    signature: u64,
    /// What this rank found in the tuning store (`None`: measuring).
    store: Option<Stored>,
}

impl Pending {
    /// This rank's part of the start agreement: its refusals, reduced by
    /// maximum (as the minimum of their negations), then its signature and
    /// the signature's complement (by minimum: equal only where every rank
    /// has the same). The same length on every rank that wants tuning.
    pub(crate) fn agreement(&self) -> Vec<Mixed> {
        let signature = (self.signature & (u64::MAX >> 1)) as i64;
        // Measuring: the same words on every rank.
        let store = self.store.as_ref().map_or(
            [Mixed::min(0), Mixed::min(!0), Mixed::min(0), Mixed::min(!0)],
            Stored::agreement,
        );
        self.refused
            .iter()
            .map(|x| Mixed::min(-x))
            .chain([Mixed::min(signature), Mixed::min(!signature)])
            .chain(store)
            .collect()
    }
}

impl Pending {
    /// The algorithm variables this rank tried and could not write back
    /// to their default, as `NAME=value`: where the ranks then do not
    /// tune (set up differently), this rank keeps that value.
    pub(crate) fn held(&self) -> Vec<String> {
        let stuck = self
            .refused
            .len()
            .saturating_sub(crate::collectives::COLLECTIVES.len());
        self.targets
            .iter()
            .filter_map(|t| {
                let x = *self.refused.get(stuck + t.collective as usize)?;
                (x != 0).then(|| format!("{}={}", t.cvar.name, (x >> 32) - 1))
            })
            .collect()
    }
}

/// The length of [`Pending::agreement`], whatever the library.
pub(crate) const AGREEMENT_LEN: usize = REFUSED_LEN + 2 + STORE_AGREEMENT_LEN;

/// The length of the refusals ([`try_all`]).
const REFUSED_LEN: usize = {
    use crate::collectives::{search::MAX_CANDIDATES, COLLECTIVES};
    COLLECTIVES.len() * MAX_CANDIDATES + COLLECTIVES.len()
};

/// Finds what this library lets the tuner tune and tries every candidate
/// on this rank, before the start agreement (no collective call).
pub(crate) fn open(
    wanted: super::Wanted,
    config: &Config,
    spec: Option<policies::CollectiveSpec>,
    catalogue: &Catalogue,
    info: &RunInfo,
) -> Pending {
    use crate::collectives::{self as tune, Bins, Params, Support, Target, COLLECTIVES};
    let mut notes = Notes::default();
    let log = &mut notes;
    let rank = info.rank;
    let spec = spec.unwrap_or_default();
    let d = Params::default();
    let measure = config.collectives.as_ref().is_some_and(|c| c.measure);
    // A window from the environment is exact: every window that many
    // calls from the first call on, none lengthened, shortened or thrown
    // away (window 1 is the most aggressive setting).
    let exact = config.collective_window;
    let ns = |t: Option<std::time::Duration>, default: f64| {
        if exact.is_some() {
            0.0
        } else {
            t.map_or(default, |t| t.as_nanos() as f64)
        }
    };
    let params = Params {
        window: exact.or(spec.window).unwrap_or(d.window),
        measure,
        exact_only: wanted.mode == vocab::record::CollectiveMode::Safe && !measure,
        windows: spec.windows.unwrap_or(d.windows),
        window_time_ns: ns(spec.window_time, d.window_time_ns),
        min_window_time_ns: ns(spec.min_window_time, d.min_window_time_ns),
        settle_ns: ns(spec.settle, d.settle_ns),
        margin: spec.margin.unwrap_or(d.margin),
        drop_factor: spec.drop_factor.unwrap_or(d.drop_factor),
        recheck: spec.recheck.unwrap_or(d.recheck),
        // Exact windows are never delayed either.
        search_budget: if exact.is_some() {
            0.0
        } else {
            spec.search_budget.unwrap_or(d.search_budget)
        },
        min_comm_size: spec.min_comm_size.unwrap_or(d.min_comm_size),
        ..d
    };
    let bins = spec.bins.clone().map_or_else(Bins::default, Bins::new);
    let only: Vec<_> = config
        .collectives
        .as_ref()
        .map(|c| c.collectives.clone())
        .unwrap_or_default();
    let library = serde_name(info.version.library);
    // Per collective, the candidates the file names for this library
    // (empty: all); collectives the file does not list for it are not
    // tuned when it lists any.
    let plan: Vec<(tune::Collective, Vec<String>)> = match spec.for_library(&library) {
        // Measuring needs no candidates: what is asked, or everything.
        _ if measure && only.is_empty() => COLLECTIVES.iter().map(|c| (*c, Vec::new())).collect(),
        _ if measure => only.iter().map(|c| (*c, Vec::new())).collect(),
        Some(listed) => listed
            .iter()
            .filter(|(c, _)| only.is_empty() || only.contains(c))
            .cloned()
            .collect(),
        None if only.is_empty() => COLLECTIVES.iter().map(|c| (*c, Vec::new())).collect(),
        None => only.iter().map(|c| (*c, Vec::new())).collect(),
    };
    let asked = wanted.asked;
    let mut why_not = None;
    let mut targets = Vec::new();
    let mut fallback = None;
    let mut by_comms = None;
    let mut mpit_ref: Option<&'static MpiT> = None;
    let mut refuse_all = false;
    if crate::sample::toolmetrics::concurrent_callers() {
        why_not = Some(
            "the application initialised MPI with MPI_THREAD_MULTIPLE: the algorithm variables are \
             process-wide, so two threads' collectives could see each other's choice; collective \
             tuning is off"
                .to_string(),
        );
    } else if measure {
        // Nothing is switched: every library can be measured.
        match own_mpit() {
            Ok(own) => {
                for (c, _) in &plan {
                    let (c, cvar) = match tune::algorithms(catalogue, info.version, *c) {
                        Ok((cvar, _)) => (*c, cvar),
                        Err(e) => {
                            log.record(&tune::note(0.0, CollectiveEvent::Skipped, e));
                            continue;
                        }
                    };
                    let start_value = mpit::Cvar::open(own, &cvar, Object::None)
                        .and_then(|v| v.read())
                        .ok()
                        .and_then(|v| v.as_i64());
                    let Some(start_value) = start_value else {
                        log.record(&tune::note(
                            0.0,
                            CollectiveEvent::Skipped,
                            format!("{}: its value cannot be read", cvar.name),
                        ));
                        continue;
                    };
                    match Target::measured(catalogue, info.version, c, start_value) {
                        Ok((t, all)) => {
                            log.record(&tune::algorithms_record(&t, &all));
                            targets.push(t);
                        }
                        Err(e) => log.record(&tune::note(0.0, CollectiveEvent::Skipped, e)),
                    }
                }
                mpit_ref = Some(own);
            }
            Err(e) => why_not = Some(format!("MPI_T is not available for the tuner: {e}")),
        }
    } else {
        match tune::support(info.version) {
            Support::NextCall => match own_mpit() {
                Ok(own) => {
                    // Names of another MPICH series (a table may list
                    // 4.0's and 5.0's; the shipped one has both names of
                    // barrier's dissemination): left out, in one record.
                    let mut other_series: Vec<String> = Vec::new();
                    for (c, names) in &plan {
                        let c = *c;
                        let known = tune::mpich_algorithms(info.version, c).unwrap_or_default();
                        let any_series = tune::mpich_any_series_algorithms(c);
                        let in_any_series =
                            |n: &str| any_series.iter().any(|k| k.eq_ignore_ascii_case(n));
                        let mut wanted = Vec::new();
                        let mut elsewhere = Vec::new();
                        for n in names {
                            if known.iter().any(|k| k.eq_ignore_ascii_case(n)) {
                                wanted.push(n.clone());
                            } else if !known.is_empty() && in_any_series(n) {
                                elsewhere.push(n.as_str());
                            } else {
                                log.record(&tune::note(
                                    0.0,
                                    CollectiveEvent::Skipped,
                                    format!(
                                        "{}: `{n}` is not one of its algorithms ({}); the policy file names it for {library}",
                                        tune::mpich_cvar(c),
                                        known.join(", ")
                                    ),
                                ));
                            }
                        }
                        if !elsewhere.is_empty() {
                            other_series.push(format!("{} {}", c.name(), elsewhere.join(", ")));
                        }
                        if !names.is_empty() && wanted.is_empty() {
                            continue;
                        }
                        targets.extend(target_at_start(
                            catalogue, own, info, c, &wanted, asked, log,
                        ));
                    }
                    if !other_series.is_empty() {
                        log.record(&tune::note(
                            0.0,
                            CollectiveEvent::Skipped,
                            format!(
                                "algorithms of another MPICH series than this one ({}), left out: {}",
                                info.version,
                                other_series.join("; ")
                            ),
                        ));
                    }
                    // A candidate MPICH cannot use for a call's arguments
                    // must fall back, never fail the call or print.
                    let kept = tune::mpich_fallback(catalogue).and_then(|f| match f {
                        Some((info, silent)) => tune::Fallback::open(own, &info, silent),
                        None => Ok(None),
                    });
                    match kept {
                        Ok(f) => fallback = f,
                        Err(e) => {
                            // Refused here, on every rank alike (the
                            // targets stay, for the signature).
                            refuse_all = true;
                            why_not = Some(format!(
                                "{e}; a candidate MPICH cannot use for a call's arguments could \
                                 fail that call, so collective tuning is off"
                            ));
                        }
                    }
                    mpit_ref = Some(own);
                }
                Err(e) => why_not = Some(format!("MPI_T is not available for the tuner: {e}")),
            },
            // Open MPI: calls run on candidate communicators.
            Support::NextCommunicator => match own_mpit() {
                Ok(own) => {
                    let by = catalogue
                        .cvar(tune::OPENMPI_DYNAMIC_RULES_CVAR)
                        .ok_or_else(|| {
                            format!(
                                "this Open MPI has no {} (is the coll/tuned component loaded?)",
                                tune::OPENMPI_DYNAMIC_RULES_CVAR
                            )
                        })
                        .and_then(|rules| tune::ByComms::open(own, rules, info.version));
                    match by {
                        Ok(by) => {
                            for (c, names) in &plan {
                                let Some(mut t) =
                                    target_at_start(catalogue, own, info, *c, names, asked, log)
                                else {
                                    continue;
                                };
                                // What this version never runs right on
                                // every call: one record at start.
                                let version = by.version();
                                for m in t.leave_out(|n| tune::open_mpi_left_out(version, *c, n)) {
                                    log.record(&tune::note(0.0, CollectiveEvent::Skipped, m));
                                }
                                targets.push(t);
                            }
                            by_comms = Some(by);
                            mpit_ref = Some(own);
                        }
                        Err(e) => why_not = Some(e),
                    }
                }
                Err(e) => why_not = Some(format!("MPI_T is not available for the tuner: {e}")),
            },
            other => why_not = other.why_not(),
        }
    }
    let mut refused = vec![i64::from(rank) + 1; REFUSED_LEN];
    let stuck = refused.len() - COLLECTIVES.len();
    refused[stuck..].fill(0);
    // Written around calls: each write's cost is measured (not when
    // measuring, nor when calls switch communicators).
    let costed = !measure && by_comms.is_none();
    let cvars = match mpit_ref {
        Some(own) if !refuse_all => try_all(own, &targets, costed, rank, &mut refused, log),
        // Nothing tried: every row stays refused by this rank.
        _ => targets.iter().map(|_| None).collect(),
    };
    let signature = tune::signature(targets.iter(), &bins, &params);
    let store = (!measure).then(|| {
        let mode = if params.exact_only { "safe" } else { "all" };
        let stored = Stored::open(config, info, mode);
        for w in &stored.warnings {
            log.record(&crate::run::warning(0.0, w));
            if rank == 0 {
                mpit::say!("mpit-tuner: {w}");
            }
        }
        stored
    });
    Pending {
        notes,
        why_not,
        targets,
        fallback,
        by_comms,
        bins,
        params,
        measure,
        asked,
        rank,
        refused,
        cvars,
        signature,
        store,
    }
}

/// Starts online collective tuning if this library allows it, on every
/// rank or on none: the ranks agree that they tune the same collectives
/// with the same candidates and parameters (else they would reach
/// different agreed points). `agreed` is the start agreement's reduction
/// of every rank's [`Pending::agreement`]; `seq` holds this rank's failure
/// of that agreement's call, if it had one.
/// Returns what this rank found in the tuning store, for the end of the
/// run, when tuning started.
pub(crate) fn start(
    pending: Pending,
    agreed: &[Mixed],
    log: &mut LogWriter,
    seq: &Collectives,
) -> Option<Stored> {
    use crate::collectives as tune;
    let Pending {
        notes,
        mut why_not,
        targets,
        fallback,
        by_comms,
        bins,
        params,
        measure,
        asked,
        rank,
        refused,
        cvars,
        signature: _,
        mut store,
    } = pending;
    for r in &notes.0 {
        log.record(r);
    }
    // Mode `safe` leaves reductions of floating-point datatypes and with
    // user-defined operations on the library's default.
    let mode = match (measure, params.exact_only) {
        (true, _) => "",
        (false, true) => " in mode safe",
        (false, false) => " in mode all",
    };
    let wanted = !targets.is_empty();
    let got: Vec<i64> = agreed.iter().map(|m| -m.a).collect();
    // Every rank holds the same tuner: its signature and the complement,
    // by minimum.
    let same = agreed.len() == AGREEMENT_LEN && agreed[REFUSED_LEN].a == !agreed[REFUSED_LEN + 1].a;
    let kept = if same {
        drop_refused(
            targets,
            cvars,
            measure,
            rank,
            log,
            &refused,
            &got[..REFUSED_LEN],
        )
    } else {
        // Not reduced, or set up differently: nothing is tuned (and a
        // rank holding a candidate it tried says so).
        Vec::new()
    };
    let mut prepared = if kept.is_empty() {
        None
    } else {
        tune::prepare(kept, fallback, by_comms, bins, params, rank)
    };
    if let (Some(tuner), Some(stored), true) = (&mut prepared, &mut store, same) {
        let words = agreed.get(REFUSED_LEN + 2..).unwrap_or_default();
        let differ = stored.agreed(words);
        let (warm, notes) = stored.warm(tuner);
        for note in differ.iter().chain(&notes) {
            log.record(&tune::note(0.0, CollectiveEvent::Stored, note.clone()));
        }
        tuner.set_warm(warm);
    }
    if same && prepared.is_none() && why_not.is_none() {
        why_not = Some(if wanted {
            "no collective can be tuned on every rank (the ranks' logs say why)".into()
        } else {
            "no collective of this library can be tuned".into()
        });
    }
    let why_not = match (same, prepared) {
        (true, Some(tuner)) => match tune::activate(tuner) {
            Ok(t) => {
                let what = t
                    .tuned()
                    .map(|t| {
                        let names: Vec<_> = t.candidates.iter().map(|(n, _)| n.as_str()).collect();
                        format!("{} ({})", t.collective.name(), names.join(", "))
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                let verb = if measure { "measuring" } else { "tuning" };
                let fallback = t.fallback().map_or_else(String::new, |f| {
                    format!(
                        "; {} is {}: the calls switched to another algorithm run with silent, \
                         so one MPICH cannot use for a call falls back to MPICH's choice",
                        tune::MPICH_FALLBACK_CVAR,
                        tune::mpich_fallback_name(f.user()).unwrap_or("not silent"),
                    )
                });
                log.record(&tune::note(
                    0.0,
                    CollectiveEvent::Start,
                    format!("{verb} {what}{mode}; window {} calls{fallback}", params.window),
                ));
                if let Some(failure) = seq.failure() {
                    // This rank failed at start after voting (its start
                    // agreement's call, after taking part, or its log):
                    // it holds what the library returned, as its peers do,
                    // and stops at the first agreed point, where every rank
                    // stops with it (the rule of the agreed points' own
                    // reductions); its "no" reaches rank 0 at finalize.
                    t.start_agreement_failed(format!(
                        "{} on this rank at start: it tunes with what the start agreement \
                         returned, as the other ranks do, and tuning stops on every rank at the \
                         first agreed point",
                        failure.message
                    ));
                }
                if rank == 0 && (asked || mpit::verbose()) {
                    mpit::say!("mpit-tuner: collective {verb} on: {what}{mode}{fallback}");
                }
                return store;
            }
            Err(e) => e,
        },
        (false, _) => "the ranks differ in what they could tune (library, variables or settings); collective tuning is off on all ranks".into(),
        (true, None) => why_not.unwrap_or_else(|| "nothing to tune".into()),
    };
    log.record(&tune::note(0.0, CollectiveEvent::Off, why_not.clone()));
    tune::set_off_reason(why_not.clone());
    if rank == 0 && (asked || mpit::verbose()) {
        mpit::say!("mpit-tuner: collective tuning is off: {why_not}");
    }
    None
}

/// The collective tuner's own reference on MPI_T: its handles live as long
/// as the process, so this reference is never finalized by the tool.
/// The target of collective `c`: the value its algorithm variable holds
/// now is the default, `wanted` the candidates (names; empty: every
/// algorithm). `None`, with a `skipped` record saying why, when it cannot
/// be tuned here, and when tuning was not `asked` for and the variable
/// holds an algorithm set before the job started (the library's own
/// choice is value 0, MPICH's `auto` and Open MPI's `ignore`): the
/// default mode leaves a user's setting alone.
fn target_at_start(
    catalogue: &Catalogue,
    own: &'static MpiT,
    info: &RunInfo,
    c: crate::collectives::Collective,
    wanted: &[String],
    asked: bool,
    log: &mut Notes,
) -> Option<crate::collectives::Target> {
    use crate::collectives as tune;
    let name = tune::algorithm_cvar(info.version.library, c);
    let default = name
        .as_deref()
        .and_then(|name| catalogue.cvar(name))
        .and_then(|v| mpit::Cvar::open(own, v, Object::None).ok())
        .and_then(|v| v.read().ok())
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    if !asked && default != 0 {
        log.record(&tune::note(
            0.0,
            CollectiveEvent::Skipped,
            format!(
                "{}: set to {default} before the job started; tuning by default leaves it (ask for \
                 tuning with MPIT_TUNER_COLLECTIVES to search from there)",
                name.unwrap_or_default()
            ),
        ));
        return None;
    }
    tune::Target::find(catalogue, info.version, c, default, wanted)
        .map_err(|e| log.record(&tune::note(0.0, CollectiveEvent::Skipped, e)))
        .ok()
}

fn own_mpit() -> Result<&'static MpiT> {
    let mut own = MpiT::init()?;
    own.set_finalize_on_drop(false);
    Ok(Box::leak(Box::new(own)))
}

/// Drops, on every rank alike, the targets and candidates that any rank's
/// library refused at start (`got`, the start agreement's reduction of
/// every rank's `refused`): a value refused at run time on one rank would
/// make that rank run a call with another algorithm than its peers. The
/// notes name the highest-numbered rank that refused.
///
/// A rank that took a candidate but could not write the default back
/// holds that candidate for the rest of the job: the same reduction
/// carries its value, and every rank writes it, so that all run the same
/// algorithm (the start agreement itself is safe from it, see
/// [`mpit::collective::Collectives::agree_start`]). Returns the targets
/// kept, with their handles and write costs.
fn drop_refused(
    targets: Vec<crate::collectives::Target>,
    cvars: Vec<Option<(mpit::Cvar<'static>, u64)>>,
    measure: bool,
    rank: i32,
    log: &mut LogWriter,
    refused: &[i64],
    got: &[i64],
) -> Vec<(crate::collectives::Target, mpit::Cvar<'static>, u64)> {
    use crate::collectives::{self as tune, search::MAX_CANDIDATES, COLLECTIVES};
    let stuck = got.len() - COLLECTIVES.len();
    let mut kept = Vec::new();
    for (mut t, cvar) in targets.into_iter().zip(cvars) {
        let c = t.collective as usize;
        let row = &got[c * MAX_CANDIDATES..(c + 1) * MAX_CANDIDATES];
        let slot = stuck + c;
        if got[slot] != 0 {
            let (value, on) = ((got[slot] >> 32) - 1, got[slot] & 0xffff_ffff);
            let here = refused[slot] >> 32 == got[slot] >> 32;
            follow_stuck(
                &t,
                cvar.as_ref().map(|(c, _)| c),
                here,
                (value, on),
                rank,
                log,
            );
        }
        if row[0] != 0 {
            if refused[c * MAX_CANDIDATES] == 0 {
                log.record(&tune::note(
                    0.0,
                    CollectiveEvent::Skipped,
                    format!(
                        "{}: not tuned: rank {} cannot tune it (its log says why)",
                        t.cvar.name,
                        row[0] - 1
                    ),
                ));
            }
            continue;
        }
        let mut i = 0;
        t.candidates.retain(|(name, value)| {
            let keep = i == 0 || row[i] == 0;
            if !keep {
                log.record(&tune::note(
                    0.0,
                    CollectiveEvent::Skipped,
                    format!(
                        "{}: `{name}` ({value}) dropped: refused on rank {}",
                        t.cvar.name,
                        row[i] - 1
                    ),
                ));
            }
            i += 1;
            keep
        });
        // Measuring keeps the one algorithm set at start. (A target kept
        // on every rank was opened on every rank: else its row says so.)
        if let (true, Some((cvar, cost))) = (t.candidates.len() > 1 || measure, cvar) {
            kept.push((t, cvar, cost));
        }
    }
    kept
}

/// Tries the candidates of every target on this rank, filling `refused`:
/// per collective, a row of [`MAX_CANDIDATES`] (index 0 the collective,
/// then its candidates; this rank + 1 where refused or unknown here, 0
/// where taken), then one slot per collective: the value a rank is stuck
/// on, as `(value + 1) << 32 | rank` (0: none). The maximum over ranks
/// names one that refused. Returns the handles, in the order of the
/// targets, each with what one write of its default costs when `costed`
/// (else 0); a variable that cannot be written at that cost is refused.
///
/// [`MAX_CANDIDATES`]: crate::collectives::search::MAX_CANDIDATES
fn try_all(
    own: &'static MpiT,
    targets: &[crate::collectives::Target],
    costed: bool,
    rank: i32,
    refused: &mut [i64],
    log: &mut Notes,
) -> Vec<Option<(mpit::Cvar<'static>, u64)>> {
    use crate::collectives::{self as tune, search::MAX_CANDIDATES, COLLECTIVES};
    let no = i64::from(rank) + 1;
    let stuck = refused.len() - COLLECTIVES.len();
    let mut cvars = Vec::new();
    for t in targets {
        let c = t.collective as usize;
        let row = &mut refused[c * MAX_CANDIDATES..(c + 1) * MAX_CANDIDATES];
        let (cvar, held) = try_candidates(own, t, row, no, log);
        if let Some(v) = held.filter(|v| (0..i64::from(i32::MAX)).contains(v)) {
            // (Algorithm values are small and not negative.)
            refused[stuck + c] = ((v + 1) << 32) | i64::from(rank);
        }
        let cvar = cvar.and_then(|cvar| {
            if !costed {
                return Some((cvar, 0));
            }
            match tune::write_cost(&cvar, t.candidates[0].1) {
                Ok(cost) => Some((cvar, cost)),
                Err(e) => {
                    refused[c * MAX_CANDIDATES] = no;
                    log.record(&tune::note(
                        0.0,
                        CollectiveEvent::Skipped,
                        format!("{}: writing its default value fails: {e}", t.cvar.name),
                    ));
                    None
                }
            }
        });
        cvars.push(cvar);
    }
    cvars
}

/// Tries `t`'s candidates on this rank, clearing in its `row` of
/// [`drop_refused`] (index 0: the collective, then its candidates; each
/// `no` until taken) those the library takes. Returns the handle, if it
/// could be opened, and the candidate this rank is stuck on, if the
/// default could not be written back.
fn try_candidates(
    own: &'static MpiT,
    t: &crate::collectives::Target,
    row: &mut [i64],
    no: i64,
    log: &mut Notes,
) -> (Option<mpit::Cvar<'static>>, Option<i64>) {
    use crate::collectives as tune;
    let cvar = match mpit::Cvar::open(own, &t.cvar, Object::None) {
        Ok(c) => c,
        Err(e) => {
            log.record(&tune::note(
                0.0,
                CollectiveEvent::Skipped,
                format!("{}: {e}", t.cvar.name),
            ));
            return (None, None);
        }
    };
    let default = t.candidates[0].1;
    row[0] = 0;
    for (i, (name, value)) in t.candidates.iter().enumerate().skip(1) {
        match tune::try_write(&cvar, *value) {
            Ok(()) => row[i] = 0,
            Err(why) => log.record(&tune::note(
                0.0,
                CollectiveEvent::Skipped,
                format!("{}: `{name}` ({value}) {why}", t.cvar.name),
            )),
        }
        if let Err(e) = cvar.write_scalar_int(default) {
            // The default cannot be put back: nothing of this
            // collective is tuned, on any rank.
            row[0] = no;
            log.record(&tune::note(
                0.0,
                CollectiveEvent::Skipped,
                format!("{}: writing the default back failed: {e}", t.cvar.name),
            ));
        }
    }
    // What this rank runs now, if it can tell; if not, the last candidate,
    // the value it holds if that write succeeded and the write-back failed.
    let held = (row[0] != 0).then(|| {
        cvar.read()
            .ok()
            .and_then(|v| v.as_i64())
            .unwrap_or_else(|| t.candidates.last().map_or(default, |c| c.1))
    });
    (Some(cvar), held.filter(|&v| v != default))
}

/// Rank `on` holds `t`'s candidate `value` and cannot write the default
/// back: this rank writes that value too through `cvar`, unless it holds
/// it `already`, and keeps it for the rest of the job.
fn follow_stuck(
    t: &crate::collectives::Target,
    cvar: Option<&mpit::Cvar<'_>>,
    already: bool,
    (value, on): (i64, i64),
    rank: i32,
    log: &mut LogWriter,
) {
    use crate::collectives as tune;
    let name = t.name_of(value).unwrap_or("?");
    let var = &t.cvar.name;
    let written = match cvar {
        _ if already => Ok(()),
        Some(c) => c.write_scalar_int(value).map_err(|e| e.to_string()),
        None => Err("no handle on it".to_string()),
    };
    let what =
        format!("{var}: rank {on} holds `{name}` ({value}) and cannot write the default back");
    match written {
        Ok(()) => log.record(&tune::note(
            0.0,
            CollectiveEvent::Skipped,
            format!(
                "{what}: every rank keeps `{name}` for the rest of the job, so that all run the \
                 same algorithm"
            ),
        )),
        Err(e) => {
            let message = format!(
                "{what}, and writing `{name}` here failed too ({e}): the ranks may run \
                 different algorithms for this collective"
            );
            mpit::say!("mpit-tuner[rank {rank}]: {message}");
            log.record(&tune::note(0.0, CollectiveEvent::Skipped, message));
        }
    }
}
