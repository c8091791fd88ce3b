//! The control directory polled once per node: one rank of each node (the
//! node's *lister*) lists `RUN_DIR/control/` and reads the new requests;
//! the node's other ranks learn of them from a listing it publishes in a
//! node-local directory (`/dev/shm` by default: memory, never the shared
//! file system), so a job makes one listing per node and tick, not one per
//! rank. No MPI call is made here (the helper thread may not call MPI when
//! the application runs `MPI_THREAD_SINGLE`): the lister is whichever rank
//! holds an exclusive `flock` on the node's lock file. The kernel releases
//! it when that rank exits, however it exits, and another rank of the node
//! takes it at its next poll: a node whose lister died keeps answering for
//! its live ranks.
//!
//! Files, in the node-local directory, named from the host and the run
//! directory (so that two jobs, or two emulated nodes sharing one
//! `/dev/shm`, never meet): `<base>.lock` (the lister's lock),
//! `<base>.members` (a shared lock held by every rank for its life: the
//! last rank of the node to let it go removes the files) and
//! `<base>.listing` (the published listing, replaced by `rename`, so a
//! reader sees a whole one). A follower reads the listing only when its
//! inode changed.
//!
//! The files are the job's user's and nobody else may write them (mode
//! 0600, never through a symbolic link): a rank uses no file there that
//! another user made, so another user of the node can make the ranks list
//! `control/` themselves, never hand them a request.
//!
//! Anything that goes wrong here (no such directory, a full `/dev/shm`, a
//! listing that does not parse, a file another user made) makes the rank
//! list the control directory itself, with a warning saying why: steering
//! never stops for it.

use rustix::fs::{flock, FlockOperation, OFlags};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A request file as the lister read it: what every rank of the node
/// handles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) enum Read {
    /// Its bytes.
    Bytes(Vec<u8>),
    /// Ignored, and why (logged as a warning).
    Ignored(String),
    /// Unreadable, and why (answered as an error).
    Failed(String),
}

/// The requests in the control directory, in name order, each as read.
pub(super) type Listing = Vec<(String, Read)>;

/// This rank's part in the node's polling.
#[derive(Debug)]
pub(super) struct Node {
    lock: File,
    /// Held shared for the rank's life (see the module's notes).
    members: File,
    base: PathBuf,
    /// The job's user.
    owner: u32,
    lister: bool,
    /// The names last published (lister) or read (follower).
    published: Option<Vec<String>>,
    /// The device, inode, size and change time of the listing last read
    /// (follower): a new listing is a new file (`rename`), and its inode
    /// number alone may be one a file system reuses.
    seen: Option<(u64, u64, u64, i64, i64)>,
}

/// What a poll learnt.
#[derive(Debug, PartialEq)]
pub(super) enum Poll {
    /// Nothing new since the last poll.
    Unchanged,
    /// The requests present now.
    Listing(Listing),
}

impl Node {
    /// Joins the node's polling for the run directory `run_dir` on `host`,
    /// with its files in `dir`; `Err` says why not (the rank then lists the
    /// control directory itself).
    /// `owner` is the job's user.
    pub(super) fn join(dir: &Path, host: &str, run_dir: &Path, owner: u32) -> Result<Node, String> {
        let base = dir.join(base_name(host, run_dir));
        let open = |suffix: &str| {
            let path = base.with_extension(suffix);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(OFlags::NOFOLLOW.bits() as i32)
                .open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            private(&file, &path, owner)?;
            Ok::<File, String>(file)
        };
        let members = open("members")?;
        // The first live rank of the node removes a listing a crashed job
        // of the same run directory left, and what dead jobs left.
        if flock(&members, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = std::fs::remove_file(base.with_extension("listing"));
            sweep_stale(dir, &base, owner, STALE_AFTER);
        }
        flock(&members, FlockOperation::LockShared).map_err(|e| {
            format!(
                "cannot lock {}: {e}",
                base.with_extension("members").display()
            )
        })?;
        let lock = open("lock")?;
        Ok(Node {
            lock,
            members,
            base,
            owner,
            lister: false,
            published: None,
            seen: None,
        })
    }

    /// Whether this rank lists the control directory for its node.
    #[cfg(test)]
    pub(super) fn is_lister(&self) -> bool {
        self.lister
    }

    /// One poll: as the lister (taking the role when it is free), `list`
    /// reads the control directory and the listing is published when it
    /// changed; as a follower, the published listing is read when it
    /// changed. `Err` says why the node-local files failed this time.
    pub(super) fn poll(&mut self, list: impl FnOnce() -> Listing) -> Result<Poll, String> {
        if !self.lister {
            self.lister = flock(&self.lock, FlockOperation::NonBlockingLockExclusive).is_ok();
        }
        if self.lister {
            let listing = list();
            let names: Vec<String> = listing.iter().map(|(n, _)| n.clone()).collect();
            if self.published.as_ref() != Some(&names) {
                self.publish(&listing)?;
                self.published = Some(names);
            }
            return Ok(Poll::Listing(listing));
        }
        let path = self.base.with_extension("listing");
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            // Not published yet: no lister has polled.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Poll::Unchanged),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let id = (
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.ctime(),
            meta.ctime_nsec(),
        );
        if self.seen == Some(id) {
            return Ok(Poll::Unchanged);
        }
        let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(cannot)?;
        private(&file, &path, self.owner)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(cannot)?;
        let listing: Listing = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{}: not a listing: {e}", path.display()))?;
        self.seen = Some(id);
        Ok(Poll::Listing(listing))
    }

    /// Writes `listing` beside the published one, then renames it over.
    fn publish(&self, listing: &Listing) -> Result<(), String> {
        let path = self.base.with_extension("listing");
        let tmp = self
            .base
            .with_extension(format!("listing.{}", std::process::id()));
        let text = serde_json::to_vec(listing).map_err(|e| e.to_string())?;
        // A new file of this process's (never one that exists, never
        // through a link), then the rename.
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&text))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("cannot publish {}: {e}", path.display())
            })
    }

    /// Leaves the node's polling: the last rank of the node to leave
    /// removes its files.
    pub(super) fn leave(self) {
        let Node {
            lock,
            members,
            base,
            ..
        } = self;
        drop(lock);
        let _ = flock(&members, FlockOperation::Unlock);
        if flock(&members, FlockOperation::NonBlockingLockExclusive).is_ok() {
            for suffix in ["listing", "lock", "members"] {
                let _ = std::fs::remove_file(base.with_extension(suffix));
            }
        }
    }
}

/// How long ago a job that died must have started before another job
/// removes its files.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the files jobs that died left in `dir` (a job killed whole, or
/// ended by `MPI_Abort`, never leaves: three small files a node): those of
/// `owner` whose `.members` no live rank holds (an exclusive lock is
/// granted) and that were made more than `older` ago, never `own`'s, never
/// through a link. Best effort: what cannot be removed stays. Returns how
/// many jobs' files were removed.
fn sweep_stale(dir: &Path, own: &Path, owner: u32, older: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut swept = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with("mpit-tuner-") || !name.ends_with(".members") {
            continue;
        }
        let base = path.with_extension("");
        if base == own {
            continue;
        }
        let old_enough = std::fs::symlink_metadata(&path).is_ok_and(|m| {
            m.file_type().is_file()
                && m.uid() == owner
                && m.modified()
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > older)
        });
        if !old_enough {
            continue;
        }
        let Ok(members) = OpenOptions::new()
            .read(true)
            .custom_flags(OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
        else {
            continue;
        };
        if flock(&members, FlockOperation::NonBlockingLockExclusive).is_ok() {
            for suffix in ["listing", "lock", "members"] {
                let _ = std::fs::remove_file(base.with_extension(suffix));
            }
            swept += 1;
        }
    }
    swept
}

/// Fails unless `file` (at `path`) belongs to `owner` and nobody else may
/// write it.
fn private(file: &File, path: &Path, owner: u32) -> Result<(), String> {
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.uid() != owner {
        return Err(format!(
            "{} belongs to uid {}, not to the job's user (uid {owner})",
            path.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "others may write {} (mode {:o})",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// `mpit-tuner-<host>-<hash of the run directory>`: one name per node and
/// job (the hash is the same in every rank of a job: one build, one path).
fn base_name(host: &str, run_dir: &Path) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    run_dir.hash(&mut h);
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("mpit-tuner-{host}-{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's user (the owner of a file it makes).
    fn me() -> u32 {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.as_file().metadata().unwrap().uid()
    }

    fn listing(names: &[&str]) -> Listing {
        names
            .iter()
            .map(|n| (n.to_string(), Read::Bytes(n.as_bytes().to_vec())))
            .collect()
    }

    /// A dead job's files go; a live job's, a new one's and the joining
    /// job's own stay.
    #[test]
    fn files_of_dead_jobs_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let make = |base: &str, age_s: u64| {
            for suffix in ["members", "lock", "listing"] {
                let f = File::create(tmp.path().join(format!("{base}.{suffix}"))).unwrap();
                let t = std::time::SystemTime::now() - std::time::Duration::from_secs(age_s);
                f.set_modified(t).unwrap();
            }
        };
        make("mpit-tuner-node1-dead", 7200);
        make("mpit-tuner-node2-live", 7200);
        make("mpit-tuner-node1-new", 10);
        make("mpit-tuner-node1-own", 7200);
        // A live job's ranks hold its members file shared.
        let live = File::open(tmp.path().join("mpit-tuner-node2-live.members")).unwrap();
        flock(&live, FlockOperation::LockShared).unwrap();
        let own = tmp.path().join("mpit-tuner-node1-own");
        let swept = sweep_stale(tmp.path(), &own, me(), STALE_AFTER);
        assert_eq!(swept, 1);
        let mut left: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert!(
            !left.iter().any(|n| n.contains("-dead")),
            "the dead job's files: {left:?}"
        );
        assert_eq!(left.len(), 9, "{left:?}");
        // Another user's files are never touched.
        make("mpit-tuner-node1-dead2", 7200);
        assert_eq!(sweep_stale(tmp.path(), &own, me() + 1, STALE_AFTER), 0);
        drop(live);
    }

    #[test]
    fn one_lister_per_node_and_a_new_one_when_it_leaves() {
        let tmp = tempfile::tempdir().unwrap();
        let run = Path::new("/scratch/run-1");
        let mut a = Node::join(tmp.path(), "node1", run, me()).unwrap();
        let mut b = Node::join(tmp.path(), "node1", run, me()).unwrap();
        // Another node's ranks (another host name, same directory) and
        // another job's have their own lister.
        let mut other = Node::join(tmp.path(), "node2", run, me()).unwrap();
        let mut job2 = Node::join(tmp.path(), "node1", Path::new("/scratch/run-2"), me()).unwrap();

        let mut listed = 0;
        assert_eq!(
            a.poll(|| {
                listed += 1;
                listing(&["r1.json"])
            }),
            Ok(Poll::Listing(listing(&["r1.json"])))
        );
        assert!(a.is_lister());
        // b reads what a published, without listing; then nothing new.
        let mut b_listed = false;
        assert_eq!(
            b.poll(|| {
                b_listed = true;
                Vec::new()
            }),
            Ok(Poll::Listing(listing(&["r1.json"])))
        );
        assert!(!b.is_lister() && !b_listed);
        assert_eq!(b.poll(Vec::new), Ok(Poll::Unchanged));
        // The same listing is not published again.
        a.poll(|| listing(&["r1.json"])).unwrap();
        assert_eq!(b.poll(Vec::new), Ok(Poll::Unchanged));
        // A change is.
        a.poll(|| listing(&["r1.json", "r2.json"])).unwrap();
        assert_eq!(
            b.poll(Vec::new),
            Ok(Poll::Listing(listing(&["r1.json", "r2.json"])))
        );
        assert!(other.poll(Vec::new).is_ok() && other.is_lister());
        assert!(job2.poll(Vec::new).is_ok() && job2.is_lister());

        // The lister leaves (or dies: the kernel drops its lock the same
        // way): b takes over at its next poll.
        a.leave();
        assert_eq!(
            b.poll(|| listing(&["r2.json"])),
            Ok(Poll::Listing(listing(&["r2.json"])))
        );
        assert!(b.is_lister());
        assert_eq!(listed, 1);
        let base = tmp.path().join(base_name("node1", run));
        assert!(base.with_extension("listing").exists());
        // The last to leave removes the node's files.
        b.leave();
        for suffix in ["listing", "lock", "members"] {
            assert!(!base.with_extension(suffix).exists(), "{suffix}");
        }
        other.leave();
        job2.leave();
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    /// The lister is another process, killed with SIGKILL: the kernel
    /// drops its lock, and a rank of the node takes over at its next poll.
    #[test]
    fn a_killed_lister_is_replaced() {
        use std::io::BufRead;
        let tmp = tempfile::tempdir().unwrap();
        let run = Path::new("/scratch/run-1");
        let mut b = Node::join(tmp.path(), "node1", run, me()).unwrap();
        let lock = tmp
            .path()
            .join(base_name("node1", run))
            .with_extension("lock");
        // One process (a shell that becomes `sleep`) holds the lock on its
        // descriptor 9, taken by util-linux's flock(1), and says so.
        if which::which("flock").is_err() {
            eprintln!("skipped: no flock(1) here");
            return;
        }
        let mut holder = std::process::Command::new("sh")
            .args([
                "-c",
                "exec 9<>\"$1\" && flock -n 9 && echo held && exec sleep 60",
                "sh",
                lock.to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "held\n");
        assert_eq!(b.poll(|| listing(&["r1.json"])), Ok(Poll::Unchanged));
        assert!(!b.is_lister());
        holder.kill().unwrap();
        holder.wait().unwrap();
        assert_eq!(
            b.poll(|| listing(&["r1.json"])),
            Ok(Poll::Listing(listing(&["r1.json"])))
        );
        assert!(b.is_lister());
        b.leave();
    }

    #[test]
    fn a_bad_listing_or_directory_is_an_error_not_a_stop() {
        let tmp = tempfile::tempdir().unwrap();
        let run = Path::new("/scratch/run-1");
        let missing = tmp.path().join("missing");
        let e = Node::join(&missing, "node1", run, me()).unwrap_err();
        assert!(e.contains("cannot open") && e.contains("missing"), "{e}");

        let mut a = Node::join(tmp.path(), "node1", run, me()).unwrap();
        let mut b = Node::join(tmp.path(), "node1", run, me()).unwrap();
        a.poll(|| listing(&["r1.json"])).unwrap();
        let path = tmp
            .path()
            .join(base_name("node1", run))
            .with_extension("listing");
        std::fs::write(path.with_extension("x"), "not json").unwrap();
        std::fs::rename(path.with_extension("x"), &path).unwrap();
        let e = b.poll(Vec::new).unwrap_err();
        assert!(e.contains("not a listing"), "{e}");

        // A listing others may write, or files of another user, are not
        // used.
        let mut c = Node::join(tmp.path(), "node1", run, me()).unwrap();
        std::fs::write(path.with_extension("x"), "[]").unwrap();
        std::fs::set_permissions(
            path.with_extension("x"),
            std::os::unix::fs::PermissionsExt::from_mode(0o666),
        )
        .unwrap();
        std::fs::rename(path.with_extension("x"), &path).unwrap();
        let e = c.poll(Vec::new).unwrap_err();
        assert!(
            e.contains("others may write") && e.contains("mode 666"),
            "{e}"
        );
        let e = Node::join(tmp.path(), "node1", run, me() + 1).unwrap_err();
        assert!(e.contains("not to the job's user"), "{e}");

        // A link where a file of the node should be: refused, not followed.
        let target = tmp.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let other = tmp.path().join(base_name("node9", run));
        std::os::unix::fs::symlink(&target, other.with_extension("members")).unwrap();
        let e = Node::join(tmp.path(), "node9", run, me()).unwrap_err();
        assert!(e.contains("cannot open"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn names_are_safe_and_differ_by_host_and_run() {
        let n = base_name("node 1/../x", Path::new("/a"));
        assert!(n.starts_with("mpit-tuner-node_1____x-"), "{n}");
        assert!(!n.contains('/'));
        assert_ne!(
            base_name("h", Path::new("/a")),
            base_name("h", Path::new("/b"))
        );
        assert_ne!(
            base_name("h1", Path::new("/a")),
            base_name("h2", Path::new("/a"))
        );
    }
}
