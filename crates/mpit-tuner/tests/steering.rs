//! Steering and watching a running job: `mpit-tuner set`, `pause`,
//! `resume`, `reload` and `watch` against real jobs of `examples/c/steady`
//! (which runs until a stop file appears), and request files the ranks must
//! refuse or ignore. The full-screen `watch` is driven in a private tmux
//! server (skipped, with the reason printed, without tmux).
//!
//! Every wait is on a condition in the logs, with a generous deadline.

mod common;

use common::command;
use common::steering::*;
use serde_json::Value as Json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[test]
fn set_changes_a_local_cvar_on_the_selected_ranks_only() {
    let Library { local, value, .. } = library();
    // A watch of the variable: fires `then` when it holds `value`, with the
    // value it read in `inputs`; ranks keep their default elsewhere.
    let policy = format!(
        "[[policy]]\nname = \"watch\"\nevery = \"50ms\"\nwhen = \"cvar:{local} == {value}\"\n\
         then = [ {{ note = \"changed\" }} ]\notherwise = [ {{ note = \"default\" }} ]\n"
    );
    let mut job = Running::start(3, Some(&policy));
    let out = job.steer("set", &[&format!("{local}={value}"), "--ranks", "0,2"]);
    assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ranks 0,2 (") && stdout.contains("applied"),
        "{stdout}"
    );
    assert!(
        stdout.contains("rank 1 (") && stdout.contains("not for this rank"),
        "{stdout}"
    );
    let id = request_id(&out);
    // Every rank answered: the command removed its request file.
    let left: Vec<_> = std::fs::read_dir(job.dir.join("control"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "request files left: {left:?}");
    let logs = job.wait_for("the watch seeing the new value on ranks 0 and 2", |logs| {
        [0, 2].iter().all(|&r| {
            firings(&logs[r], "watch").any(|d| {
                d["branch"] == "then" && d["inputs"][local][0].as_f64() == Some(value as f64)
            })
        })
    });
    for rank in [0, 2] {
        let a = answer(&logs[rank], &id).expect("an answer");
        assert_eq!(a["outcome"], "applied", "{a}");
        assert_eq!(a["write"]["readback"][0], value, "{a}");
        assert_eq!(a["write"]["outcome"], "written", "{a}");
    }
    let a = answer(&logs[1], &id).expect("an answer");
    assert_eq!(a["outcome"], "not_for_this_rank", "{a}");
    // Rank 1 kept its value: the watch never saw `value` there.
    let watched: Vec<f64> = firings(&logs[1], "watch")
        .map(|d| d["inputs"][local][0].as_f64().unwrap())
        .collect();
    assert!(
        !watched.is_empty() && watched.iter().all(|v| *v != value as f64),
        "{watched:?}"
    );
    assert!(job.stop_child().is_some_and(|s| s.success()));
    // One rank of the node listed the control directory; the others
    // learnt of the request from node-local memory.
    let expected = if node_dir_usable() { 1 } else { 3 };
    assert_eq!(listers(&job.logs()).len(), expected);
    // The report lists the user's write apart from the policies' (phase
    // `steering`), on the ranks that took it.
    let dir = job.dir.display().to_string();
    let report = command(&["report", &dir]).output().unwrap();
    assert_eq!(report.status.code(), Some(0), "{}", printed(&report));
    let text = String::from_utf8_lossy(&report.stdout);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(&format!("user request {id}")) && l.contains("steering"))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(job.dir.join("report/cvar-changes.svg").is_file());
}

/// Where the node-local directory cannot be used
/// (`MPIT_TUNER_NODE_DIR` names none), every rank says so in its log and
/// lists the control directory itself: requests are answered as before.
/// With `off`, every rank lists, and nothing is said.
#[test]
fn without_a_node_local_directory_every_rank_lists_and_steering_works() {
    for (setting, warned) in [("/nonexistent/mpit-node", true), ("off", false)] {
        let mut job =
            Running::start_with(2, Some(TICK_TOCK), &[], &[("MPIT_TUNER_NODE_DIR", setting)]);
        let out = job.steer("pause", &[]);
        assert_eq!(out.status.code(), Some(0), "{setting}: {}", printed(&out));
        let id = request_id(&out);
        assert!(job.stop_child().is_some_and(|s| s.success()));
        let logs = job.logs();
        for (rank, log) in logs.iter().enumerate() {
            assert!(
                answer(log, &id).is_some(),
                "{setting}: rank {rank} did not answer"
            );
            let said = log.iter().any(|r| {
                r["type"] == "warning"
                    && r["message"].as_str().is_some_and(|m| {
                        m.contains("MPIT_TUNER_NODE_DIR")
                            && m.contains("/nonexistent/mpit-node")
                            && m.contains("this rank lists")
                    })
            });
            assert_eq!(said, warned, "{setting}: rank {rank}'s warnings");
        }
        assert_eq!(listers(&logs), [0, 1], "{setting}");
    }
}

#[test]
fn a_write_no_rank_may_make_alone_is_refused_with_the_reason() {
    let Library {
        local,
        forbidden,
        forbidden_value,
        why,
        ..
    } = library();
    let job = Running::start(2, None);
    let out = job.steer("set", &[&format!("{forbidden}={forbidden_value}")]);
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ranks 0-1") && stdout.contains("refused") && stdout.contains(why),
        "{stdout}"
    );
    let id = request_id(&out);
    let logs = job.logs();
    for log in &logs {
        let a = answer(log, &id).expect("an answer");
        assert_eq!(a["outcome"], "refused", "{a}");
        let message = a["message"].as_str().unwrap();
        assert!(message.contains(why), "{a}");
        // An ALL_EQ variable of MPICH that collective tuning (on by
        // default) does not drive: the reason says what can change while
        // the job runs, and how to set this one.
        if cfg!(mpi_flavor = "mpich") {
            for said in [
                "only collective algorithm variables can be changed while the job runs",
                "unless MPIT_TUNER_COLLECTIVES=off",
                "is not one: set it before the job starts",
            ] {
                assert!(message.contains(said), "no {said:?} in {a}");
            }
        }
    }
    // A value of the wrong type is refused too, and the job goes on.
    let out = job.steer("set", &[&format!("{local}=1.5")]);
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("takes integers"),
        "{}",
        printed(&out)
    );
    job.finish();
}

/// The `collective` records of a log with `event`, for request `id`.
fn collective_events<'a>(log: &'a [Json], event: &'a str, id: &'a str) -> Vec<&'a Json> {
    log.iter()
        .filter(|r| r["type"] == "collective" && r["event"] == event && r["request"] == id)
        .collect()
}

/// A job that tunes its allreduce online (windows of one call, so its
/// first search ends within a second of `steady`'s loop) gets a user's
/// algorithm: refused when narrowed to some ranks or not a candidate,
/// then taken, and pinned by every rank at the same call; the search
/// stops and the user's algorithm is what runs from then on. The report
/// and summary.json show it as the user's pin.
#[test]
fn a_collective_algorithm_set_while_tuning_is_pinned_on_every_rank_at_one_call() {
    let Library { algorithm, .. } = library();
    if !cfg!(mpi_library = "mpich") {
        mpit_testkit::not_applicable(
            "a_collective_algorithm_set_while_tuning_is_pinned_on_every_rank_at_one_call",
            "online collective tuning runs on MPICH only (a written algorithm reaches only \
             communicators created later on Open MPI, and none at all on MVAPICH2 2.3.7); the \
             refusal there is tested by collective_algorithms_are_refused_where_online_tuning_is_off",
        );
        return;
    }
    let mut job = Running::start_with(
        3,
        None,
        &["--tune-collectives=allreduce"],
        &[("MPIT_TUNER_COLLECTIVES_WINDOW", "1")],
    );
    let decided = |r: &Json| {
        r["type"] == "collective" && r["event"] == "decision" && r["collective"] == "allreduce"
    };
    let logs = job.wait_for("every rank's first allreduce decision", |logs| {
        logs.iter().all(|l| l.iter().any(decided))
    });
    // Another algorithm than the search kept: the pin overrides it.
    let kept = logs[0].iter().rfind(|r| decided(r)).unwrap()["algorithm"].clone();
    let pinned = if kept == "recursive_doubling" {
        "reduce_scatter_allgather"
    } else {
        "recursive_doubling"
    };

    // For every rank or none: narrowed, it is refused on every rank.
    let out = job.steer("set", &[&format!("{algorithm}={pinned}"), "--ranks", "0"]);
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ranks 0-2 (")
            && stdout.contains("refused")
            && stdout.contains("ALL_EQ: every rank must take the same value"),
        "{stdout}"
    );
    let narrowed = request_id(&out);
    // Not one of the algorithms tuned: refused, naming them.
    let out = job.steer("set", &[&format!("{algorithm}=no_such_algorithm")]);
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("`no_such_algorithm` is not one of the algorithms tuned for allreduce")
            && stdout.contains(pinned),
        "{stdout}"
    );
    let unknown = request_id(&out);

    let out = job.steer("set", &[&format!("{algorithm}={pinned}")]);
    assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ranks 0-2 (") && stdout.contains("applied at the next agreed point"),
        "{stdout}"
    );
    let id = request_id(&out);
    let logs = job.wait_for("every rank pinning, then running the pin", |logs| {
        logs.iter().all(|l| {
            !collective_events(l, "pinned", &id).is_empty()
                && !collective_events(l, "held", &id).is_empty()
        })
    });
    let mut points = Vec::new();
    for (rank, log) in logs.iter().enumerate() {
        for refused in [&narrowed, &unknown] {
            let a = answer(log, refused).expect("an answer");
            assert_eq!(a["outcome"], "refused", "rank {rank}: {a}");
        }
        let a = answer(log, &id).expect("an answer");
        assert_eq!(a["outcome"], "applied", "rank {rank}: {a}");
        assert!(
            a["message"].as_str().unwrap().contains(pinned),
            "rank {rank}: {a}"
        );
        // The pin: where (communicator, size bin, calls before it) and what.
        let pins = collective_events(log, "pinned", &id);
        let at: Vec<(String, String, u64)> = pins
            .iter()
            .map(|p| {
                assert_eq!(p["algorithm"], pinned, "rank {rank}: {p}");
                assert_eq!(p["collective"], "allreduce", "rank {rank}: {p}");
                (
                    p["comm"].as_str().unwrap().to_string(),
                    p["bin"].to_string(),
                    p["calls"].as_u64().unwrap(),
                )
            })
            .collect();
        points.push(at);
        // After the pin, no search on that communicator's allreduce, and
        // what ran was the pinned algorithm, every call.
        let from = log
            .iter()
            .position(|r| r["type"] == "collective" && r["event"] == "pinned" && r["request"] == id)
            .unwrap();
        let comm = pins[0]["comm"].clone();
        for r in &log[from..] {
            if r["type"] == "collective" && r["comm"] == comm && r["collective"] == "allreduce" {
                assert!(
                    ["pinned", "held"].contains(&r["event"].as_str().unwrap()),
                    "rank {rank}: a search after the pin: {r}"
                );
            }
        }
        let held = collective_events(log, "held", &id);
        assert_eq!(held[0]["algorithm"], pinned, "rank {rank}: {}", held[0]);
        assert_eq!(held[0]["value"], pins[0]["value"], "rank {rank}");
        assert!(held[0]["calls"].as_u64().unwrap() > 0, "{}", held[0]);
    }
    // The same agreed point on every rank: the same call of the same
    // communicator and size bin.
    assert!(!points[0].is_empty());
    assert!(points.iter().all(|p| *p == points[0]), "{points:?}");

    // Stopped, with its run directory kept until the end of the test.
    assert!(job.stop_child().is_some_and(|s| s.success()));
    let dir = job.dir.clone();
    // summary.json: the outcome shows the user's pin, apart from what the
    // search kept.
    let summary: Json =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let outcomes = summary["collectives"].as_array().expect("collectives");
    assert!(
        outcomes.iter().any(|o| o["collective"] == "allreduce"
            && o["pinned"] == pinned
            && o["pinned_by"] == id.as_str()
            && o["searches"].as_u64().unwrap() >= 1),
        "{outcomes:?}"
    );
    let dir = dir.display().to_string();
    let report = command(&["report", &dir]).output().unwrap();
    assert_eq!(report.status.code(), Some(0), "{}", printed(&report));
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("Pinned by a user's request"), "{text}");
    assert!(
        text.lines().any(|l| l.contains(&id) && l.contains(pinned)),
        "{text}"
    );
}

/// Where online collective tuning does not tune the collective (tuning
/// bcast only), a `set` of the allreduce's algorithm is refused with what
/// is missing, and the job goes on.
#[test]
fn collective_algorithms_are_refused_where_online_tuning_is_off() {
    let Library {
        algorithm, pinned, ..
    } = library();
    let job = Running::start_with(2, None, &["--tune-collectives=bcast"], &[]);
    let out = job.steer("set", &[&format!("{algorithm}={pinned}")]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if stdout.contains("exports no CVAR named") {
        mpit_testkit::not_applicable(
            "collective_algorithms_are_refused_where_online_tuning_is_off",
            &format!("this library does not export {algorithm} (is coll/tuned loaded?): {stdout}"),
        );
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    let missing = if cfg!(mpi_library = "mvapich2") {
        // Off whatever was asked: MVAPICH2 reads its algorithms at start.
        "online collective tuning is off in this job: MVAPICH2 2.3.7 accepts a write of \
         MPIR_CVAR_<COLL>_COLLECTIVE_ALGORITHM after MPI_Init and keeps the algorithm chosen at start"
    } else if cfg!(mpi_flavor = "mpich") {
        "online collective tuning runs but does not tune allreduce here (it tunes MPIR_CVAR_BCAST_INTRA_ALGORITHM"
    } else {
        "online collective tuning runs but does not tune allreduce here (it tunes coll_tuned_bcast_algorithm"
    };
    assert!(
        stdout.contains("ranks 0-1 (")
            && stdout.contains("refused")
            && stdout
                .contains("only collective algorithm variables can be changed while the job runs")
            && stdout.contains(missing),
        "{stdout}"
    );
    let id = request_id(&out);
    for log in job.logs() {
        assert_eq!(answer(&log, &id).expect("an answer")["outcome"], "refused");
        assert!(log.iter().all(|r| r["event"] != "pinned"));
    }
    job.finish();
}

/// Fires every 50 ms, alternating branches every 200 ms: its decisions
/// show that it runs.
const TICK_TOCK: &str = "[[policy]]\nname = \"tick-tock\"\nevery = \"50ms\"\n\
    when = \"floor(time * 5) % 2 == 0\"\nthen = [ { note = \"tick\" } ]\n\
    otherwise = [ { note = \"tock\" } ]\n";

#[test]
fn a_policy_reloaded_mid_run_replaces_the_old_one() {
    let job = Running::start(2, Some(TICK_TOCK));
    job.wait_for("tick-tock deciding", |logs| {
        logs.iter().all(|l| firings(l, "tick-tock").count() >= 2)
    });
    let file = job._tmp.path().join("new.toml");
    std::fs::write(
        &file,
        "[[policy]]\nname = \"after-reload\"\nwhen = \"time >= 0\"\nthen = [ { note = \"reloaded\" } ]\n",
    )
    .unwrap();
    let out = job.steer("reload", &[file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("new.toml loaded: 1 policies run"),
        "{}",
        printed(&out)
    );
    let id = request_id(&out);
    let logs = job.wait_for("the new policy's first decision", |logs| {
        logs.iter()
            .all(|l| firings(l, "after-reload").next().is_some())
    });
    for log in &logs {
        let at = answer(log, &id).expect("an answer")["t"].as_f64().unwrap();
        let first = firings(log, "after-reload").next().unwrap()["t"]
            .as_f64()
            .unwrap();
        assert!(first >= at, "decided at {first} before the reload at {at}");
        // The old policy decides no more.
        assert!(firings(log, "tick-tock").all(|d| d["t"].as_f64().unwrap() <= at));
        // Its totals until the reload are logged then, for the report.
        let summary = log
            .iter()
            .find(|r| r["type"] == "policy_summary" && r["policy"] == "tick-tock")
            .expect("tick-tock's totals at the reload");
        assert_eq!(
            summary["firings"].as_u64(),
            Some(firings(log, "tick-tock").count() as u64),
            "{summary}"
        );
    }
    job.finish();
}

#[test]
fn a_broken_policy_changes_nothing_and_pause_resume_work() {
    let job = Running::start(2, Some(TICK_TOCK));
    let file = job._tmp.path().join("broken.toml");
    std::fs::write(
        &file,
        "[[policy]]\nname = \"bad\"\nwhen = \"time >\"\nthen = [ { note = \"x\" } ]\n",
    )
    .unwrap();
    let out = job.steer("reload", &[file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ranks 0-1") && stdout.contains("broken.toml:3:"),
        "{stdout}"
    );
    let id = request_id(&out);
    let at: Vec<f64> = job
        .logs()
        .iter()
        .map(|l| answer(l, &id).expect("an answer")["t"].as_f64().unwrap())
        .collect();
    // The old policy still decides after the refusal.
    job.wait_for("tick-tock deciding after the refused reload", |logs| {
        logs.iter().zip(&at).all(|(l, at)| {
            firings(l, "tick-tock")
                .filter(|d| d["t"].as_f64().unwrap() > *at)
                .count()
                >= 2
        })
    });
    // Paused, it decides no more; resumed, it decides again.
    let out = job.steer("pause", &["tick-tock"]);
    assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("paused tick-tock"));
    let paused = request_id(&out);
    std::thread::sleep(Duration::from_millis(600));
    let out = job.steer("resume", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
    let resumed = request_id(&out);
    let logs = job.wait_for("tick-tock deciding after resume", |logs| {
        logs.iter().all(|l| {
            answer(l, &resumed).is_some_and(|a| {
                let at = a["t"].as_f64().unwrap();
                firings(l, "tick-tock").any(|d| d["t"].as_f64().unwrap() > at)
            })
        })
    });
    for log in &logs {
        let from = answer(log, &paused).unwrap()["t"].as_f64().unwrap();
        let to = answer(log, &resumed).unwrap()["t"].as_f64().unwrap();
        assert!(
            firings(log, "tick-tock").all(|d| {
                let t = d["t"].as_f64().unwrap();
                t <= from || t > to
            }),
            "a paused policy decided"
        );
    }
    // An unknown policy is refused, naming the ones that run.
    let out = job.steer("pause", &["nope"]);
    assert_eq!(out.status.code(), Some(1), "{}", printed(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("policies: tick-tock"));
    job.finish();
}

#[test]
fn requests_that_are_not_the_owners_or_not_requests_never_act() {
    let Library { local, value, .. } = library();
    let job = Running::start(2, None);
    let control = job.dir.join("control");
    std::fs::create_dir_all(&control).unwrap();
    let request =
        |id: &str| format!(r#"{{"id":"{id}","kind":"set","cvar":"{local}","value":"{value}"}}"#);
    // Each file is made under a temporary name and renamed into place,
    // as the command does: the ranks see it only as it is meant to be.
    let place = |name: &str, text: &str, mode: u32, owner: Option<&str>| {
        let tmp = control.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).unwrap();
        if let Some(owner) = owner {
            let status = Command::new("chown")
                .args([owner, tmp.to_str().unwrap()])
                .status()
                .unwrap();
            assert!(status.success());
        }
        std::fs::rename(&tmp, control.join(name)).unwrap();
    };
    // Writable by others: ignored.
    place("loose.json", &request("loose"), 0o666, None);
    // Another user's (only root can give a file away).
    let root = std::fs::metadata(job._tmp.path())
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    if root {
        place("other.json", &request("other"), 0o600, Some("65534"));
    } else {
        eprintln!("not root: the request of another user is not tried");
    }
    // Cut short, and not JSON at all: answered with an error.
    place("cut.json", &request("cut")[..30], 0o600, None);
    place("junk.json", "\u{0}\u{1}zz", 0o600, None);
    let logs = job.wait_for("the ranks' verdicts on every file", |logs| {
        logs.iter().all(|l| {
            let warned = |name: &str| {
                l.iter().any(|r| {
                    r["type"] == "warning" && r["message"].as_str().unwrap_or("").contains(name)
                })
            };
            warned("loose.json")
                && (!root || warned("other.json"))
                && answer(l, "cut").is_some()
                && answer(l, "junk").is_some()
        })
    });
    for log in &logs {
        for id in ["loose", "other"] {
            assert!(answer(log, id).is_none(), "{id} was answered");
        }
        let warning = |name: &str| {
            log.iter()
                .find(|r| r["type"] == "warning" && r["message"].as_str().unwrap().contains(name))
                .map(|r| r["message"].as_str().unwrap().to_string())
        };
        assert!(warning("loose.json").unwrap().contains("mode 666"));
        if root {
            assert!(warning("other.json").unwrap().contains("uid 65534"));
        }
        for id in ["cut", "junk"] {
            let a = answer(log, id).unwrap();
            assert_eq!(a["outcome"], "error", "{a}");
            assert!(a["message"]
                .as_str()
                .unwrap()
                .contains("not a steering request"));
        }
    }
    // Nothing was written: a later request reads the default back as old.
    let out = job.steer("set", &[&format!("{local}={value}")]);
    assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
    let id = request_id(&out);
    for log in job.logs() {
        let a = answer(&log, &id).unwrap();
        assert_ne!(a["write"]["old"][0], value, "{a}");
    }
    let printed_job = job.finish();
    assert!(printed_job.contains("steady:"), "{printed_job}");
}

#[test]
fn watch_shows_a_running_job_and_ends_with_it() {
    let Library { local, value, .. } = library();
    let mut job = Running::start(2, Some(TICK_TOCK));
    job.wait_for("tick-tock deciding", |logs| {
        logs.iter().all(|l| firings(l, "tick-tock").count() >= 1)
    });
    let out = job.steer("set", &[&format!("{local}={value}"), "--ranks", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
    let dir = job.dir.display().to_string();
    // All the variables: which ones differ most across ranks depends on
    // the load of the machine.
    let once = command(&["watch", &dir, "--once", "--plain", "--top", "40"])
        .output()
        .unwrap();
    assert_eq!(once.status.code(), Some(0), "{}", printed(&once));
    let frame = String::from_utf8_lossy(&once.stdout);
    for row in [
        "2 ranks on 1 host",
        "ranks: 2 alive, 0 finished, 0 not started",
        "variables (largest spread across ranks now):",
        "tool.mpi.time",
        "tick-tock fired",
        &format!("set {local}={value} on ranks 1: applied"),
        "set",
    ] {
        assert!(frame.contains(row), "no {row:?} in:\n{frame}");
    }
    assert!(!frame.contains("job finished"), "{frame}");
    // Followed until the job ends: it stops by itself.
    let mut follow = command(&["watch", &dir, "--plain", "--every", "200ms"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = follow.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    std::thread::sleep(Duration::from_millis(500));
    // Stopped, with its run directory kept until the end of the test.
    assert!(job.stop_child().is_some_and(|s| s.success()));
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = follow.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = follow.kill();
            panic!("watch did not end with the job");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success());
    let text = reader.join().unwrap();
    let last = text.rsplit("== mpit-tuner watch").next().unwrap();
    assert!(
        last.contains("ranks: 0 alive, 2 finished") && last.contains("job finished"),
        "{last}"
    );
    assert!(text.matches("== mpit-tuner watch").count() >= 2, "{text}");
}

/// A private tmux server (its own socket, no configuration), killed when
/// dropped.
struct Tmux {
    socket: String,
}

/// What a pane's shell prints after `mpit-tuner watch` exits.
const EXITED: &str = "watch exited with status";

impl Tmux {
    /// A server for this test, or `None` (with the reason printed) when
    /// tmux is not installed.
    fn new() -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            eprintln!("skipped: tmux is not installed (scripts/setup.sh installs it)");
            return None;
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Some(Tmux {
            socket: format!("mpit-tuner-test-{}-{nanos}", std::process::id()),
        })
    }

    /// `tmux ARGS` on this server, as it ran.
    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("tmux");
        cmd.args(["-f", "/dev/null", "-L", &self.socket])
            .args(args)
            .stdin(Stdio::null());
        common::clean_env(&mut cmd);
        cmd.env("TERM", "xterm-256color");
        cmd.output().expect("tmux runs")
    }

    /// Starts `mpit-tuner watch DIR` in a detached 120x40 session; when it
    /// exits, the shell prints its status and keeps the pane open (for the
    /// capture) until the session is killed.
    fn watch(&self, session: &str, dir: &Path) {
        let shell = format!(
            "'{}' watch '{}'; echo \"{EXITED} $?\"; sleep 600",
            common::BIN,
            dir.display()
        );
        let out = self.run(&[
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            "-s",
            session,
            &shell,
        ]);
        assert!(out.status.success(), "{out:?}");
    }

    /// What the session's pane shows now.
    fn capture(&self, session: &str) -> String {
        let out = self.run(&["capture-pane", "-p", "-t", session]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Whether the pane is on its alternate screen: "1" or "0".
    fn alternate_on(&self, session: &str) -> String {
        let out = self.run(&["display-message", "-p", "-t", session, "#{alternate_on}"]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits until the pane shows every one of `texts`; the capture.
    fn wait_for_screen(&self, session: &str, texts: &[&str]) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.capture(session);
            if texts.iter().all(|t| screen.contains(t)) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for {texts:?}; the pane shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Kills a session and checks it is gone.
    fn end(&self, session: &str) {
        let out = self.run(&["kill-session", "-t", session]);
        assert!(out.status.success(), "{out:?}");
        assert!(!self.run(&["has-session", "-t", session]).status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

#[test]
fn watch_on_a_terminal_is_full_screen_and_quits_on_q_or_with_the_job() {
    let Some(tmux) = Tmux::new() else {
        return;
    };
    let mut job = Running::start(2, Some(TICK_TOCK));
    tmux.watch("quit", &job.dir);
    let screen = tmux.wait_for_screen(
        "quit",
        &[
            "ranks: 2 alive, 0 finished, 0 not started",
            "│tool.",
            "tick-tock fired",
        ],
    );
    // A row of the table: a variable (which ones come first depends on the
    // load), its lowest and highest values with their ranks, a sparkline.
    assert!(
        screen.lines().any(|l| l.starts_with("│tool.")
            && l.matches(" @").count() == 2
            && l.chars().any(|c| ('▁'..='█').contains(&c))),
        "no table row in:\n{screen}"
    );
    for text in [
        "mpit-tuner watch (q: quit)",
        "2 ranks on 1 host",
        "variables (largest spread across ranks now)",
        "recent means",
        "latest decisions, writes, refusals, steering",
        "warnings",
    ] {
        assert!(screen.contains(text), "no {text:?} in:\n{screen}");
    }
    assert_eq!(tmux.alternate_on("quit"), "1", "{screen}");
    // `q` quits: exit status 0, the alternate screen left, nothing printed.
    let out = tmux.run(&["send-keys", "-t", "quit", "q"]);
    assert!(out.status.success(), "{out:?}");
    let screen = tmux.wait_for_screen("quit", &[EXITED]);
    assert!(screen.contains(&format!("{EXITED} 0")), "{screen}");
    assert!(!screen.contains("mpit-tuner watch"), "{screen}");
    assert_eq!(tmux.alternate_on("quit"), "0", "{screen}");
    tmux.end("quit");

    // The job's end ends the view too, leaving its last frame on the screen.
    tmux.watch("end", &job.dir);
    tmux.wait_for_screen("end", &["ranks: 2 alive", "│tool."]);
    // Stopped, with its run directory kept until the end of the test.
    assert!(job.stop_child().is_some_and(|s| s.success()));
    let screen = tmux.wait_for_screen("end", &[EXITED]);
    assert!(screen.contains(&format!("{EXITED} 0")), "{screen}");
    assert_eq!(tmux.alternate_on("end"), "0", "{screen}");
    let head = format!("== mpit-tuner watch {}", job.dir.display());
    for text in [
        head.as_str(),
        "ranks: 0 alive, 2 finished",
        "job finished: every rank closed its log",
    ] {
        assert!(screen.contains(text), "no {text:?} in:\n{screen}");
    }
    tmux.end("end");
}
