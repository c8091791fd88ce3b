//! The cost a wrapped MPI call adds to the application: each case runs the
//! same MPI calls through the interposer's exported wrappers (`MPI_*`) and
//! directly (`PMPI_*`, the library's own entry points).
//!
//! This binary links the preload crate's rlib (`preload`): its
//! `#[no_mangle]` exports define `MPI_Init`, `MPI_Comm_dup`, ... in the
//! executable itself, so a call to `MPI_Comm_dup` here is the wrapper (which
//! finds the real function with `dlsym(RTLD_NEXT)`, as it does under
//! `LD_PRELOAD`) while `PMPI_Comm_dup` is the library's. MPI is initialised
//! through the wrapper, with `MPIT_TUNER_DIR` set to a temporary directory
//! and `MPIT_TUNER_QUIET=1`, so the tuner runs as in an application: helper
//! thread sampling, default policies, object table.
//!
//! Collective tuning: MPI is initialised with online collective tuning of
//! `MPI_Allreduce` on (`MPIT_TUNER_COLLECTIVES=allreduce` and a policy
//! file whose only content is a `[collectives]` table: communicators of
//! one rank tuned, a margin no candidate can beat, so the search keeps the
//! default). The 8-byte allreduce is called until its search has ended,
//! then measured in steady state (`allreduce_8B(world), tuning on`: a
//! lookup and a compare per call, and the drift check's timed window now
//! and then), then tuning is stopped and every case below runs with
//! today's wrapper, tuning off. The last `hot_path:` lines compare the
//! two, for an 8-byte allreduce of a double and of an int64.
//! `HOT_PATH_COLLECTIVES=safe` runs the tuner in mode `safe` instead, where
//! the double's allreduce is left on the default by the wrapper's class
//! check and the int64's is tuned. Where the library does not take algorithm changes at run time
//! (Open MPI), tuning does not start and the bench says so.
//!
//! `HOT_PATH_COUNT=N` (benches/hot-path-instructions.sh runs it under
//! callgrind) skips criterion: one tuned case (`HOT_PATH_CASE`) runs N
//! calls direct, with tuning on in steady state and with tuning off, each
//! loop in a function of its own for callgrind to collect, with windows of
//! `HOT_PATH_WINDOW` calls (see [`counted`]).
//!
//! Adding a case: write a [`Case`] in [`cases`] with the MPI functions it
//! calls (`symbols`), a wrapped and a direct closure doing the same calls.
//! A case whose functions the interposer does not (yet) wrap still runs,
//! and is reported as "not wrapped" (it then compares the library with
//! itself): the point-to-point and collective cases start measuring the
//! wrappers as soon as they are exported.

use criterion::Criterion;
use mpit_sys::{MPI_Comm, MPI_Datatype, MPI_Op, MPI_Status};
use mpit_tuner_benches::paired;
use std::ffi::{c_char, c_int, c_void, CString};
use std::hint::black_box;
use tuner_core::collectives;
use tuner_core::sample::toolmetrics;

// Link the interposer into this binary (its exports are what we call).
use preload as _;

/// `MPI_Request`: an `int` in MPICH's ABI, a pointer in Open MPI's.
#[cfg(mpi_flavor = "openmpi")]
type MpiRequest = *mut c_void;
/// `MPI_Request`: an `int` in MPICH's ABI, a pointer in Open MPI's.
#[cfg(not(mpi_flavor = "openmpi"))]
type MpiRequest = c_int;

/// Declares each function twice: `MPI_x` (resolved to the interposer's
/// export when it has one, else to the library) and `PMPI_x` (the library).
macro_rules! mpi_functions {
    ($($name:ident / $pname:ident ( $($arg:ident : $ty:ty),* );)+) => {
        extern "C" {
            $(
                fn $name($($arg: $ty),*) -> c_int;
                fn $pname($($arg: $ty),*) -> c_int;
            )+
        }
    };
}

extern "C" {
    fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int;
    fn MPI_Finalize() -> c_int;
}

mpi_functions! {
    MPI_Comm_dup / PMPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm);
    MPI_Comm_free / PMPI_Comm_free(comm: *mut MPI_Comm);
    MPI_Barrier / PMPI_Barrier(comm: MPI_Comm);
    MPI_Allreduce / PMPI_Allreduce(send: *const c_void, recv: *mut c_void, count: c_int,
        datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm);
    MPI_Sendrecv / PMPI_Sendrecv(sendbuf: *const c_void, sendcount: c_int,
        sendtype: MPI_Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void,
        recvcount: c_int, recvtype: MPI_Datatype, source: c_int, recvtag: c_int,
        comm: MPI_Comm, status: *mut MPI_Status);
    MPI_Isend / PMPI_Isend(buf: *const c_void, count: c_int, datatype: MPI_Datatype,
        dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MpiRequest);
    MPI_Irecv / PMPI_Irecv(buf: *mut c_void, count: c_int, datatype: MPI_Datatype,
        source: c_int, tag: c_int, comm: MPI_Comm, request: *mut MpiRequest);
    MPI_Wait / PMPI_Wait(request: *mut MpiRequest, status: *mut MPI_Status);
}

/// The shim's constants this bench needs.
#[derive(Clone, Copy)]
struct Consts {
    world: MPI_Comm,
    selfc: MPI_Comm,
    byte: MPI_Datatype,
    double: MPI_Datatype,
    int64: MPI_Datatype,
    sum: MPI_Op,
    status_ignore: *mut MPI_Status,
}

impl Consts {
    fn read() -> Consts {
        // SAFETY: reading constants of the C shim after MPI_Init (the Open
        // MPI data symbols they point at are resolved: libmpi is linked).
        unsafe {
            Consts {
                world: mpit_sys::MPIT_COMM_WORLD,
                selfc: mpit_sys::MPIT_COMM_SELF,
                byte: mpit_sys::MPIT_BYTE,
                double: mpit_sys::MPIT_DOUBLE,
                int64: mpit_sys::MPIT_INT64_T,
                sum: mpit_sys::MPIT_SUM,
                status_ignore: mpit_sys::MPIT_STATUS_IGNORE,
            }
        }
    }
}

fn ok(rc: c_int) {
    // SAFETY: reading a constant of the C shim.
    let success = unsafe { mpit_sys::MPIT_SUCCESS };
    assert_eq!(rc, success, "MPI call failed with {rc}");
}

/// One measured pair: the same MPI calls through the wrappers and direct.
struct Case {
    name: &'static str,
    /// The MPI functions the case calls, with the address each name has in
    /// this binary (the interposer's export, or the library's function).
    symbols: Vec<(&'static str, usize)>,
    wrapped: Box<dyn FnMut()>,
    direct: Box<dyn FnMut()>,
}

/// Whether the interposer exports `name`: in this binary the name then
/// resolves to the wrapper, while the next definition after the executable
/// (`dlsym(RTLD_NEXT)`, what the wrapper itself calls) is the library's.
fn is_wrapped(name: &str, address: usize) -> bool {
    let cname = CString::new(name).expect("a symbol name");
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT from the
    // executable searches the libraries loaded after it.
    let library = unsafe { libc::dlsym(libc::RTLD_NEXT, cname.as_ptr()) } as usize;
    library != 0 && library != address
}

fn cases(k: Consts) -> Vec<Case> {
    /// Pairs a name with the address the name has in this binary.
    macro_rules! syms {
        ($($f:ident),+) => { vec![$((stringify!($f), $f as *const () as usize)),+] };
    }
    let send = [1.0f64; 1];
    let mut recv = [0.0f64; 1];
    let mut recv2 = recv;
    let sendi = [1i64; 1];
    let mut recvi = [0i64; 1];
    let mut recvi2 = recvi;
    vec![
        Case {
            name: "comm_dup+comm_free",
            symbols: syms!(MPI_Comm_dup, MPI_Comm_free),
            wrapped: Box::new(move || {
                let mut comm = k.world;
                // SAFETY: a live communicator and a valid out-pointer; the
                // new communicator is freed right away.
                unsafe {
                    ok(MPI_Comm_dup(k.world, &mut comm));
                    ok(MPI_Comm_free(&mut comm));
                }
            }),
            direct: Box::new(move || {
                let mut comm = k.world;
                // SAFETY: as above.
                unsafe {
                    ok(PMPI_Comm_dup(k.world, &mut comm));
                    ok(PMPI_Comm_free(&mut comm));
                }
            }),
        },
        Case {
            name: "barrier(world)",
            symbols: syms!(MPI_Barrier),
            // SAFETY: a live communicator.
            wrapped: Box::new(move || unsafe { ok(MPI_Barrier(k.world)) }),
            // SAFETY: a live communicator.
            direct: Box::new(move || unsafe { ok(PMPI_Barrier(k.world)) }),
        },
        Case {
            name: "allreduce_8B(world)",
            symbols: syms!(MPI_Allreduce),
            wrapped: Box::new(move || {
                // SAFETY: one double in each buffer, a predefined datatype
                // and operation, a live communicator.
                unsafe {
                    ok(MPI_Allreduce(
                        send.as_ptr().cast(),
                        recv.as_mut_ptr().cast(),
                        1,
                        k.double,
                        k.sum,
                        k.world,
                    ))
                }
            }),
            direct: Box::new(move || {
                // SAFETY: as above.
                unsafe {
                    ok(PMPI_Allreduce(
                        send.as_ptr().cast(),
                        recv2.as_mut_ptr().cast(),
                        1,
                        k.double,
                        k.sum,
                        k.world,
                    ))
                }
            }),
        },
        Case {
            name: "allreduce_8B_int(world)",
            symbols: syms!(MPI_Allreduce),
            wrapped: Box::new(move || {
                // SAFETY: one int64 in each buffer, a predefined datatype
                // and operation, a live communicator.
                unsafe {
                    ok(MPI_Allreduce(
                        sendi.as_ptr().cast(),
                        recvi.as_mut_ptr().cast(),
                        1,
                        k.int64,
                        k.sum,
                        k.world,
                    ))
                }
            }),
            direct: Box::new(move || {
                // SAFETY: as above.
                unsafe {
                    ok(PMPI_Allreduce(
                        sendi.as_ptr().cast(),
                        recvi2.as_mut_ptr().cast(),
                        1,
                        k.int64,
                        k.sum,
                        k.world,
                    ))
                }
            }),
        },
        Case {
            name: "sendrecv_0B(self)",
            symbols: syms!(MPI_Sendrecv),
            wrapped: Box::new(move || {
                // SAFETY: zero-byte messages to and from this rank on
                // MPI_COMM_SELF; no buffer is touched.
                unsafe {
                    ok(MPI_Sendrecv(
                        std::ptr::null(),
                        0,
                        k.byte,
                        0,
                        7,
                        std::ptr::null_mut(),
                        0,
                        k.byte,
                        0,
                        7,
                        k.selfc,
                        k.status_ignore,
                    ))
                }
            }),
            direct: Box::new(move || {
                // SAFETY: as above.
                unsafe {
                    ok(PMPI_Sendrecv(
                        std::ptr::null(),
                        0,
                        k.byte,
                        0,
                        7,
                        std::ptr::null_mut(),
                        0,
                        k.byte,
                        0,
                        7,
                        k.selfc,
                        k.status_ignore,
                    ))
                }
            }),
        },
        Case {
            name: "irecv+isend+2wait_8B(self)",
            symbols: syms!(MPI_Irecv, MPI_Isend, MPI_Wait),
            wrapped: Box::new(move || {
                let (mut out, mut inp) = ([3u8; 8], [0u8; 8]);
                // SAFETY: zeroed requests are overwritten by the calls.
                let (mut r1, mut r2): (MpiRequest, MpiRequest) = unsafe { std::mem::zeroed() };
                // SAFETY: 8-byte buffers that outlive both requests, which
                // are completed before returning.
                unsafe {
                    ok(MPI_Irecv(
                        inp.as_mut_ptr().cast(),
                        8,
                        k.byte,
                        0,
                        9,
                        k.selfc,
                        &mut r1,
                    ));
                    ok(MPI_Isend(
                        out.as_mut_ptr().cast(),
                        8,
                        k.byte,
                        0,
                        9,
                        k.selfc,
                        &mut r2,
                    ));
                    ok(MPI_Wait(&mut r2, k.status_ignore));
                    ok(MPI_Wait(&mut r1, k.status_ignore));
                }
                black_box(inp);
            }),
            direct: Box::new(move || {
                let (mut out, mut inp) = ([3u8; 8], [0u8; 8]);
                // SAFETY: zeroed requests are overwritten by the calls.
                let (mut r1, mut r2): (MpiRequest, MpiRequest) = unsafe { std::mem::zeroed() };
                // SAFETY: as above.
                unsafe {
                    ok(PMPI_Irecv(
                        inp.as_mut_ptr().cast(),
                        8,
                        k.byte,
                        0,
                        9,
                        k.selfc,
                        &mut r1,
                    ));
                    ok(PMPI_Isend(
                        out.as_mut_ptr().cast(),
                        8,
                        k.byte,
                        0,
                        9,
                        k.selfc,
                        &mut r2,
                    ));
                    ok(PMPI_Wait(&mut r2, k.status_ignore));
                    ok(PMPI_Wait(&mut r1, k.status_ignore));
                }
                black_box(inp);
            }),
        },
    ]
}

/// The policy file of this bench: collective tuning only, the default
/// always kept (a candidate would have to be 99% faster), windows of 64
/// calls, communicators of one rank tuned.
const TUNING: &str = r#"
[collectives]
window = 64
windows = 1
margin = 0.99
min_comm_size = 1
[collectives.algorithms.mpich]
allreduce = ["recursive_doubling"]
"#;

/// The 8-byte allreduces measured with collective tuning on: of a double
/// (mode `safe` leaves it on the default: the wrapper's class check only)
/// and of an int64 (tuned in either mode).
const TUNED_CASES: [&str; 2] = ["allreduce_8B(world)", "allreduce_8B_int(world)"];

/// Measures the 8-byte allreduces with collective tuning on, in steady
/// state; returns each one's paired added time per call (seconds), none
/// when tuning does not run in this process.
fn tuned_allreduces(c: &mut Criterion, k: Consts, mode: &str) -> Vec<(&'static str, f64)> {
    if !collectives::on() {
        println!(
            "hot_path: allreduce_8B, tuning on: collective tuning did not start with this \
             library (see the run directory's log): no row"
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    for mut case in cases(k)
        .into_iter()
        .filter(|c| TUNED_CASES.contains(&c.name))
    {
        // Until the search has ended: warm-up, the default's and the
        // candidate's window, with room to spare.
        for _ in 0..20_000 {
            (case.wrapped)();
        }
        let mut group = c.benchmark_group(format!("hot_path/{}, tuning on ({mode})", case.name));
        group.bench_function("wrapped", |b| b.iter(&mut case.wrapped));
        group.bench_function("direct", |b| b.iter(&mut case.direct));
        group.finish();
        let p = paired::compare(100, 2_000, &mut case.wrapped, &mut case.direct);
        let added = p.a.as_secs_f64() - p.b.as_secs_f64();
        println!(
            "hot_path: {}, collective tuning on ({mode}), steady state: wrapped/direct {p}; \
             added {:+.1} ns per iteration",
            case.name,
            added * 1e9
        );
        out.push((case.name, added));
    }
    out
}

/// `HOT_PATH_COUNT=N HOT_PATH_CASE=NAME` (benches/hot-path-instructions.sh
/// runs it under callgrind): no criterion; the tuned case NAME, once its
/// search has ended and no tuning event came for 128 windows (or none
/// came in 200,000 calls: a call the mode does not tune), runs N calls in
/// each of the `counted_*` loops, the only code callgrind collects
/// (`--collect-atstart=no --toggle-collect='*counted_*'`): the
/// instructions per call of the library's function, of the wrapper with
/// tuning on in steady state, and of the wrapper with tuning off (each
/// loop's `black_box` of its own number keeps the compiler from merging
/// the three identical functions into one name). A count
/// of instructions does not move with the machine's load, which timing
/// 8-byte calls of tens of nanoseconds does (BENCHMARKS.md).
fn counted(k: Consts, n: u64, name: &str, window: u64) {
    let Some(mut case) = cases(k).into_iter().find(|c| c.name == name) else {
        let names: Vec<&str> = cases(k).iter().map(|c| c.name).collect();
        panic!("HOT_PATH_CASE={name}: no such case (cases: {names:?})");
    };
    println!(
        "hot_path: counting {name}, {n} calls a loop; collective tuning {}",
        if collectives::on() {
            "on"
        } else {
            "off (did not start)"
        }
    );
    // Until the search has ended (settling, the default's window, the
    // candidate's) and no event came for `still` calls (a search that ends
    // in a tie, as this bench's margin makes every one, is searched once
    // more at the first check point, 64 windows later: `still` is two
    // such distances), or 200,000 calls without any search
    // (a call the mode does not tune). This thread takes the tuner's
    // events (the helper thread, at `MPIT_TUNER_INTERVAL=1h`, does not)
    // and prints them.
    let still = 50_000.max(2 * 64 * window);
    let (mut warm, mut events, mut decided, mut since) = (0u64, 0usize, false, 0u64);
    loop {
        for _ in 0..window.max(1_000) {
            (case.wrapped)();
        }
        warm += window.max(1_000);
        since += window.max(1_000);
        let (new, decisions) = tuning_events();
        if new > 0 {
            since = 0;
        }
        events += new;
        decided |= decisions > 0;
        if !collectives::on() || (decided && since >= still) || (events == 0 && warm >= 200_000) {
            break;
        }
        assert!(warm < 20_000_000, "no steady state after {warm} calls");
    }
    println!("hot_path: counting after {warm} calls ({events} tuning events before)");
    counted_direct(&mut case.direct, n);
    counted_tuning_on(&mut case.wrapped, n);
    if tuning_events().0 == 0 {
        println!("hot_path: no tuning event during the counted loops (steady state)");
    }
    for m in collectives::stop() {
        println!("hot_path: stopping collective tuning: {m}");
    }
    counted_tuning_off(&mut case.wrapped, n);
}

/// Prints the tuner's events taken since the last call; how many there
/// were, and how many of them are decisions.
fn tuning_events() -> (usize, usize) {
    let (mut events, mut decisions) = (0, 0);
    for e in collectives::events() {
        events += 1;
        println!("hot_path: tuning event at {:.3} s: {:?}", e.t, e.what);
        if matches!(
            e.what,
            collectives::What::Search(collectives::Event::Decision { .. })
        ) {
            decisions += 1;
        }
    }
    (events, decisions)
}

/// `n` calls of the library's own function (see [`counted`]).
#[inline(never)]
fn counted_direct(f: &mut dyn FnMut(), n: u64) {
    black_box(0);
    for _ in 0..n {
        f();
    }
}

/// `n` calls of the wrapper, collective tuning on (see [`counted`]).
#[inline(never)]
fn counted_tuning_on(f: &mut dyn FnMut(), n: u64) {
    black_box(1);
    for _ in 0..n {
        f();
    }
}

/// `n` calls of the wrapper, collective tuning stopped (see [`counted`]).
#[inline(never)]
fn counted_tuning_off(f: &mut dyn FnMut(), n: u64) {
    black_box(2);
    for _ in 0..n {
        f();
    }
}

/// The `collective` decisions and rechecks (a new search after the time
/// per call drifted) in the run directory's logs, as text, at their time.
fn decisions(run: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(run).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if v["type"] != "collective" {
                continue;
            }
            let what = format!(
                "{} {}",
                v["comm"].as_str().unwrap_or("?"),
                v["collective"].as_str().unwrap_or("?")
            );
            let t = v["t"].as_f64().unwrap_or(f64::NAN);
            if v["event"] == "decision" {
                out.push(format!(
                    "{what} kept {} ({:.3} us per call) at {t:.3} s",
                    v["algorithm"].as_str().unwrap_or("?"),
                    v["time_us"].as_f64().unwrap_or(f64::NAN)
                ));
            } else if v["event"] == "recheck" {
                out.push(format!(
                    "{what} searched again at {t:.3} s: {}",
                    v["message"].as_str().unwrap_or("?")
                ));
            }
        }
    }
    out
}

fn main() {
    // The tuner as an application gets it, logging into a scratch
    // directory, with collective tuning of MPI_Allreduce on.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = dir.path().join("tuning.toml");
    // Counting (`HOT_PATH_COUNT`): windows of `HOT_PATH_WINDOW` calls, not
    // sized by time, which callgrind slows down about 50 times.
    let count = std::env::var("HOT_PATH_COUNT")
        .ok()
        .map(|n| n.parse::<u64>().expect("HOT_PATH_COUNT: a number of calls"));
    let window: u64 = std::env::var("HOT_PATH_WINDOW").map_or(64, |w| {
        w.parse().expect("HOT_PATH_WINDOW: calls per window")
    });
    let tuning = match count {
        Some(_) if TUNING.contains("window = 64\n") => TUNING.replace(
            "window = 64\n",
            &format!("window = {window}\nwindow_time = \"0\"\nmin_window_time = \"0\"\n"),
        ),
        Some(_) => panic!("the bench's policy sets no `window = 64` to replace"),
        None => TUNING.to_string(),
    };
    std::fs::write(&policy, tuning).expect("writing the policy file");
    std::env::set_var("MPIT_TUNER_DIR", dir.path().join("run"));
    std::env::set_var("MPIT_TUNER_QUIET", "1");
    std::env::set_var("MPIT_TUNER_POLICY", &policy);
    // `HOT_PATH_COLLECTIVES=safe`: the mode the tuner runs in (default:
    // `allreduce`, mode `all`).
    let mode = std::env::var("HOT_PATH_COLLECTIVES").unwrap_or_else(|_| "allreduce".into());
    std::env::set_var("MPIT_TUNER_COLLECTIVES", &mode);
    // SAFETY: MPI_Init with no arguments, once, before any other MPI call.
    ok(unsafe { MPI_Init(std::ptr::null_mut(), std::ptr::null_mut()) });
    let k = Consts::read();
    if let Some(n) = count {
        let name = std::env::var("HOT_PATH_CASE").unwrap_or_else(|_| TUNED_CASES[1].into());
        counted(k, n, &name, window);
        // SAFETY: every MPI object this bench created is freed; once.
        ok(unsafe { MPI_Finalize() });
        let run = dir.path().join("run");
        for d in decisions(&run) {
            println!("hot_path: collective tuning decided: {d}");
        }
        return;
    }

    let mut c = Criterion::default().configure_from_args();
    let tuned = tuned_allreduces(&mut c, k, &mode);
    // Today's wrapper from here on: tuning off (the default written back).
    for m in collectives::stop() {
        println!("hot_path: stopping collective tuning: {m}");
    }
    let mut untuned = Vec::new();
    for mut case in cases(k) {
        let wrapped: Vec<&str> = case
            .symbols
            .iter()
            .filter(|(name, address)| is_wrapped(name, *address))
            .map(|(name, _)| *name)
            .collect();
        let status = if wrapped.len() == case.symbols.len() {
            "wrapped".to_string()
        } else if wrapped.is_empty() {
            "not wrapped (compares the library with itself)".to_string()
        } else {
            format!("partly wrapped ({})", wrapped.join(", "))
        };
        let mut group = c.benchmark_group(format!("hot_path/{}", case.name));
        group.bench_function("wrapped", |b| b.iter(&mut case.wrapped));
        group.bench_function("direct", |b| b.iter(&mut case.direct));
        group.finish();
        // The counters' mode follows the thread level MPI_Init provided
        // (MPI_THREAD_SINGLE here: load and store, which the criterion
        // group above measured); an MPI_THREAD_MULTIPLE application gets
        // atomic read-modify-writes instead: both are compared here.
        let process_mode = toolmetrics::concurrent_callers();
        for concurrent in [false, true] {
            toolmetrics::set_concurrent_callers(concurrent);
            let p = paired::compare(100, 2_000, &mut case.wrapped, &mut case.direct);
            let added = p.a.as_secs_f64() - p.b.as_secs_f64();
            let mode = if concurrent {
                "counters for MPI_THREAD_MULTIPLE (atomic read-modify-write)"
            } else {
                "counters below MPI_THREAD_MULTIPLE (load and store)"
            };
            println!(
                "hot_path: {}: {status}, {mode}: wrapped/direct {p}; added {:+.1} ns per iteration",
                case.name,
                added * 1e9
            );
            // Tuning on was measured in the process's own mode: compare
            // with the same mode's row.
            if TUNED_CASES.contains(&case.name) && concurrent == process_mode {
                untuned.push((case.name, added));
            }
        }
        toolmetrics::set_concurrent_callers(process_mode);
    }
    c.final_summary();
    for (name, on) in &tuned {
        if let Some((_, off)) = untuned.iter().find(|(n, _)| n == name) {
            println!(
                "hot_path: {name}: collective tuning on ({mode}, steady state) adds {:+.1} ns \
                 per call over today's wrapper with tuning off (target: within 5 ns)",
                (on - off) * 1e9
            );
        }
    }
    // SAFETY: every MPI object this bench created is freed; once.
    ok(unsafe { MPI_Finalize() });
    let run = dir.path().join("run");
    let logs = std::fs::read_dir(&run).map_or(0, |d| d.count());
    println!("hot_path: the tuner ran and wrote {logs} files in its run directory");
    for d in decisions(&run) {
        println!("hot_path: collective tuning decided: {d}");
    }
}
