//! Starting the tuner: [`PreInit::start`] before `PMPI_Init`, [`Runtime::start`]
//! right after it.

use super::*;
use mpit::Comm;

/// The MPI routine an error names, else `default`.
fn error_call(e: &mpit::Error, default: &'static str) -> &'static str {
    match e {
        mpit::Error::Mpi(m) => m.call,
        _ => default,
    }
}

/// The state between `PreInit::start` and `Runtime::start`.
pub struct PreInit {
    /// First, so dropped first: opened services hold MPI_T handles (a
    /// PVAR session), which must go before `mpit` finalizes MPI_T.
    services: Vec<Box<dyn Service>>,
    config: Config,
    warnings: Vec<String>,
    mpit: MpiT,
    catalogue: Catalogue,
    start: Instant,
}

impl PreInit {
    /// Runs the services' `before_mpit`, initialises MPI_T and loads the
    /// catalogue before `PMPI_Init`, then runs their `pre_init`.
    /// `services` are [`crate::services::all`]'s.
    pub fn start(
        config: Config,
        warnings: Vec<String>,
        mut services: Vec<Box<dyn Service>>,
    ) -> Result<PreInit> {
        let launch = LaunchEnv::from_env();
        for s in &mut services {
            s.before_mpit(&launch);
        }
        let mpit = MpiT::init()?;
        let catalogue = Catalogue::load(&mpit)?;
        let launch = LaunchEnv::from_env();
        for s in &mut services {
            s.pre_init(&mpit, &catalogue, &launch);
        }
        Ok(PreInit {
            config,
            warnings,
            mpit,
            catalogue,
            services,
            start: Instant::now(),
        })
    }
}

/// What the start agreement leaves a rank that may go on: its place, its
/// state from before init with its services opened, the error handler
/// guard and the sequence of the tool's collectives on it.
struct Joined {
    rank: i32,
    pre: PreInit,
    /// `MPI_ERRORS_RETURN` on `MPI_COMM_WORLD` until the start is over.
    guard: ErrorsReturn,
    seq: Collectives,
    /// Per service, whether its identity is the same on every rank.
    same: Vec<bool>,
    /// The run directory rank 0 made.
    dir: Option<PathBuf>,
    /// The logs' layout, agreed.
    layout: record::LogLayout,
    /// Facts about this rank (without the run directory).
    info: RunInfo,
    /// What `MPI_Init` added to the catalogue.
    growth: Growth,
    /// The services' messages from their `open`, for the log only.
    opened: Vec<String>,
    /// The services' parts of the agreement, reduced.
    agreed: Vec<collective::Mixed>,
}

impl Runtime {
    /// Starts the tuner right after `PMPI_Init`: a collective over
    /// `MPI_COMM_WORLD` (every rank calls it inside MPI_Init).
    ///
    /// Returns `Err(Disabled)` with a message (for rank 0; empty on the
    /// others) when the tuner cannot run, on every rank alike: the ranks go
    /// through the same sequence of the tool's collectives whatever fails
    /// locally, and one agreement decides (see [`mpit::collective`]): every
    /// rank has MPI_T, its place, its services opened and the same
    /// services' identities; it carries the logs' layout, the run
    /// directory's name and what the services agree on at start. It runs
    /// on `MPI_COMM_WORLD` with `MPI_ERRORS_RETURN` swapped in until the
    /// start is over. A rank whose log cannot be opened after it goes on
    /// without one (it says so on its standard error) and votes no at the
    /// next of the tool's collectives.
    ///
    /// `pre` is what [`PreInit::start`] returned on this rank.
    pub fn start(
        pre: std::result::Result<PreInit, String>,
    ) -> std::result::Result<Runtime, Disabled> {
        let world = mpit::comm_world().map_err(|e| Disabled(format!("no MPI_COMM_WORLD: {e}")))?;
        let Joined {
            rank,
            pre,
            guard,
            mut seq,
            same,
            dir,
            layout,
            mut info,
            growth,
            opened,
            agreed,
        } = join(world, pre).map_err(NotJoined::leave_log)?;
        let PreInit {
            config,
            mut warnings,
            mpit,
            catalogue,
            mut services,
            start,
        } = pre;
        info.dir = dir.clone().unwrap_or_default();
        let mut log = open_log(&mut seq, dir.as_deref(), &info, layout, &config);
        if let Some(w) = helper::no_spare_core_warning(config.interval, cpus(), local_ranks()) {
            warnings.push(w);
        }
        // Configuration problems go to rank 0's terminal; variables that
        // cannot be sampled (components the library unloaded) and the
        // services' own messages only to the log.
        if rank == 0 {
            for w in &warnings {
                mpit::say!("mpit-tuner: warning: {w}");
            }
        }
        warnings.extend(catalogue.skipped_summary());
        warnings.extend(opened);
        // A service whose set-up differs across ranks is off on all of
        // them (said after the header); the others start, each with its
        // own part of the agreement and its own collectives after it: a
        // failure there turns off only that service.
        let differ: Vec<String> = services
            .iter_mut()
            .zip(&same)
            .filter(|(_, same)| !**same)
            .map(|(s, _)| s.differs())
            .collect();
        let mut first = header(&info, &mpit, &config, &catalogue, growth);
        if let Record::Header(h) = &mut first {
            h.layout = layout;
            for s in &services {
                s.header(h);
            }
        }
        log.record(&first);
        for w in &warnings {
            log.record(&warning(0.0, w));
        }
        // Who started is on disk before anything else can go wrong.
        log.flush();
        for message in &differ {
            if rank == 0 {
                mpit::say!("mpit-tuner: {message}");
            }
            log.record(&warning(0.0, message));
        }
        let mut starting = crate::services::Start {
            mpit: &mpit,
            catalogue: &catalogue,
            config: &config,
            info: &info,
            dir: dir.as_deref(),
            log: &mut log,
            seq: &mut seq,
            agreed: &[],
        };
        for (s, part) in services
            .iter_mut()
            .zip(crate::services::agreed_parts(&agreed))
        {
            starting.agreed = part;
            s.start(&mut starting);
        }
        log.flush();
        let mixed = seq.take_mixed();
        let failure = seq.into_pending();
        restore_world(guard, rank);
        let stoppers = services.iter().filter_map(|s| s.stopper()).collect();

        let shared: &'static Shared = Box::leak(Box::new(Shared {
            objects: ObjectTable::new(OBJECT_CAPACITY),
            stop: AtomicBool::new(false),
            flush: AtomicBool::new(false),
            flushed: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            helper: std::sync::OnceLock::new(),
        }));
        shared.objects.register(Object::Comm(world));
        let parts = helper::Parts {
            services,
            catalogue,
            log,
        };
        let (helper, done) = helper::spawn(shared, parts, &config, start, rank);
        if let Some(thread) = &helper {
            // Set once, here, before anything can ask for a flush.
            let _ = shared.helper.set(thread.clone());
        }
        Ok(Runtime {
            shared,
            info,
            config,
            mpit,
            world,
            failure,
            mixed,
            helper,
            done,
            stoppers,
        })
    }
}

/// What a rank finds and opens on its own before the start agreement:
/// the catalogue as `MPI_Init` left it, its facts, its services opened
/// (a service that cannot open is this rank's vote against starting).
/// Returns what `MPI_Init` added to the catalogue, the facts and the
/// services' messages.
fn open_locally(
    p: &mut PreInit,
    rank: i32,
    size: i32,
    seq: &mut Collectives,
) -> (Growth, RunInfo, Vec<String>) {
    let growth = p.catalogue.refresh(&p.mpit).unwrap_or_else(|e| {
        p.warnings.push(format!(
            "the variables added by MPI_Init could not be listed ({e}); the catalogue is the one from before MPI_Init"
        ));
        Growth::default()
    });
    let info = run_info(&p.mpit, rank, size, None, &mut p.warnings);
    let mut opened = Vec::new();
    let mut open = crate::services::Open {
        mpit: &p.mpit,
        catalogue: &p.catalogue,
        config: &p.config,
        rank,
        info: &info,
        warnings: &mut opened,
    };
    for s in &mut p.services {
        if let Err(e) = s.open(&mut open) {
            seq.fail_local(e);
        }
    }
    (growth, info, opened)
}

/// The start agreement, on `MPI_COMM_WORLD` with `MPI_ERRORS_RETURN`
/// swapped in: every rank has MPI_T, its place, its services opened, the
/// same services' identities and the mixed reductions' operation; or the
/// tuner is off on every rank. One `MPI_MIN` (a basic operation: a rank
/// that could not make the tool's own still takes part), and a broadcast
/// after it only for a run directory's name too long to travel in it.
fn join(
    world: Comm,
    mut pre: std::result::Result<PreInit, String>,
) -> std::result::Result<Joined, Box<NotJoined>> {
    // The application cannot use MPI_COMM_WORLD before MPI_Init
    // returns: the tool's calls on it return their errors meanwhile.
    let (guard, swap_error) = ErrorsReturn::swap_in(world);
    let launch = LaunchEnv::from_env();
    let (rank, size, place) = match mpit::rank_size(world) {
        Ok((rank, size)) => (rank, size, None),
        Err(e) => (
            launch.rank.map_or(0, |r| r as i32),
            launch.size.map_or(1, |s| s as i32),
            Some(e),
        ),
    };
    let mut seq = Collectives::new(world, rank);
    if let Some(e) = swap_error {
        seq.fail(error_call(&e, "MPI_Comm_set_errhandler"), &e);
    }
    if let Some(e) = place {
        seq.fail(error_call(&e, "MPI_Comm_rank"), &e);
    }
    if let Err(why) = &pre {
        seq.fail_local(format!("{why} (rank {rank})"));
    }
    // Rank 0 names and makes the run directory now: its name travels in
    // the agreement below.
    let proposed = match (&pre, rank) {
        (Ok(p), 0) => match rundir::propose_run_dir(p.config.dir.as_deref()) {
            Ok(dir) => Some(dir),
            Err(why) => {
                seq.fail_local(why);
                None
            }
        },
        _ => None,
    };
    // Services that make collectives of their own at start (collective
    // tuning's set-up) run only where every rank holds the same: checked
    // in the same reduction.
    let identities: Vec<u64> = match &pre {
        Ok(p) => p.services.iter().map(|s| s.identity()).collect(),
        Err(_) => Vec::new(),
    };
    // The mixed reductions' operation (for the services' and the
    // summary's reductions), made here so that a rank that cannot make it
    // votes no below.
    seq.prepare_mixed();
    let local = pre
        .as_mut()
        .ok()
        .map(|p| open_locally(p, rank, size, &mut seq));
    let long = rundir::named_too_long(pre.as_ref().ok().and_then(|p| p.config.dir.as_deref()));
    let mut payload = identity_votes(&identities);
    let n = payload.len();
    let wish = pre.as_ref().ok().and_then(|p| p.config.log_layout);
    payload.extend(rundir::layout_votes(wish, &mpit::host_name()));
    let l = payload.len();
    payload.extend(crate::services::agreement(match &pre {
        Ok(p) => &p.services,
        Err(_) => &[],
    }));
    let s = payload.len();
    payload.extend(rundir::run_dir_votes(proposed.as_deref(), long));
    let (verdict, agreed) = seq.agree_start(&payload);
    let same = same_identities(&agreed[..n.min(agreed.len())], seq.failed());
    let layout = rundir::agreed_layout(agreed.get(n..l).unwrap_or_default(), size);
    let services_agreed = agreed.get(l..s).unwrap_or_default().to_vec();
    let dir = match (&verdict, agreed.get(s..)) {
        (Verdict::AllOk, Some(words)) => {
            rundir::agreed_run_dir(&mut seq, words, proposed.as_deref(), long)
        }
        _ => None,
    };
    // A rank whose agreement call failed goes on without rank 0's word:
    // its log goes to the directory the user named, if any, so that it
    // still says why the tuner stops at the next of the tool's calls.
    let dir = dir.or_else(|| {
        let named = pre.as_ref().ok()?.config.dir.clone()?;
        (seq.failed() && rundir::create_private_dir(&named).is_ok()).then_some(named)
    });
    if let Verdict::Failed(why) = verdict {
        if let Err(e) = seq.release_mixed() {
            mpit::say_always!(
                "mpit-tuner[rank {rank}]: freeing the tool's reduction operation: {e}"
            );
        }
        restore_world(guard, rank);
        return Err(Box::new(NotJoined {
            disabled: stop(rank, &why),
            reason: format!("the tuner could not start: {why}; it is off on all ranks"),
            pre: pre.ok(),
            rank,
            size,
        }));
    }
    // This rank voted yes (else the verdict was Failed everywhere), so
    // it has MPI_T and opened its services.
    let (Ok(pre), Some((growth, info, opened))) = (pre, local) else {
        restore_world(guard, rank);
        let reason = "the tuner could not start on this rank".to_string();
        return Err(Box::new(NotJoined {
            disabled: Disabled(reason.clone()),
            reason,
            pre: None,
            rank,
            size,
        }));
    };
    Ok(Joined {
        rank,
        pre,
        guard,
        seq,
        same,
        dir,
        layout,
        info,
        growth,
        opened,
        agreed: services_agreed,
    })
}

/// Puts the application's error handler back on `MPI_COMM_WORLD` (before
/// its `MPI_Init` returns); a failure is said on this rank's stderr.
fn restore_world(guard: ErrorsReturn, rank: i32) {
    if let Err(e) = guard.restore() {
        mpit::say_always!(
            "mpit-tuner[rank {rank}]: while putting the application's error handler back on MPI_COMM_WORLD: {e}"
        );
    }
}

/// A rank whose start agreement failed: the tuner is off on every rank.
struct NotJoined {
    /// What the rank prints.
    disabled: Disabled,
    /// Why, as the ranks agreed it, for the log.
    reason: String,
    /// What this rank started before `MPI_Init`, if it did.
    pre: Option<PreInit>,
    rank: i32,
    size: i32,
}

impl NotJoined {
    /// Leaves this rank's log (header, the reason, a `disabled` close) in
    /// the run directory the user named, without the agreement on a run
    /// directory that could not take place; then gives the message to
    /// print. Without a named directory (the default one's name is
    /// rank 0's to choose) or without MPI_T on this rank (no header to
    /// write), nothing is written.
    fn leave_log(self: Box<Self>) -> Disabled {
        let NotJoined {
            disabled,
            reason,
            pre,
            rank,
            size,
        } = *self;
        let Some(PreInit {
            services,
            config,
            warnings,
            mpit,
            catalogue,
            start,
        }) = pre
        else {
            return disabled;
        };
        // The services opened before the agreement close before MPI_T.
        drop(services);
        let Some(dir) = config.dir.as_deref() else {
            return disabled;
        };
        if let Err(e) = rundir::create_private_dir(dir) {
            mpit::say_always!(
                "mpit-tuner[rank {rank}]: cannot create run directory {} for the log of a tuner that did not start: {e}",
                dir.display()
            );
            return disabled;
        }
        let mut warnings = warnings;
        let info = run_info(&mpit, rank, size, Some(dir), &mut warnings);
        let path = dir.join(log::rank_file_name(rank));
        let mut log = match LogWriter::create(&path, config.flush) {
            Ok(log) => log,
            Err(e) => {
                mpit::say_always!(
                    "mpit-tuner[rank {rank}]: cannot write {} for a tuner that did not start: {e}",
                    path.display()
                );
                return disabled;
            }
        };
        warnings.extend(catalogue.skipped_summary());
        log.record(&header(
            &info,
            &mpit,
            &config,
            &catalogue,
            Growth::default(),
        ));
        for w in &warnings {
            log.record(&warning(0.0, w));
        }
        close_disabled(&mut log, start, &reason);
        disabled
    }
}

/// Turns the tuner off on this rank after a failed agreement: rank 0 says
/// it for the job, another rank only what failed there.
fn stop(rank: i32, why: &collective::FailedOn) -> Disabled {
    Disabled(match (&why.mine, rank) {
        (_, 0) => format!("the tuner could not start: {why}; it is off on all ranks"),
        (Some(mine), _) => format!("{} (this rank)", mine.message),
        (None, _) => String::new(),
    })
}

/// Facts about this rank for the header and the summary.
fn run_info(
    mpit: &MpiT,
    rank: i32,
    size: i32,
    dir: Option<&Path>,
    warnings: &mut Vec<String>,
) -> RunInfo {
    let library_version = mpit.library_version().unwrap_or_else(|e| {
        warnings.push(format!("the MPI library did not say its version: {e}"));
        String::new()
    });
    RunInfo {
        rank,
        size,
        host: mpit::host_name(),
        pid: std::process::id(),
        version: LibraryVersion::parse(&library_version),
        library_version,
        dir: dir.map(Path::to_path_buf).unwrap_or_default(),
        start_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    }
}

/// This rank's log in the run directory (its own file, or its node's in
/// the per-node layout). A log that cannot be opened (after the start
/// agreement: the run directory's name and the layout come from it) is
/// said on this rank's standard error and recorded as this rank's
/// failure: its vote against the next of the tool's collectives
/// (collective tuning's set-up, the summary at finalize).
fn open_log(
    seq: &mut Collectives,
    dir: Option<&Path>,
    info: &RunInfo,
    layout: record::LogLayout,
    config: &Config,
) -> LogWriter {
    let Some(dir) = dir else {
        return LogWriter::discard();
    };
    let opened = match layout {
        record::LogLayout::Rank => {
            let path = dir.join(log::rank_file_name(info.rank));
            (LogWriter::create(&path, config.flush), path)
        }
        record::LogLayout::Node => {
            let path = dir.join(log::node_file_name(&info.host));
            let rank = u32::try_from(info.rank).unwrap_or_default();
            (LogWriter::append_shared(&path, rank, config.flush), path)
        }
    };
    let (log, path) = opened;
    log.unwrap_or_else(|e| {
        let why = format!("cannot write {} (MPIT_TUNER_DIR): {e}", path.display());
        mpit::say_always!(
            "mpit-tuner[rank {}]: {why}; this rank's tuner goes on without a log, and the job's \
             summary is not written",
            info.rank
        );
        seq.fail_local(why);
        LogWriter::discard()
    })
}

/// CPUs this rank may use (0 when unknown).
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// Ranks on this node, as the launcher says.
fn local_ranks() -> Option<usize> {
    ["MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// The log's first record.
fn header(
    info: &RunInfo,
    mpit: &MpiT,
    config: &Config,
    catalogue: &Catalogue,
    growth: Growth,
) -> Record<'static> {
    Record::Header(record::Header {
        version: record::FORMAT_VERSION,
        rank: info.rank,
        size: info.size,
        host: info.host.clone(),
        pid: info.pid,
        library: info.version.library.into(),
        library_version: info.library_version.clone(),
        library_file: mpit
            .library_file()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        mpi_t_thread_level: serde_name(mpit.provided()),
        concurrent_callers: crate::sample::toolmetrics::concurrent_callers(),
        start_unix: info.start_unix,
        config: config_record(config),
        catalogue: record::CatalogueCounts {
            cvars: catalogue.cvars().len(),
            pvars: catalogue.pvars().len(),
            categories: catalogue.categories().len(),
            skipped: catalogue.skipped().len(),
            grew_during_init: growth,
        },
        variables: Vec::new(),
        layout: record::LogLayout::Rank,
    })
}

/// The end of a log whose rank did not start: why, and a close record.
fn close_disabled(log: &mut LogWriter, start: Instant, message: &str) {
    log.record(&warning(0.0, message));
    log.record(&Record::Close(record::Close {
        t: start.elapsed().as_secs_f64(),
        reason: record::CloseReason::Disabled,
        samples: 0,
        objects_untracked: 0,
        objects_short_lived: 0,
        control_listings: None,
    }));
    log.flush();
}

/// A rank's part of the start agreement for the services' identities:
/// each identity and its complement (identities are below 2^63), whose
/// minimums say whether every rank holds the same. Its length is the same
/// everywhere: a rank without services contributes zeros, and its failure
/// fails the agreement.
fn identity_votes(identities: &[u64]) -> Vec<collective::Mixed> {
    (0..crate::services::COUNT)
        .flat_map(|i| {
            let x = identities
                .get(i)
                .map_or(0, |x| (*x & (u64::MAX >> 1)) as i64);
            [collective::Mixed::min(x), collective::Mixed::min(!x)]
        })
        .collect()
}

/// Per service, from the reduced [`identity_votes`], whether its identity
/// is the same on every rank (yes after a failed call: the agreement
/// fails).
fn same_identities(reduced: &[collective::Mixed], failed: bool) -> Vec<bool> {
    (0..crate::services::COUNT)
        .map(|i| {
            failed
                || reduced
                    .get(2 * i..2 * i + 2)
                    .is_none_or(|p| p[0].a == !p[1].a)
        })
        .collect()
}
