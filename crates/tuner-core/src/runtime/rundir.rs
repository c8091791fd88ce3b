//! The run directory: rank 0 names and creates it, every rank learns it.

use super::*;
use mpit::collective::Mixed;
use std::os::unix::ffi::OsStrExt;

/// Bytes of the run directory's name in the first agreement (a path of
/// up to this many bytes, less one).
const RUN_DIR_MESSAGE: usize = 4096;

/// The run directory as rank 0 proposes it in the first agreement: it
/// names and creates it (`dir` from MPIT_TUNER_DIR, else
/// [`default_run_dir`]); the error says why it could not.
pub(super) fn propose_run_dir(dir: Option<&Path>) -> std::result::Result<PathBuf, String> {
    let dir = dir.map_or_else(default_run_dir, Path::to_path_buf);
    if dir.as_os_str().len() >= RUN_DIR_MESSAGE {
        return Err(format!(
            "the run directory's path is longer than {} bytes (MPIT_TUNER_DIR)",
            RUN_DIR_MESSAGE - 1
        ));
    }
    create_private_dir(&dir).map_err(|e| {
        format!(
            "cannot create run directory {} (MPIT_TUNER_DIR): {e}",
            dir.display()
        )
    })?;
    Ok(dir)
}

/// Bytes of the run directory's name carried in the first agreement
/// itself; a longer name (rare) follows in one broadcast.
const RUN_DIR_INLINE: usize = 248;

/// A rank's part of the first agreement for the run directory: a word
/// saying whether rank 0's name is longer than [`RUN_DIR_INLINE`] bytes,
/// then its first bytes (NUL-padded, as 64-bit words). Other ranks send
/// the largest word, so that the minimum over ranks is rank 0's.
pub(super) fn run_dir_votes(dir: Option<&Path>) -> Vec<Mixed> {
    let words = 1 + RUN_DIR_INLINE / 8;
    let Some(dir) = dir else {
        return vec![Mixed::min(i64::MAX); words];
    };
    let mut bytes = dir.as_os_str().as_bytes().to_vec();
    let long = bytes.len() >= RUN_DIR_INLINE;
    bytes.resize(RUN_DIR_INLINE, 0);
    std::iter::once(Mixed::min(i64::from(long)))
        .chain(
            bytes
                .chunks_exact(8)
                .map(|w| Mixed::min(i64::from_le_bytes(w.try_into().unwrap_or_default()))),
        )
        .collect()
}

/// The run directory from the reduced [`run_dir_votes`] (`None` when rank
/// 0 proposed none; the agreement then failed). A name too long for the
/// agreement comes from rank 0 (`proposed`) in one broadcast in `seq`,
/// which every rank makes alike.
pub(super) fn agreed_run_dir(
    seq: &mut Collectives,
    words: &[Mixed],
    proposed: Option<&Path>,
) -> Option<PathBuf> {
    let (long, words) = words.split_first()?;
    let mut bytes: Vec<u8> = if long.a == 1 {
        let mut message = [0u8; RUN_DIR_MESSAGE];
        if let Some(dir) = proposed {
            let b = dir.as_os_str().as_bytes();
            message[..b.len().min(RUN_DIR_MESSAGE - 1)]
                .copy_from_slice(&b[..b.len().min(RUN_DIR_MESSAGE - 1)]);
        }
        if !seq.bcast_bytes(&mut message, 0) {
            return None;
        }
        message.to_vec()
    } else {
        words.iter().flat_map(|w| w.a.to_le_bytes()).collect()
    };
    let end = bytes.iter().position(|&b| b == 0)?;
    bytes.truncate(end);
    (end > 0).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
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
    fn run_dir_names_travel_in_words() {
        let dir = Path::new("/tmp/run dir/é");
        let mine = run_dir_votes(Some(dir));
        let others = run_dir_votes(None);
        assert_eq!(mine.len(), others.len());
        let reduced: Vec<Mixed> = mine
            .iter()
            .zip(&others)
            .map(|(a, b)| {
                let mut a = *a;
                a.combine(b);
                a
            })
            .collect();
        assert_eq!(reduced[0].a, 0, "a short name is carried whole");
        let bytes: Vec<u8> = reduced[1..]
            .iter()
            .flat_map(|w| w.a.to_le_bytes())
            .collect();
        assert!(bytes.starts_with(dir.as_os_str().as_bytes()));
        let long = "x".repeat(RUN_DIR_INLINE);
        assert_eq!(run_dir_votes(Some(Path::new(&long)))[0].a, 1);
    }

    #[test]
    fn dates() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(20_779 * 86_400 + 3_723), "20261122-010203");
        assert_eq!(utc_stamp(11_016 * 86_400 + 86_399), "20000229-235959");
    }
}
