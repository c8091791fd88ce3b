//! A job over several nodes: 2 ranks on each of the 2 nodes of the
//! emulated cluster (`scripts/cluster.sh`: network and UTS namespaces of
//! this machine, host names node1 and node2), started by `mpit-tuner run`
//! on the cluster's head node as a user would on a login node, its run
//! directory on the file system every node shares. Every rank's log names
//! its node; a policy for one host acts there only; `mpit-tuner set
//! --hosts` changes that node's ranks only; `watch`, summary.json and the
//! report tell the ranks by host.
//!
//! Needs root, `ip` and `unshare` for the namespaces; elsewhere the test
//! says why it does not apply.

mod common;

use common::command;
use common::steering::*;
use mpit_testkit::cluster::cluster_for;
use serde_json::{json, Value as Json};

/// Ranks on each node.
const PER_NODE: u32 = 2;

#[test]
fn a_job_on_two_nodes_is_told_apart_by_host() {
    const TEST: &str = "a_job_on_two_nodes_is_told_apart_by_host";
    let Some(cluster) = cluster_for(TEST, 2) else {
        return;
    };
    let Library { local, value, .. } = library();
    // A policy for node2 only, and a watch of the variable `set` changes:
    // fires `then` when it holds `value`, with the value read in `inputs`.
    let policy = format!(
        "[[policy]]\nname = \"node2-only\"\nhosts = [\"node2\"]\nevery = \"50ms\"\n\
         when = \"time >= 0\"\nthen = [ {{ note = \"on node2\" }} ]\n\n\
         [[policy]]\nname = \"watch\"\nevery = \"50ms\"\nwhen = \"cvar:{local} == {value}\"\n\
         then = [ {{ note = \"changed\" }} ]\notherwise = [ {{ note = \"default\" }} ]\n"
    );
    let mut job = Running::start_at(Place::Nodes(cluster, PER_NODE), Some(&policy), &[], &[]);
    let ranks = Place::Nodes(cluster, PER_NODE).ranks() as usize;
    let on_node2 = |rank: usize| cluster.host_of(rank as u32, PER_NODE) == "node2";

    // Every rank's header names the node it runs on.
    let logs = job.wait_for("every rank's first decision of the watch", |logs| {
        logs.iter().all(|l| firings(l, "watch").next().is_some())
    });
    for (rank, log) in logs.iter().enumerate() {
        assert_eq!(
            log[0]["host"],
            cluster.host_of(rank as u32, PER_NODE),
            "rank {rank}'s header: {}",
            log[0]
        );
        assert_eq!(log[0]["layout"], "node", "rank {rank}'s header: {}", log[0]);
    }
    // A job over several hosts writes one log a node: the run directory's
    // files grow with nodes, not ranks.
    let mut files: Vec<String> = std::fs::read_dir(&job.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    files.sort();
    assert_eq!(files, ["node-node1.jsonl", "node-node2.jsonl"]);

    // The frame of `watch` names both hosts with their ranks.
    let dir = job.dir.display().to_string();
    let once = command(&["watch", &dir, "--once", "--plain"])
        .output()
        .expect("mpit-tuner watch runs");
    assert_eq!(once.status.code(), Some(0), "{}", printed(&once));
    let frame = String::from_utf8_lossy(&once.stdout);
    assert!(
        frame.contains("4 ranks on 2 hosts: node1 0-1, node2 2-3)"),
        "watch does not name the hosts:\n{frame}"
    );

    // A change for node2's ranks only.
    let id = job.set_on_node2(local, value);
    let logs = job.wait_for("the watch seeing the new value on node2's ranks", |logs| {
        (0..ranks).filter(|r| on_node2(*r)).all(|r| {
            firings(&logs[r], "watch").any(|d| {
                d["branch"] == "then" && d["inputs"][local][0].as_f64() == Some(value as f64)
            })
        })
    });
    for (rank, log) in logs.iter().enumerate() {
        let a = answer(log, &id).unwrap_or_else(|| panic!("rank {rank} did not answer {id}"));
        if on_node2(rank) {
            assert_eq!(a["outcome"], "applied", "rank {rank}: {a}");
            assert_eq!(a["write"]["readback"][0], value, "rank {rank}: {a}");
        } else {
            assert_eq!(a["outcome"], "not_for_this_rank", "rank {rank}: {a}");
            // node1's ranks kept their value: the watch never saw `value`.
            assert!(
                firings(log, "watch").all(|d| d["inputs"][local][0].as_f64() != Some(value as f64)),
                "rank {rank} on node1 took the value meant for node2"
            );
        }
        // The policy for node2 ran there and nowhere else.
        let fired = firings(log, "node2-only").count();
        if on_node2(rank) {
            assert!(fired > 0, "the policy for node2 never fired on rank {rank}");
        } else {
            assert_eq!(
                fired, 0,
                "the policy for node2 fired on rank {rank} (node1)"
            );
        }
    }
    // Stopped, with its run directory kept until the end of the test.
    assert!(
        job.stop_child().is_some_and(|s| s.success()),
        "the job did not end well"
    );

    // One rank of each node listed the control directory.
    let hosts: Vec<String> = listers(&job.logs())
        .into_iter()
        .map(|rank| cluster.host_of(rank as u32, PER_NODE))
        .collect();
    let expected: &[&str] = if node_dir_usable() {
        &["node1", "node2"]
    } else {
        &["node1", "node1", "node2", "node2"]
    };
    assert_eq!(hosts, expected, "the ranks that listed, by host");

    // summary.json: the ranks of each host.
    let summary: Json =
        serde_json::from_slice(&std::fs::read(job.dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["hosts"],
        json!([
            {"host": "node1", "count": 2, "ranks": "0-1", "members": [0, 1]},
            {"host": "node2", "count": 2, "ranks": "2-3", "members": [2, 3]}
        ]),
        "summary.json's hosts"
    );
    // The report: the hosts in its facts, and a section by host.
    let report = command(&["report", &dir]).output().unwrap();
    assert_eq!(report.status.code(), Some(0), "{}", printed(&report));
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("2: node1 (2 ranks), node2 (2 ranks)"),
        "the report's facts do not name the hosts:\n{text}"
    );
    let section = text
        .split("\nHosts\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Hosts section in the report:\n{text}"));
    for (host, ranks) in [("node1", "0-1"), ("node2", "2-3")] {
        assert!(
            section.lines().any(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words.len() >= 3 && words[..3] == [host, ranks, "2"]
            }),
            "no row of {host} with ranks {ranks} in the Hosts section:\n{section}"
        );
    }
}
