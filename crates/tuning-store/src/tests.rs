use super::*;

fn job(ranks: i32) -> Job {
    Job {
        library: "mpich".into(),
        library_version: "4.2.0".into(),
        ranks,
        ranks_per_node: Some(2),
        mode: "all".into(),
    }
}

fn entry(ranks: i32, collective: Collective, lo: u64, algorithm: &str, t: i64) -> Entry {
    Entry {
        job: job(ranks),
        place: Place {
            comm_size: ranks,
            collective,
            bin: (lo, Some(lo * 2 + 1)),
        },
        algorithm: algorithm.into(),
        default: "auto".into(),
        left: false,
        value: None,
        default_us: Some(10.0),
        chosen_us: Some(8.0),
        runs: 1,
        updated_unix: t,
        run_dir: None,
    }
}

#[test]
fn a_newer_entry_replaces_an_older_one_and_never_the_reverse() {
    let mut s = Store::new();
    assert_eq!(s.merge([entry(4, Collective::Bcast, 0, "binomial", 10)]), 1);
    assert_eq!(s.merge([entry(4, Collective::Bcast, 0, "scatter", 5)]), 0);
    assert_eq!(s.entries[0].algorithm, "binomial");
    assert_eq!(s.merge([entry(4, Collective::Bcast, 0, "scatter", 20)]), 1);
    assert_eq!(s.entries.len(), 1);
    assert_eq!(s.entries[0].algorithm, "scatter");
    s.merge([entry(4, Collective::Allreduce, 0, "ring", 1)]);
    s.merge([entry(2, Collective::Bcast, 0, "ring", 1)]);
    assert_eq!(s.entries.len(), 3);
    let place = entries_place(&s, 4, Collective::Allreduce);
    assert_eq!(s.get(&job(4), &place).unwrap().algorithm, "ring");
}

fn entries_place(s: &Store, ranks: i32, c: Collective) -> Place {
    s.entries
        .iter()
        .find(|e| e.job.ranks == ranks && e.place.collective == c)
        .unwrap()
        .place
}

#[test]
fn a_store_reads_back_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/store.json");
    assert_eq!(read(&path).unwrap().entries.len(), 0, "no file: empty");
    let done = change(&path, LOCK_WAIT, |s| {
        s.merge([
            entry(4, Collective::Bcast, 0, "binomial", 1),
            entry(4, Collective::Reduce, 8, "auto", 2),
        ])
    })
    .unwrap();
    assert_eq!(done.value, 2);
    assert!(done.moved_aside.is_none());
    let back = read(&path).unwrap();
    assert_eq!(back.version, VERSION);
    assert_eq!(back.entries.len(), 2);
    assert!(back.entries.iter().any(|e| e.algorithm == "binomial"));
    assert!(!back
        .entries
        .iter()
        .find(|e| e.algorithm == "auto")
        .unwrap()
        .switches());
}

#[test]
fn a_truncated_store_is_named_with_the_place_and_moved_aside_by_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.json");
    change(&path, LOCK_WAIT, |s| {
        s.merge([entry(4, Collective::Bcast, 0, "binomial", 1)])
    })
    .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let e = read(&path).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Damaged { .. }), "{text}");
    assert!(
        text.contains("store.json is damaged (truncated: line"),
        "{text}"
    );
    let done = change(&path, LOCK_WAIT, |s| {
        s.merge([entry(2, Collective::Bcast, 0, "ring", 1)])
    })
    .unwrap();
    let (aside, why) = done.moved_aside.unwrap();
    assert_eq!(aside, damaged_path(&path));
    assert!(why.starts_with("truncated"), "{why}");
    assert_eq!(std::fs::read(&aside).unwrap(), &bytes[..bytes.len() / 2]);
    let back = read(&path).unwrap();
    assert_eq!(back.entries.len(), 1);
    assert_eq!(back.entries[0].algorithm, "ring");
}

#[test]
fn what_is_not_a_store_is_damaged_and_a_newer_one_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.json");
    for (text, want) in [
        ("hello", "not JSON"),
        ("{\"entries\": []}", "not a store"),
        (
            "{\"format\": \"mpit-tuner-store\", \"version\": 0, \"entries\": []}",
            "version 0",
        ),
        (
            "{\"format\": \"mpit-tuner-store\", \"version\": 1, \"entries\": [{\"x\": 1}]}",
            "an entry",
        ),
    ] {
        std::fs::write(&path, text).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
    let newer = "{\"format\": \"mpit-tuner-store\", \"version\": 99, \"entries\": []}";
    std::fs::write(&path, newer).unwrap();
    assert!(matches!(read(&path), Err(Error::Newer { found: 99, .. })));
    let e = change(&path, LOCK_WAIT, |s| {
        s.merge([entry(4, Collective::Bcast, 0, "binomial", 1)])
    })
    .unwrap_err();
    assert!(e.to_string().contains("not overwritten"), "{e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
}

#[test]
fn jobs_that_change_one_store_at_once_all_keep_their_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.json");
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                for k in 0..5 {
                    change(&path, LOCK_WAIT, |s| {
                        s.merge([entry(2 + i, Collective::Bcast, k, "binomial", 1)])
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(read(&path).unwrap().entries.len(), 40);
}

#[test]
fn a_held_lock_makes_an_update_give_up_after_its_wait() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.json");
    let held = lock(&path, LOCK_WAIT).unwrap();
    let e = change(&path, Duration::from_millis(100), |_| ()).unwrap_err();
    assert!(matches!(e, Error::Busy { .. }), "{e}");
    assert!(e.to_string().contains("entries are not stored"), "{e}");
    drop(held);
    change(&path, Duration::from_millis(100), |_| ()).unwrap();
}

#[test]
fn an_update_keeps_the_store_s_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.json");
    change(&path, LOCK_WAIT, |_| ()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    change(&path, LOCK_WAIT, |s| {
        s.merge([entry(4, Collective::Bcast, 0, "binomial", 1)])
    })
    .unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

#[test]
fn the_user_s_fresh_entry_wins_over_the_site_s_and_old_ones_are_counted() {
    let now = 100 * 86_400;
    let mut user = Store::new();
    user.merge([
        entry(4, Collective::Bcast, 0, "binomial", now - 86_400),
        entry(4, Collective::Reduce, 0, "auto", now - 40 * 86_400),
        entry(8, Collective::Bcast, 0, "ring", now),
    ]);
    let mut site = Store::new();
    site.merge([
        entry(4, Collective::Bcast, 0, "scatter", now),
        entry(4, Collective::Allgather, 0, "ring", now),
    ]);
    let four = job(4);
    let found = lookup(&four, Some(&user), Some(&site), now, MAX_AGE_DAYS);
    let got: Vec<_> = found
        .entries
        .iter()
        .map(|(e, site)| (e.place.collective, e.algorithm.as_str(), *site))
        .collect();
    assert_eq!(
        got,
        [
            (Collective::Bcast, "binomial", false),
            (Collective::Allgather, "ring", true),
        ]
    );
    assert_eq!(found.stale, 1);
}

#[test]
fn shapes_read_as_a_user_says_them() {
    assert_eq!(job(4).shape(), "2 nodes x 2 ranks");
    let one = Job {
        ranks_per_node: None,
        ..job(1)
    };
    assert_eq!(one.shape(), "1 rank");
    assert_eq!(job(4).nodes(), Some(2));
}
