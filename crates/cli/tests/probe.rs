//! `mpit-tuner probe` on the build's library, on 2 ranks: the facts the
//! README's support matrix is made of are measured and consistent, and
//! `--matrix` prints them as the table's row.

mod common;

use common::*;
use mpit_testkit::{flavor, mpiexec, run};

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
    assert!(library.starts_with(flavor()), "{library}");
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
    if flavor() == "openmpi" {
        // The pml_ob1 queues, bound to communicators, are read on world.
        assert!(count("pvars") > 0 && pair("bound").0 >= 2, "{facts}");
        assert_eq!(facts["collective_tuning"], "next communicator");
    } else {
        assert_eq!(count("pvars"), 0, "{facts}");
        assert_eq!(facts["collective_tuning"], "next call");
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
