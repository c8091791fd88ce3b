//! The run directory: rank 0 names and creates it, every rank learns it.

use super::*;
use mpit::collective::Mixed;
use std::os::unix::ffi::OsStrExt;
use vocab::record::LogLayout;

/// Bytes of the run directory's name in the start agreement (a path of
/// up to this many bytes, less one).
const RUN_DIR_MESSAGE: usize = 4096;

/// The run directory as rank 0 proposes it in the start agreement: it
/// names and creates it (`dir` from MPIT_TUNER_DIR, else
/// [`default_run_dir`]); the error says why it could not.
pub(super) fn propose_run_dir(dir: Option<&Path>) -> std::result::Result<PathBuf, String> {
    let named = dir.is_some();
    let dir = dir.map_or_else(default_run_dir, Path::to_path_buf);
    if dir.as_os_str().len() >= RUN_DIR_MESSAGE {
        return Err(format!(
            "the run directory's path is longer than {} bytes (MPIT_TUNER_DIR)",
            RUN_DIR_MESSAGE - 1
        ));
    }
    if !named && dir.as_os_str().len() >= RUN_DIR_INLINE {
        return Err(format!(
            "the default run directory's name {} is longer than {} bytes: set MPIT_TUNER_DIR",
            dir.display(),
            RUN_DIR_INLINE - 1
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

/// Bytes of the run directory's name carried in the start agreement
/// itself; a longer name (rare) follows in one broadcast.
const RUN_DIR_INLINE: usize = 248;

/// Whether the run directory's name follows the start agreement in a
/// broadcast: MPIT_TUNER_DIR (`named`) is too long to travel in it. Every
/// rank decides from its own configuration (the same environment on every
/// rank of a job), never from the agreement's result, which a rank whose
/// call failed does not have: so every rank makes the broadcast, or none.
pub(super) fn named_too_long(named: Option<&Path>) -> bool {
    named.is_some_and(|d| d.as_os_str().len() >= RUN_DIR_INLINE)
}

/// A rank's part of the start agreement for the run directory: its
/// [`named_too_long`] and the complement (so that the ranks learn whether
/// they all decided alike), then rank 0's name, up to [`RUN_DIR_INLINE`]
/// bytes, NUL-padded, as 64-bit words (other ranks send the largest word,
/// so that the minimum over ranks is rank 0's).
pub(super) fn run_dir_votes(dir: Option<&Path>, long: bool) -> Vec<Mixed> {
    let flag = i64::from(long);
    let mut out = vec![Mixed::min(flag), Mixed::min(!flag)];
    match dir {
        Some(dir) => {
            let mut bytes = dir.as_os_str().as_bytes().to_vec();
            bytes.resize(RUN_DIR_INLINE, 0);
            out.extend(
                bytes
                    .chunks_exact(8)
                    .map(|w| Mixed::min(i64::from_le_bytes(w.try_into().unwrap_or_default()))),
            );
        }
        None => out.extend(vec![Mixed::min(i64::MAX); RUN_DIR_INLINE / 8]),
    }
    out
}

/// The run directory from the reduced [`run_dir_votes`]; `None`, with
/// this rank's failure in `seq`, when the ranks did not decide alike
/// whether the name is too long, or the broadcast failed. A name too long
/// for the agreement (`long`, this rank's [`named_too_long`]) comes from
/// rank 0 (`proposed`) in one broadcast.
pub(super) fn agreed_run_dir(
    seq: &mut Collectives,
    words: &[Mixed],
    proposed: Option<&Path>,
    long: bool,
) -> Option<PathBuf> {
    if words.len() < 2 || words[0].a != !words[1].a {
        seq.fail_local("MPIT_TUNER_DIR differs across ranks");
        return None;
    }
    let mut bytes: Vec<u8> = if long {
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
        words[2..].iter().flat_map(|w| w.a.to_le_bytes()).collect()
    };
    let end = bytes.iter().position(|&b| b == 0)?;
    bytes.truncate(end);
    (end > 0).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}

/// Ranks from which `auto` writes the logs per node on one host.
pub(super) const NODE_LAYOUT_RANKS: i32 = 64;

/// A rank's part of the start agreement for the logs' layout: what it asks
/// for (`rank` 0, `node` 1, `auto` 2: the minimum is per rank if any rank
/// asks for it, else per node if any does), then its host name's hash and
/// the hash's complement (whose minimums say whether the job spans
/// several hosts).
pub(super) fn layout_votes(wish: Option<LogLayout>, host: &str) -> [Mixed; 3] {
    let wish = match wish {
        Some(LogLayout::Rank) => 0,
        Some(LogLayout::Node) => 1,
        None => 2,
    };
    let hash = (crate::run::fnv1a(host) & (u64::MAX >> 1)) as i64;
    [Mixed::min(wish), Mixed::min(hash), Mixed::min(!hash)]
}

/// The layout from the reduced [`layout_votes`] of a job of `size` ranks.
pub(super) fn agreed_layout(words: &[Mixed], size: i32) -> LogLayout {
    match words {
        [wish, ..] if wish.a == 0 => LogLayout::Rank,
        [wish, ..] if wish.a == 1 => LogLayout::Node,
        [_, low, not_high] if low.a != !not_high.a || size >= NODE_LAYOUT_RANKS => LogLayout::Node,
        _ => LogLayout::Rank,
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
    fn run_dir_names_travel_in_words() {
        let dir = Path::new("/tmp/run dir/é");
        let mine = run_dir_votes(Some(dir), false);
        let others = run_dir_votes(None, false);
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
        assert_eq!(reduced[0].a, !reduced[1].a, "every rank decided alike");
        let bytes: Vec<u8> = reduced[2..]
            .iter()
            .flat_map(|w| w.a.to_le_bytes())
            .collect();
        assert!(bytes.starts_with(dir.as_os_str().as_bytes()));
        // Ranks that decide differently are told apart.
        let long = run_dir_votes(None, true);
        let mut flag = reduced[0];
        flag.combine(&long[0]);
        let mut not = reduced[1];
        not.combine(&long[1]);
        assert_ne!(flag.a, !not.a);
        let name = "x".repeat(RUN_DIR_INLINE);
        assert!(named_too_long(Some(Path::new(&name))));
        assert!(!named_too_long(Some(dir)));
        assert!(!named_too_long(None));
    }

    #[test]
    fn layouts_are_agreed() {
        let reduce = |votes: &[[Mixed; 3]]| -> Vec<Mixed> {
            let mut out = votes[0].to_vec();
            for v in &votes[1..] {
                for (o, x) in out.iter_mut().zip(v) {
                    o.combine(x);
                }
            }
            out
        };
        let auto = |host| layout_votes(None, host);
        let one_host = reduce(&[auto("n1"), auto("n1")]);
        assert_eq!(agreed_layout(&one_host, 2), LogLayout::Rank);
        assert_eq!(agreed_layout(&one_host, NODE_LAYOUT_RANKS), LogLayout::Node);
        let two_hosts = reduce(&[auto("n1"), auto("n2")]);
        assert_eq!(agreed_layout(&two_hosts, 2), LogLayout::Node);
        let node = layout_votes(Some(LogLayout::Node), "n1");
        assert_eq!(
            agreed_layout(&reduce(&[auto("n1"), node]), 2),
            LogLayout::Node
        );
        let rank = layout_votes(Some(LogLayout::Rank), "n2");
        assert_eq!(
            agreed_layout(&reduce(&[node, auto("n1"), rank]), 2),
            LogLayout::Rank,
            "per rank wins"
        );
        assert_eq!(agreed_layout(&[], 128), LogLayout::Rank);
    }

    #[test]
    fn dates() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(20_779 * 86_400 + 3_723), "20261122-010203");
        assert_eq!(utc_stamp(11_016 * 86_400 + 86_399), "20000229-235959");
    }
}
