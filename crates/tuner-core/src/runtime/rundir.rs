//! The run directory: rank 0 names and creates it, every rank learns it.

use super::*;

/// Bytes of the run directory broadcast: `ok<TAB>path` or `err<TAB>why`.
const RUN_DIR_MESSAGE: usize = 4096;

/// The run directory, the same on every rank: rank 0 names and creates it
/// (`dir` from MPIT_TUNER_DIR, else [`default_run_dir`]), everyone learns
/// the name, or why not, from one fixed-size broadcast. `None` when there
/// is none; rank 0 then records its failure in `seq`.
pub(super) fn agree_on_run_dir(
    seq: &mut Collectives,
    rank: i32,
    dir: Option<&Path>,
) -> Option<PathBuf> {
    let mut message = [0u8; RUN_DIR_MESSAGE];
    if rank == 0 {
        let dir = dir.map_or_else(default_run_dir, Path::to_path_buf);
        let text = match create_private_dir(&dir) {
            Ok(()) => format!("ok\t{}", dir.display()),
            Err(e) => format!(
                "err\tcannot create run directory {} (MPIT_TUNER_DIR): {e}",
                dir.display()
            ),
        };
        let text = if text.len() > RUN_DIR_MESSAGE {
            format!(
                "err\tthe run directory's path is longer than {} bytes (MPIT_TUNER_DIR)",
                RUN_DIR_MESSAGE - 40
            )
        } else {
            text
        };
        message[..text.len()].copy_from_slice(text.as_bytes());
    }
    let received = seq.bcast_bytes(&mut message, 0);
    let end = message
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(message.len());
    let message = String::from_utf8_lossy(&message[..end]).into_owned();
    match message.split_once('\t') {
        Some(("ok", dir)) if received => Some(PathBuf::from(dir)),
        Some(("err", why)) if rank == 0 => {
            seq.fail_local(why.to_string());
            None
        }
        _ => None,
    }
}

/// Creates the run directory, and what it lacks of its parents, readable
/// and writable by the job's user only (mode 0700): steering requests in
/// its `control/` directory come from whoever may write there. A directory
/// that exists keeps its mode.
pub(super) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// `mpit-tuner-<UTC date>-<time>-<job id>` in the working directory; the job
/// id comes from the batch system or the launcher, else rank 0's pid.
fn default_run_dir() -> PathBuf {
    let job = [
        "SLURM_JOB_ID",
        "PBS_JOBID",
        "LSB_JOBID",
        "OMPI_MCA_ess_base_jobid",
        "PMI_JOBID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
    .map(|s| {
        s.replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '.' && c != '-',
            "_",
        )
    })
    .unwrap_or_else(|| std::process::id().to_string());
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Path::new(".").join(format!("mpit-tuner-{}-{job}", utc_stamp(secs)))
}

/// Unix seconds as `YYYYMMDD-HHMMSS` in UTC.
fn utc_stamp(secs: u64) -> String {
    let t = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    t.strftime("%Y%m%d-%H%M%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(20_779 * 86_400 + 3_723), "20261122-010203");
        assert_eq!(utc_stamp(11_016 * 86_400 + 86_399), "20000229-235959");
    }
}
