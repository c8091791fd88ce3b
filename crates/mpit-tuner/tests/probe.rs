//! `mpit-tuner probe` on the build's library, on 2 ranks: the facts the
//! README's support matrix is made of are measured and consistent, and
//! `--matrix` prints them as the table's row.

mod common;

use common::*;
use mpit_testkit::{mpiexec, run};

#[test]
fn probe_measures_the_library_and_prints_its_row() {
    let mut cmd = mpiexec(2, BIN);
    cmd.args(["probe", "--json"]);
    let job = run(cmd);
    job.assert_success();
    let out = job.stdout();
    // Rank 0 alone prints: exactly one object.
    let start = out
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in:\n{out}"));
    let facts: serde_json::Value = serde_json::from_str(out[start..].trim())
        .unwrap_or_else(|e| panic!("{e}: not one JSON object:\n{out}"));
    assert_eq!(facts["ranks"], 2, "{facts}");
    let library = facts["library"].as_str().unwrap();
    let header = mpit_sys::BUILD_HEADER_LIBRARY;
    assert!(library.starts_with(header), "{library}");
    assert_eq!(facts["abi"], mpit_sys::BUILD_ABI);
    let count = |k: &str| facts[k].as_u64().unwrap();
    let pair = |k: &str| (facts[k][0].as_u64().unwrap(), facts[k][1].as_u64().unwrap());
    assert!(count("cvars_before_init") > 100, "{facts}");
    assert!(
        count("cvars_after_init") >= count("cvars_before_init"),
        "{facts}"
    );
    for k in ["sampled", "bound", "pre_init_writes", "runtime_writes"] {
        let (ok, tried) = pair(k);
        assert!(ok <= tried, "{k}: {facts}");
    }
    // Both families accept some writes before and after MPI_Init, and read
    // a setting made in the environment before start.
    assert!(pair("pre_init_writes").0 > 0, "{facts}");
    assert!(pair("runtime_writes").0 > 0, "{facts}");
    assert_eq!(facts["env_setting_works"], true, "{facts}");
    match header {
        "openmpi" => {
            // The pml_ob1 queues, bound to communicators, are read on world.
            assert!(count("pvars") > 0 && pair("bound").0 >= 2, "{facts}");
            assert_eq!(facts["collective_tuning"], "next communicator");
        }
        "mvapich2" => {
            // Its mv2_* PVARs are read; its algorithms are chosen at start.
            assert!(count("pvars") > 0 && pair("sampled").0 > 0, "{facts}");
            assert_eq!(facts["collective_tuning"], "start only");
        }
        _ => {
            assert_eq!(count("pvars"), 0, "{facts}");
            assert_eq!(facts["collective_tuning"], "next call");
        }
    }

    // The table row of that file.
    let tmp = tempdir();
    let file = tmp.path().join("facts.json");
    std::fs::write(&file, &out[start..]).unwrap();
    let table = mpit_tuner(&["probe", "--matrix", file.to_str().unwrap()]);
    assert_eq!(code(&table), Some(0), "{}", printed(&table));
    let text = table.stdout();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.lines()
            .nth(2)
            .unwrap()
            .starts_with(&format!("| {library} (")),
        "{text}"
    );
}

/// Open MPI registers control variables per network interface
/// after `MPI_Init`, so a machine with a bridge and veth pairs up counts
/// more variables than one without. The support matrix check must pass on
/// both: the probe runs once on the host and once in a network namespace
/// of the test's own with a bridge and a veth pair up, and the second's
/// facts are checked against the first's table.
#[test]
fn support_matrix_check_passes_with_an_extra_network_interface() {
    const TEST: &str = "support_matrix_check_passes_with_an_extra_network_interface";
    let ns = match mpit_testkit::netns::NetNs::create_for_process("mpit-probe") {
        Ok(ns) => ns,
        Err(why) => {
            mpit_testkit::not_applicable(TEST, &why);
            return;
        }
    };
    // Addresses inside the namespace only: nothing leaves it.
    ns.add_bridge_with_veth("mpitbr0", "10.213.77.1/24", "mpitv0", "10.213.77.2/24")
        .unwrap_or_else(|e| panic!("{e}"));
    let links = ns.links();
    assert!(
        ["lo", "mpitbr0", "mpitv0", "mpitv0p"]
            .iter()
            .all(|l| links.iter().any(|have| have == l)),
        "{links:?}"
    );

    let tmp = tempdir();
    let probe = |inside: Option<&mpit_testkit::netns::NetNs>, file: &str| {
        let mut cmd = mpiexec(2, BIN);
        cmd.args(["probe", "--json"]);
        let job = run(match inside {
            Some(ns) => ns.wrap(&cmd),
            None => cmd,
        });
        job.assert_success();
        let out = job.stdout();
        let start = out
            .find('{')
            .unwrap_or_else(|| panic!("no JSON in:\n{out}"));
        let path = tmp.path().join(file);
        std::fs::write(&path, &out[start..]).unwrap();
        path
    };
    let host = probe(None, "host.json");
    let bridged = probe(Some(&ns), "bridged.json");

    let table = mpit_tuner(&["probe", "--matrix", host.to_str().unwrap()]);
    assert_eq!(code(&table), Some(0), "{}", printed(&table));
    let table_file = tmp.path().join("table.md");
    // The bridged facts checked against a documented table.
    let check_against = |documented: &str| {
        std::fs::write(&table_file, documented).unwrap();
        mpit_tuner(&[
            "probe",
            "--matrix",
            bridged.to_str().unwrap(),
            "--check",
            table_file.to_str().unwrap(),
        ])
    };
    let check = check_against(&table.stdout());
    assert_eq!(code(&check), Some(0), "{}", printed(&check));
    // What differed, if anything, is a note (which counts differ depends
    // on the library and the machine, so it is shown, not asserted).
    eprintln!("{}", check.stderr());

    // The check still fails on a fact of the library: the same table with
    // another collective tuning verdict.
    let facts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&bridged).unwrap()).unwrap();
    let verdict = facts["collective_tuning"].as_str().unwrap().to_string();
    let other = if verdict == "start only" {
        "next call"
    } else {
        "start only"
    };
    let wrong = table
        .stdout()
        .replace(&format!("| {verdict} |"), &format!("| {other} |"));
    assert_ne!(wrong, table.stdout());
    let check = check_against(&wrong);
    assert_eq!(code(&check), Some(1), "{}", printed(&check));
    assert!(
        check
            .stderr()
            .contains(&format!("collective tuning: documented `{other}`")),
        "{}",
        printed(&check)
    );
}
