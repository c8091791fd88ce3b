//! `mpit-tuner list` as users run it: the built binary, under `mpiexec` or
//! on its own, against the real MPI library of the build. Assertions that
//! hold for one library only are compiled only in builds against it.

use mpit::{Catalogue, MpiProcess, MpiT};
use mpit_testkit::{in_rank, launcher_env, mpiexec, run, run_self_with, timeout, Job};
use serde_json::Value as Json;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_mpit-tuner");

/// Runs `mpit-tuner list ARGS` on `ranks` ranks.
fn list(ranks: u32, args: &[&str]) -> Job {
    let mut cmd = mpiexec(ranks, BIN);
    cmd.arg("list").args(args);
    run(cmd)
}

/// Runs `mpit-tuner ARGS` as a plain process (no launcher), with a timeout.
fn alone(args: &[&str]) -> Job {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "10", &timeout().to_string(), BIN])
        .args(args);
    launcher_env(&mut cmd);
    run(cmd)
}

/// The rows of the table: the lines between the column header and the
/// blank line after the last row.
fn rows(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("NAME "))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

/// The row of the variable `name`.
fn row<'a>(stdout: &'a str, name: &str) -> Option<&'a str> {
    rows(stdout)
        .into_iter()
        .find(|r| r.split_whitespace().next() == Some(name))
}

fn parse_json(job: &Job) -> Json {
    serde_json::from_str(&job.stdout()).unwrap_or_else(|e| {
        panic!(
            "`list --json` printed no valid JSON ({e}):\n{}",
            job.stdout()
        )
    })
}

fn array<'a>(json: &'a Json, key: &str) -> &'a Vec<Json> {
    json[key]
        .as_array()
        .unwrap_or_else(|| panic!("`{key}` is not an array"))
}

/// `list --json` parses, and matches a catalogue loaded the same way in
/// another MPI process: same counts, and every CVAR and PVAR with the same
/// metadata.
#[test]
fn json_matches_the_catalogue() {
    const ENV: &str = "MPIT_CLI_TEST_JSON";
    if in_rank() {
        let path = std::env::var(ENV).expect("the outer test passes the JSON file");
        let json: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mpit = MpiT::init().unwrap();
        let mut catalogue = Catalogue::load(&mpit).unwrap();
        let mpi = MpiProcess::init().unwrap();
        catalogue.refresh(&mpit).unwrap();

        let cvars = array(&json, "cvars");
        let pvars = array(&json, "pvars");
        assert_eq!(cvars.len(), catalogue.cvars().len());
        assert_eq!(pvars.len(), catalogue.pvars().len());
        assert_eq!(
            array(&json, "categories").len(),
            catalogue.categories().len()
        );
        assert_eq!(
            json["totals"]["cvars"].as_u64(),
            Some(catalogue.cvars().len() as u64)
        );
        assert_eq!(
            json["totals"]["skipped"].as_u64(),
            Some(catalogue.skipped().len() as u64)
        );
        for info in catalogue.cvars() {
            let listed = cvars
                .iter()
                .find(|c| c["name"] == info.name.as_str())
                .unwrap_or_else(|| panic!("CVAR {} is not in the JSON", info.name));
            let expected = serde_json::to_value(info).unwrap();
            for (key, value) in expected.as_object().unwrap() {
                assert_eq!(&listed[key], value, "`{key}` of CVAR {}", info.name);
            }
        }
        for info in catalogue.pvars() {
            let listed = pvars
                .iter()
                .find(|p| p["index"] == info.index)
                .unwrap_or_else(|| panic!("PVAR {} is not in the JSON", info.name));
            assert_eq!(listed, &serde_json::to_value(info).unwrap());
        }
        drop(mpi);
        return;
    }

    let job = list(1, &["--json"]);
    job.assert_success();
    let json = parse_json(&job);
    assert!(json["library"].as_str().is_some_and(|l| !l.is_empty()));
    assert!(json["mpi_version"]
        .as_str()
        .is_some_and(|v| v.contains('.')));
    assert_eq!(json["ranks"], 1);
    let cvars = array(&json, "cvars");
    #[cfg(mpi_library = "mpich")]
    {
        assert_eq!(json["library_family"], "mpich");
        assert!(cvars.len() >= 300, "only {} CVARs", cvars.len());
        for c in cvars {
            let scope = c["scope"].as_str().unwrap();
            assert_ne!(scope, "UNKNOWN", "{}", c["name"]);
        }
    }
    #[cfg(mpi_library = "mvapich2")]
    {
        assert_eq!(json["library_family"], "mvapich2");
        let algorithm = cvars
            .iter()
            .find(|c| c["name"] == "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM")
            .expect("MVAPICH2's allreduce algorithm selector is listed");
        assert_ne!(algorithm["scope"], "UNKNOWN");
        assert!(array(&json, "pvars")
            .iter()
            .any(|p| p["name"] == "mv2_smp_eager_total_buffer"));
    }
    #[cfg(mpi_flavor = "openmpi")]
    {
        assert_eq!(json["library_family"], "openmpi");
        let queue = array(&json, "pvars")
            .iter()
            .find(|p| p["name"] == "pml_ob1_unexpected_msgq_length")
            .expect("pml_ob1_unexpected_msgq_length is listed");
        assert_eq!(queue["class"], "SIZE");
        assert_eq!(queue["binding"], "COMM");
    }
    assert!(!cvars.is_empty());

    let path = std::env::temp_dir().join(format!("mpit-tuner-list-{}.json", std::process::id()));
    std::fs::write(&path, job.stdout()).unwrap();
    let check = run_self_with(
        "json_matches_the_catalogue",
        1,
        &[(ENV, path.to_str().unwrap())],
    );
    let _ = std::fs::remove_file(&path);
    check.assert_success();
}

/// `--grep` keeps exactly the variables whose name or description matches.
#[test]
fn grep_filters_rows() {
    #[cfg(mpi_library = "mpich")]
    let (pattern, known) = ("poll", "MPIR_CVAR_REQUEST_POLL_FREQ");
    #[cfg(mpi_library = "mvapich2")]
    let (pattern, known) = ("poll", "MPIR_CVAR_POLLS_BEFORE_YIELD");
    #[cfg(mpi_flavor = "openmpi")]
    let (pattern, known) = ("EAGER", "btl_vader_eager_limit");

    let job = list(1, &["--grep", pattern]);
    job.assert_success();
    let out = job.stdout();
    let shown = rows(&out);
    assert!(row(&out, known).is_some(), "{known} is not listed:\n{out}");
    let needle = pattern.to_ascii_lowercase();
    for r in &shown {
        assert!(r.to_ascii_lowercase().contains(&needle), "row {r:?}");
    }
    assert!(
        out.contains(&format!("{} variable", shown.len())),
        "the final count is not {}:\n{out}",
        shown.len()
    );

    // The same filter in script form.
    let job = list(1, &["--grep", pattern, "--names-only"]);
    job.assert_success();
    let names = job.stdout();
    assert_eq!(names.lines().count(), shown.len());
    assert!(names.lines().any(|n| n == known));

    let job = list(1, &["--grep", "^no_such_variable_anywhere$"]);
    job.assert_success();
    assert!(
        rows(&job.stdout()).is_empty(),
        "rows printed:\n{}",
        job.stdout()
    );
    assert!(job.stdout().contains("0 variables shown"));
}

/// `--values` reads every CVAR without crashing (Open MPI 4.1 segfaults
/// reading some after MPI_Init) and shows known values.
#[test]
fn values_are_shown() {
    let job = list(1, &["--values"]);
    job.assert_success();
    let out = job.stdout();
    assert!(out.contains("as configured at MPI_Init"), "{out}");
    #[cfg(mpi_library = "mpich")]
    let name = "MPIR_CVAR_REQUEST_POLL_FREQ";
    #[cfg(mpi_library = "mvapich2")]
    let name = "MPIR_CVAR_POLLS_BEFORE_YIELD";
    #[cfg(mpi_flavor = "openmpi")]
    let name = "btl_vader_eager_limit";
    let r = row(&out, name).unwrap_or_else(|| panic!("{name} is not listed:\n{out}"));
    // NAME KIND SCOPE TYPE COUNT BIND LVL VALUE DESCRIPTION...
    let cells: Vec<&str> = r.split_whitespace().collect();
    assert_eq!(cells[4], "1", "count in {r:?}");
    let value: u64 = cells[7]
        .parse()
        .unwrap_or_else(|_| panic!("no numeric value in {r:?}"));
    assert!(value > 0, "{r:?}");

    // The same value in JSON.
    let job = list(1, &["--values", "--json", "--grep", &format!("^{name}$")]);
    job.assert_success();
    let json = parse_json(&job);
    let cvars = array(&json, "cvars");
    assert_eq!(cvars.len(), 1);
    assert_eq!(cvars[0]["value"][0].as_u64(), Some(value));
    assert_eq!(cvars[0]["count"], 1);
    assert_eq!(cvars[0]["value_source"], "before_mpi_init");
}

/// Under `mpiexec -n 4`, rank 0 alone prints.
#[test]
fn four_ranks_print_one_table() {
    let job = list(4, &["--cvars"]);
    job.assert_success();
    let out = job.stdout();
    assert_eq!(out.lines().filter(|l| l.starts_with("NAME ")).count(), 1);
    assert_eq!(out.matches("variables shown").count(), 1, "{out}");
    assert!(!rows(&out).is_empty());
}

/// Without a launcher, MPI starts as a singleton and the listing works.
#[test]
fn single_process_without_mpiexec() {
    let job = alone(&["list", "--pvars"]);
    job.assert_success();
    let out = job.stdout();
    assert_eq!(out.matches("variables shown").count(), 1, "{out}");
    #[cfg(mpi_flavor = "openmpi")]
    assert!(
        row(&out, "pml_ob1_unexpected_msgq_length").is_some(),
        "{out}"
    );
}

/// Mistakes get one clear message and exit code 2, before MPI starts.
#[test]
fn bad_options_fail_clearly() {
    let job = alone(&["list", "--grep", "(unclosed"]);
    assert_eq!(job.output.status.code(), Some(2), "{}", job.stderr());
    assert!(
        job.stderr()
            .starts_with("mpit-tuner: error: invalid --grep pattern `(unclosed`"),
        "{}",
        job.stderr()
    );
    assert!(job.stdout().is_empty());

    let job = alone(&["list", "--class", "speed"]);
    assert_eq!(job.output.status.code(), Some(2));
    assert!(job.stderr().contains("counter"), "{}", job.stderr());

    let job = alone(&["list", "--category", "no_such_category"]);
    assert_eq!(job.output.status.code(), Some(2));
    assert!(
        job.stderr()
            .contains("mpit-tuner: error: this MPI library has no category `no_such_category`"),
        "{}",
        job.stderr()
    );

    let job = alone(&["list", "--help"]);
    job.assert_success();
    assert!(job.stdout().contains("as configured at MPI_Init"));
}

/// `--scope`, `--class`, `--verbosity` and `--category` keep what they say.
#[test]
fn metadata_filters() {
    let job = list(
        1,
        &["--json", "--scope", "local", "--verbosity", "user_all"],
    );
    job.assert_success();
    let json = parse_json(&job);
    let cvars = array(&json, "cvars");
    assert!(!cvars.is_empty());
    assert!(array(&json, "pvars").is_empty(), "--scope shows CVARs only");
    for c in cvars {
        assert_eq!(c["scope"], "LOCAL", "{}", c["name"]);
        let verbosity = c["verbosity"].as_str().unwrap();
        assert!(verbosity.starts_with("USER_"), "{}", c["name"]);
    }

    #[cfg(mpi_flavor = "openmpi")]
    {
        let job = list(1, &["--json", "--class", "size"]);
        job.assert_success();
        let json = parse_json(&job);
        assert!(array(&json, "cvars").is_empty(), "--class shows PVARs only");
        let pvars = array(&json, "pvars");
        assert!(pvars
            .iter()
            .any(|p| p["name"] == "pml_ob1_unexpected_msgq_length"));
        assert!(pvars.iter().all(|p| p["class"] == "SIZE"));
    }

    // A category with variables of its own lists exactly those (and those
    // of its sub-categories).
    let json = parse_json(list(1, &["--json"]).assert_success());
    let category = array(&json, "categories")
        .iter()
        .find(|c| {
            !c["cvars"].as_array().unwrap().is_empty() && c["categories"] == Json::Array(vec![])
        })
        .expect("a category with CVARs");
    let name = category["name"].as_str().unwrap();
    let job = list(1, &["--names-only", "--cvars", "--category", name]);
    job.assert_success();
    let by_index: std::collections::HashMap<u64, &str> = array(&json, "cvars")
        .iter()
        .map(|c| (c["index"].as_u64().unwrap(), c["name"].as_str().unwrap()))
        .collect();
    let mut expected: Vec<&str> = category["cvars"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| by_index.get(&i.as_u64().unwrap()).copied())
        .collect();
    let mut listed: Vec<String> = job.stdout().lines().map(str::to_string).collect();
    expected.sort_unstable();
    listed.sort_unstable();
    assert_eq!(listed, expected, "category {name}");
}
