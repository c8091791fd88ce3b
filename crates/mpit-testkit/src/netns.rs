//! Network namespaces for tests: a namespace of the test's own, with
//! interfaces the host does not have, in which a job runs as it would on a
//! machine with those interfaces. Creating one needs root and `ip`
//! (iproute2); [`NetNs::create`] says why when it cannot, so the test can
//! report that it does not apply.
//!
//! Only the namespace's own interfaces are made or changed, and addresses
//! are given only inside it: the host's interfaces and routes are never
//! touched, and no traffic leaves the namespace.

use std::process::Command;

/// A network namespace made by a test, deleted when dropped.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

/// Runs `ip ARGS`; the error says which command failed and what `ip` said.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` (is iproute2 installed?): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl NetNs {
    /// Creates the namespace `name` with its loopback up. A namespace of
    /// that name left by an earlier run that crashed is deleted first, so
    /// this is safe to run again.
    pub fn create(name: &str) -> Result<Self, String> {
        // The effective user, without an unsafe call into libc.
        let uid = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        if uid != "0" {
            return Err("network namespaces need root".to_string());
        }
        let _ = ip(&["netns", "delete", name]);
        ip(&["netns", "add", name])?;
        let ns = NetNs {
            name: name.to_string(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Creates a namespace named `PREFIX-PID` for this process, so that
    /// test runs side by side (two flavours at once) do not share one; the
    /// namespaces of that prefix left by processes that are gone (a crashed
    /// run) are deleted first.
    pub fn create_for_process(prefix: &str) -> Result<Self, String> {
        let listed = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for name in listed.lines().filter_map(|l| l.split_whitespace().next()) {
            let stale = name
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('-'))
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
            if stale {
                let _ = ip(&["netns", "delete", name]);
            }
        }
        Self::create(&format!("{prefix}-{}", std::process::id()))
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip ARGS` inside the namespace.
    pub fn ip(&self, args: &[&str]) -> Result<(), String> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Adds a bridge `bridge` with the address `bridge_addr` (CIDR) and a
    /// veth pair `veth`/`veth`p on it, the peer with `peer_addr`; all up.
    /// What container hosts, virtual machines and nodes with several ports
    /// have beside their main interface.
    pub fn add_bridge_with_veth(
        &self,
        bridge: &str,
        bridge_addr: &str,
        veth: &str,
        peer_addr: &str,
    ) -> Result<(), String> {
        let peer = format!("{veth}p");
        self.ip(&["link", "add", bridge, "type", "bridge"])?;
        self.ip(&["addr", "add", bridge_addr, "dev", bridge])?;
        self.ip(&["link", "add", veth, "type", "veth", "peer", "name", &peer])?;
        self.ip(&["link", "set", veth, "master", bridge])?;
        self.ip(&["addr", "add", peer_addr, "dev", &peer])?;
        for link in [bridge, veth, peer.as_str()] {
            self.ip(&["link", "set", link, "up"])?;
        }
        Ok(())
    }

    /// `cmd` run inside the namespace (`ip netns exec NAME ...`), with
    /// its arguments, environment and working directory.
    pub fn wrap(&self, cmd: &Command) -> Command {
        let mut inside = Command::new("ip");
        inside.args(["netns", "exec", &self.name]);
        wrapped(inside, cmd)
    }

    /// The names of the namespace's interfaces (`ip -br link`), to show
    /// what a job inside it saw.
    pub fn links(&self) -> Vec<String> {
        Command::new("ip")
            .args(["-n", &self.name, "-br", "link"])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter_map(|l| l.split_whitespace().next())
                    .map(|l| l.split('@').next().unwrap_or(l).to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `outer` (a command that runs the command after its own arguments, as
/// `ip netns exec NAME` does), then `cmd`'s program and arguments, with
/// `cmd`'s environment and working directory.
pub(crate) fn wrapped(mut outer: Command, cmd: &Command) -> Command {
    outer.arg(cmd.get_program()).args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => outer.env(key, v),
            None => outer.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        outer.current_dir(dir);
    }
    outer
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Deleting the namespace removes every interface made inside it.
        if let Err(e) = ip(&["netns", "delete", &self.name]) {
            eprintln!("testkit: {e}");
        }
    }
}
