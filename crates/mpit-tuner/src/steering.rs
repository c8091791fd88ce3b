//! `mpit-tuner set`, `pause`, `resume` and `reload`: steering a running job
//! through its run directory.
//!
//! The command writes one request ([`vocab::steering::Request`]) into
//! `RUN_DIR/control/` (a temporary file renamed into place, so no rank
//! reads half of it), then follows every rank's log from its current end
//! until each rank has answered with a `control` record, finished, or the
//! timeout passed, and prints the answers grouped by rank. Exit status 0
//! when every rank answered and none refused; 1 otherwise.

use anyhow::{bail, Context, Result};
use clap::Args;
use policies::{HostSelector, RankSelector};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tuner_core::decide::format_ranks;
use vocab::record::{SteeringAnswer, SteeringOutcome};
use vocab::steering::{Action, Request, CONTROL_DIR};
use vocab::{Follow, Record};

/// Which ranks a request is for, and how long to wait for their answers.
#[derive(Debug, Args)]
pub struct Common {
    /// The ranks: a list such as 0-7,12 or a predicate such as
    /// "rank % 2 == 0" (default: every rank).
    #[arg(long, value_name = "RANKS")]
    ranks: Option<String>,
    /// The hosts: names or patterns with * and ?, separated by commas
    /// (default: every host).
    #[arg(long, value_name = "PATTERNS", value_delimiter = ',')]
    hosts: Vec<String>,
    /// How long to wait for every rank's answer (durations:
    /// docs/guide.md#durations).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    timeout: String,
}

/// Options of `mpit-tuner set`.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// The run directory of the running job.
    run_dir: PathBuf,
    /// NAME=VALUE: a number, numbers separated by commas (one per
    /// element), an enumeration item or a string.
    assignment: String,
    #[command(flatten)]
    common: Common,
}

/// Options of `mpit-tuner pause` and `resume`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The run directory of the running job.
    run_dir: PathBuf,
    /// The policy (default: every policy).
    policy: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// Options of `mpit-tuner reload`.
#[derive(Debug, Args)]
pub struct ReloadArgs {
    /// The run directory of the running job.
    run_dir: PathBuf,
    /// The policy file that replaces the running policies.
    policy_file: PathBuf,
    #[command(flatten)]
    common: Common,
}

/// Runs `mpit-tuner set`.
pub fn set(args: &SetArgs) -> Result<ExitCode> {
    let Some((cvar, value)) = args.assignment.split_once('=') else {
        bail!(
            "expected NAME=VALUE, such as MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE=65536, not {:?}",
            args.assignment
        );
    };
    let (cvar, value) = (cvar.trim(), value.trim());
    if cvar.is_empty() || value.is_empty() {
        bail!(
            "expected NAME=VALUE with both parts, not {:?}",
            args.assignment
        );
    }
    let action = Action::Set {
        cvar: cvar.to_string(),
        value: value.to_string(),
    };
    steer(&args.run_dir, action, &args.common)
}

/// Runs `mpit-tuner pause` (`paused`) or `resume`.
pub fn pause(args: &PauseArgs, paused: bool) -> Result<ExitCode> {
    let policy = args.policy.clone();
    let action = if paused {
        Action::Pause { policy }
    } else {
        Action::Resume { policy }
    };
    steer(&args.run_dir, action, &args.common)
}

/// Runs `mpit-tuner reload`: every rank compiles and checks the file
/// before it replaces its policies.
pub fn reload(args: &ReloadArgs) -> Result<ExitCode> {
    let source = std::fs::read_to_string(&args.policy_file)
        .with_context(|| format!("cannot read {}", args.policy_file.display()))?;
    let action = Action::Reload {
        file: args.policy_file.display().to_string(),
        source,
    };
    steer(&args.run_dir, action, &args.common)
}

/// What the logs say of the job: its size and each rank's host.
struct Job {
    size: u32,
    hosts: BTreeMap<u32, String>,
    /// Each rank's log, as the run directory holds it.
    logs: BTreeMap<u32, vocab::RankFile>,
}

/// The job's size and hosts, from the headers of its logs.
fn job(dir: &Path) -> Result<Job> {
    let files = vocab::rank_files(dir)
        .with_context(|| format!("cannot read the run directory {}", dir.display()))?;
    let mut job = Job {
        size: 0,
        hosts: BTreeMap::new(),
        logs: BTreeMap::new(),
    };
    for file in files {
        let first = file.records().ok().and_then(|mut r| r.next());
        if let Some(Ok((_, Record::Header(h)))) = first {
            job.size = job.size.max(h.size.max(0) as u32);
            job.hosts.insert(file.rank, h.host);
        }
        job.logs.insert(file.rank, file);
    }
    if job.size == 0 {
        bail!(
            "{} holds no rank log with a header: not the run directory of a job that started",
            dir.display()
        );
    }
    Ok(job)
}

fn steer(dir: &Path, action: Action, common: &Common) -> Result<ExitCode> {
    if let Some(ranks) = &common.ranks {
        RankSelector::from_text(ranks).map_err(|e| anyhow::anyhow!("--ranks {ranks:?}: {e}"))?;
    }
    if !common.hosts.is_empty() {
        HostSelector::new(&common.hosts)
            .map_err(|(i, why)| anyhow::anyhow!("--hosts {:?}: {why}", common.hosts[i]))?;
    }
    let timeout = policies::parse_duration(&common.timeout)
        .map_err(|e| anyhow::anyhow!("--timeout {:?}: {e}", common.timeout))?;
    let job = job(dir)?;
    let request = Request {
        id: new_id(),
        action,
        ranks: common.ranks.clone(),
        hosts: common.hosts.clone(),
    };
    // Every rank's log from its end now: the answers come after.
    let mut logs: Vec<Follow> = (0..job.size)
        .map(|r| match job.logs.get(&r) {
            Some(file) => file.follow_from_end(),
            None => Follow::from_end(&dir.join(vocab::record::rank_file_name(r as i32))),
        })
        .collect();
    let path = write_request(dir, &request)?;
    println!("request {}: {}", request.id, request.describe());
    let answers = wait(&mut logs, &request.id, timeout);
    let status = print_answers(&job, &answers, timeout);
    // Every rank answered or finished: nobody needs the request any more.
    // Otherwise it stays for the ranks that have not seen it yet.
    if answers.len() as u32 == job.size {
        if let Err(e) = std::fs::remove_file(&path) {
            eprintln!("mpit-tuner: cannot remove {}: {e}", path.display());
        }
    } else {
        println!(
            "the request stays in {} for the ranks that did not answer: they act on it when they next look",
            path.display()
        );
    }
    Ok(status)
}

/// A new request id: the time (so names sort in order) and the pid.
fn new_id() -> String {
    let now = jiff::Timestamp::now();
    format!(
        "{}-{:09}-{}",
        now.strftime("%Y%m%d-%H%M%S"),
        now.subsec_nanosecond(),
        std::process::id()
    )
}

/// Writes the request into `DIR/control/` (created, mode 0700), mode
/// 0600, through a temporary name; returns its path.
fn write_request(dir: &Path, request: &Request) -> Result<PathBuf> {
    let control = dir.join(CONTROL_DIR);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&control)
        .with_context(|| format!("cannot create {}", control.display()))?;
    let tmp = control.join(format!(".{}.tmp", request.id));
    let path = control.join(request.file_name());
    let text = serde_json::to_vec(request)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    file.write_all(&text)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
    Ok(path)
}

/// What became of the request on one rank.
#[derive(Debug, Clone, PartialEq)]
enum Heard {
    Answer(Box<SteeringAnswer>),
    /// The rank finished before it answered.
    Finished,
}

/// Follows the logs until every rank answered or finished, or `timeout`.
fn wait(logs: &mut [Follow], id: &str, timeout: Duration) -> BTreeMap<u32, Heard> {
    let deadline = Instant::now() + timeout;
    let mut heard = BTreeMap::new();
    loop {
        for (rank, log) in logs.iter_mut().enumerate() {
            let rank = rank as u32;
            for (_, record) in log.poll().into_iter().flatten() {
                match record {
                    Record::Steering(a) if a.id == id => {
                        heard.insert(rank, Heard::Answer(Box::new(a)));
                    }
                    Record::Close(_) => {
                        heard.entry(rank).or_insert(Heard::Finished);
                    }
                    _ => {}
                }
            }
        }
        if heard.len() == logs.len() || Instant::now() >= deadline {
            return heard;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Prints the answers, grouped by what the ranks said; the exit status:
/// 0 when every rank answered and none refused.
fn print_answers(job: &Job, heard: &BTreeMap<u32, Heard>, timeout: Duration) -> ExitCode {
    let mut groups: BTreeMap<(u8, String), Vec<u32>> = BTreeMap::new();
    let mut ok = true;
    for rank in 0..job.size {
        let (order, text) = match heard.get(&rank) {
            Some(Heard::Answer(a)) => {
                ok &= matches!(
                    a.outcome,
                    SteeringOutcome::Applied | SteeringOutcome::NotForThisRank
                );
                let order = match a.outcome {
                    SteeringOutcome::Applied => 0,
                    SteeringOutcome::NotForThisRank => 1,
                    _ => 2,
                };
                let text = match &a.message {
                    Some(m) => format!("{}: {m}", a.outcome.as_str()),
                    None => a.outcome.as_str().replace('_', " "),
                };
                (order, text)
            }
            Some(Heard::Finished) => {
                ok = false;
                (3, "finished before answering".to_string())
            }
            None => {
                ok = false;
                (4, format!("no answer within {timeout:?}"))
            }
        };
        groups.entry((order, text)).or_default().push(rank);
    }
    for ((_, text), ranks) in &groups {
        let label = if ranks.len() == 1 { "rank" } else { "ranks" };
        let hosts: std::collections::BTreeSet<&str> = ranks
            .iter()
            .filter_map(|r| job.hosts.get(r).map(String::as_str))
            .collect();
        let hosts = hosts.into_iter().collect::<Vec<_>>().join(",");
        let text = text.replace('\n', "\n    ");
        println!("  {label} {} ({hosts}): {text}", format_ranks(ranks));
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
