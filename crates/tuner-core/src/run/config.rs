//! Configuration of the runtime from `MPIT_TUNER_*` environment variables.
//!
//! A bad value never stops the job: it produces one warning naming the
//! variable and the value, and the default is used.

use crate::collectives::{Collective, Params, COLLECTIVES};
use policies::parse_duration;
use regex::Regex;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default sampling interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// The shortest sampling interval accepted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// The node-local directory of steering's shared listing: memory on every
/// Linux node, never a shared file system.
pub const DEFAULT_NODE_DIR: &str = "/dev/shm";

/// Every environment variable the tuner reads, with its meaning (for docs,
/// `--help` and the log header).
pub const VARIABLES: &[(&str, &str)] = &[
    (
        "MPIT_TUNER",
        "`off` (or 0/false/no) disables the tuner entirely",
    ),
    (
        "MPIT_TUNER_DIR",
        "run directory for logs and summary.json (default: ./mpit-tuner-<date>-<jobid>)",
    ),
    (
        "MPIT_TUNER_INTERVAL",
        "sampling interval, e.g. 1s, 100ms, 1ms (default 1s, minimum 1ms)",
    ),
    (
        "MPIT_TUNER_PVARS",
        "comma-separated PVAR names or regexes to sample (default: all)",
    ),
    (
        "MPIT_TUNER_POLICY",
        "policy file (TOML); default: the embedded policies.toml; `none` for monitor only",
    ),
    (
        "MPIT_TUNER_QUIET",
        "1 silences the summary table rank 0 prints at finalize",
    ),
    (
        "MPIT_TUNER_REFRESH",
        "how often to look for new variables, e.g. 10s (default 5s; 0 = never)",
    ),
    (
        "MPIT_TUNER_FLUSH",
        "how often the log buffer is flushed to disk (default 1s)",
    ),
    (
        "MPIT_TUNER_NODE_DIR",
        "node-local directory where one rank a node shares what it read of the control directory with the node's other ranks (default /dev/shm; `off`: every rank lists the control directory)",
    ),
    (
        "MPIT_TUNER_LOG_LAYOUT",
        "`rank`: one log file a rank; `node`: one a node, which the node's ranks append to; default `auto`: per node when the job spans several hosts or has 64 ranks or more (if ranks ask for different layouts, per rank wins)",
    ),
    (
        "MPIT_TUNER_COLLECTIVES",
        "`tune` tunes the collective algorithms online on the application's calls, or a list such as `allreduce,bcast`; default `off` (a different algorithm can change floating-point results in the last bits)",
    ),
    (
        "MPIT_TUNER_STORE",
        "the tuning store that warm-starts collective tuning from earlier runs and learns from this one (docs/tuning-store.md): a file path; default $XDG_CACHE_HOME/mpit-tuner/store.json, else ~/.cache/mpit-tuner/store.json; `off`: neither read nor written",
    ),
    (
        "MPIT_TUNER_SITE_STORE",
        "a site's read-only tuning store, read after the user's (its entries count where the user's has none); default: none",
    ),
    (
        "MPIT_TUNER_STORE_MAX_AGE",
        "entries of the tuning store older than this many days are searched again (default 30)",
    ),
    (
        "MPIT_TUNER_COLLECTIVES_WINDOW",
        "calls per measurement window of collective tuning, exactly, from the first call (default: the policy file's window, 8, with windows of at least 200 us for short calls and about 50 ms for long ones, and nothing measured in a job's first 20 ms); 1 is the most aggressive",
    ),
];

/// The runtime's configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Whether the tuner runs at all.
    pub enabled: bool,
    /// The run directory, if the user chose one. (Durations serialise as
    /// seconds.)
    pub dir: Option<PathBuf>,
    /// The sampling interval.
    #[serde(serialize_with = "seconds")]
    pub interval: Duration,
    /// Which PVARs to sample (empty = all).
    pub pvars: Vec<String>,
    /// The policy file, `None` for the embedded default, `Some("none")` for
    /// monitor mode.
    pub policy: Option<PathBuf>,
    /// Whether rank 0 stays silent at finalize.
    pub quiet: bool,
    /// Whether rank 0 says everything on its terminal
    /// (`MPIT_TUNER_VERBOSE`, set by `mpit-tuner run`): the tuning line at
    /// start, the finalize table and recommendations.
    pub verbose: bool,
    /// How often to re-enumerate variables (`None` = never).
    #[serde(serialize_with = "opt_seconds")]
    pub refresh: Option<Duration>,
    /// How often to flush the log.
    #[serde(serialize_with = "seconds")]
    pub flush: Duration,
    /// The compiled PVAR selection.
    #[serde(skip)]
    pub pvar_patterns: Vec<Regex>,
    /// The node-local directory of steering's shared listing
    /// (`MPIT_TUNER_NODE_DIR`; `None`: `off`, every rank lists).
    pub node_dir: Option<PathBuf>,
    /// The logs' layout asked for (`MPIT_TUNER_LOG_LAYOUT`; `None`:
    /// `auto`, decided at start from the job's hosts and size).
    pub log_layout: Option<vocab::record::LogLayout>,
    /// Online collective tuning, when asked for (`MPIT_TUNER_COLLECTIVES`).
    pub collectives: Option<CollectiveConfig>,
    /// `MPIT_TUNER_COLLECTIVES=off` said explicitly: a policy file's
    /// `tune = true` does not turn it on.
    pub collectives_off: bool,
    /// `MPIT_TUNER_COLLECTIVES_WINDOW`: calls per measurement window of
    /// collective tuning, exactly, whichever mode asked or not (`None`:
    /// the policy file's, else 8).
    pub collective_window: Option<u32>,
    /// The tuning store (`MPIT_TUNER_STORE`, `MPIT_TUNER_SITE_STORE`,
    /// `MPIT_TUNER_STORE_MAX_AGE`).
    pub store: StoreConfig,
}

/// Where the tuning store is, and how old its entries may be.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreConfig {
    /// The user's store, read at start and written at finalize by rank 0
    /// (`None`: off, or no cache directory to put it in).
    pub user: Option<PathBuf>,
    /// A site's store, only read.
    pub site: Option<PathBuf>,
    /// Entries older than this many days are not used.
    pub max_age_days: f64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            user: tuning_store::default_path(),
            site: None,
            max_age_days: tuning_store::MAX_AGE_DAYS,
        }
    }
}

pub use vocab::record::CollectiveMode;

/// What online collective tuning tunes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectiveConfig {
    /// Which calls may switch (`safe`, `all`).
    pub mode: CollectiveMode,
    /// The collectives (empty: every one the library lets the tuner switch).
    pub collectives: Vec<Collective>,
    /// Calls per measurement window (`MPIT_TUNER_COLLECTIVES_WINDOW`;
    /// else the policy file's, else 8).
    pub window: Option<u32>,
    /// `MPIT_TUNER_COLLECTIVES=measure`: time the collectives with the
    /// algorithms set at start, switch nothing (what `mpit-tuner tune`
    /// runs).
    pub measure: bool,
}

impl CollectiveConfig {
    /// As the header records it: `safe: all (window 8)`, `all:
    /// allreduce,bcast`, `measure: all`.
    pub fn describe(&self) -> String {
        let which = if self.collectives.is_empty() {
            "all".to_string()
        } else {
            self.collectives
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mode = if self.measure {
            "measure"
        } else {
            self.mode.name()
        };
        let which = format!("{mode}: {which}");
        match self.window {
            Some(w) => format!("{which} (window {w})"),
            None => which,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            dir: None,
            interval: DEFAULT_INTERVAL,
            pvars: Vec::new(),
            policy: None,
            quiet: false,
            verbose: false,
            refresh: Some(Duration::from_secs(5)),
            flush: Duration::from_secs(1),
            pvar_patterns: Vec::new(),
            node_dir: Some(PathBuf::from(DEFAULT_NODE_DIR)),
            log_layout: None,
            collectives: None,
            collectives_off: false,
            collective_window: None,
            store: StoreConfig::default(),
        }
    }
}

impl Config {
    /// Reads the configuration from the process environment. Returns it with
    /// one message per bad value.
    pub fn from_env() -> (Config, Vec<String>) {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (for tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> (Config, Vec<String>) {
        let mut config = Config::default();
        let mut warnings = Vec::new();
        if let Some(v) = lookup("MPIT_TUNER") {
            match parse_bool(&v) {
                Some(on) => config.enabled = on,
                None => warnings.push(format!(
                    "MPIT_TUNER={v:?} is not on/off (1/0, true/false, yes/no); the tuner stays on"
                )),
            }
        }
        if let Some(v) = lookup("MPIT_TUNER_DIR").filter(|v| !v.is_empty()) {
            config.dir = Some(PathBuf::from(v));
        }
        if let Some(v) = lookup("MPIT_TUNER_INTERVAL") {
            match parse_duration(&v) {
                Ok(d) if d >= MIN_INTERVAL => config.interval = d,
                Ok(_) => warnings.push(format!(
                    "MPIT_TUNER_INTERVAL={v:?} is below the 1ms minimum; using 1s"
                )),
                Err(e) => warnings.push(format!("MPIT_TUNER_INTERVAL={v:?}: {e}; using 1s")),
            }
        }
        if let Some(v) = lookup("MPIT_TUNER_PVARS").filter(|v| !v.trim().is_empty()) {
            for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match Regex::new(&format!("^(?:{item})$")) {
                    Ok(re) => {
                        config.pvars.push(item.to_string());
                        config.pvar_patterns.push(re);
                    }
                    Err(e) => warnings.push(format!(
                        "MPIT_TUNER_PVARS: {item:?} is not a valid name or regex ({e}); ignored"
                    )),
                }
            }
            if config.pvar_patterns.is_empty() {
                warnings.push("MPIT_TUNER_PVARS selects nothing valid; sampling all PVARs".into());
            }
        }
        if let Some(v) = lookup("MPIT_TUNER_POLICY").filter(|v| !v.is_empty()) {
            config.policy = Some(PathBuf::from(v));
        }
        if let Some(v) = lookup("MPIT_TUNER_QUIET") {
            match parse_bool(&v) {
                Some(q) => config.quiet = q,
                None => warnings.push(format!("MPIT_TUNER_QUIET={v:?} is not 1/0; not quiet")),
            }
        }
        if let Some(v) = lookup("MPIT_TUNER_VERBOSE") {
            match parse_bool(&v) {
                Some(on) => config.verbose = on,
                None => warnings.push(format!("MPIT_TUNER_VERBOSE={v:?} is not 1/0; not verbose")),
            }
        }
        if let Some(v) = lookup("MPIT_TUNER_NODE_DIR") {
            let v = v.trim();
            if v.eq_ignore_ascii_case("off") {
                config.node_dir = None;
            } else if Path::new(v).is_absolute() {
                config.node_dir = Some(PathBuf::from(v));
            } else {
                warnings.push(format!(
                    "MPIT_TUNER_NODE_DIR={v:?} is neither `off` nor an absolute path; using {DEFAULT_NODE_DIR}"
                ));
            }
        }
        if let Some(v) = lookup("MPIT_TUNER_LOG_LAYOUT") {
            use vocab::record::LogLayout;
            match v.trim().to_ascii_lowercase().as_str() {
                "" | "auto" => config.log_layout = None,
                "rank" => config.log_layout = Some(LogLayout::Rank),
                "node" => config.log_layout = Some(LogLayout::Node),
                _ => warnings.push(format!(
                    "MPIT_TUNER_LOG_LAYOUT={v:?} is not rank, node or auto; using auto"
                )),
            }
        }
        if let Some(v) = lookup("MPIT_TUNER_REFRESH") {
            match parse_duration(&v) {
                Ok(d) if d.is_zero() => config.refresh = None,
                Ok(d) => config.refresh = Some(d.max(MIN_INTERVAL)),
                Err(e) => warnings.push(format!("MPIT_TUNER_REFRESH={v:?}: {e}; using 5s")),
            }
        }
        if let Some(v) = lookup("MPIT_TUNER_FLUSH") {
            match parse_duration(&v) {
                Ok(d) if !d.is_zero() => config.flush = d,
                Ok(_) => warnings.push(format!(
                    "MPIT_TUNER_FLUSH={v:?} is not a positive duration; using 1s"
                )),
                Err(e) => warnings.push(format!("MPIT_TUNER_FLUSH={v:?}: {e}; using 1s")),
            }
        }
        config.collectives_off = lookup("MPIT_TUNER_COLLECTIVES").is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "off" | "0" | "false" | "no"
            )
        });
        config.store = store_from(&lookup, &mut warnings);
        config.collective_window = window_from(&lookup, &mut warnings);
        config.collectives = collectives_from(&lookup, config.collective_window, &mut warnings);
        (config, warnings)
    }

    /// Whether a PVAR of this name is selected for sampling.
    pub fn samples(&self, name: &str) -> bool {
        self.pvar_patterns.is_empty() || self.pvar_patterns.iter().any(|re| re.is_match(name))
    }
}

/// The tuning store's settings from this process's environment, with
/// what was wrong in them (for `mpit-tuner store` and `export --store`).
pub fn store_from_env() -> (StoreConfig, Vec<String>) {
    let mut warnings = Vec::new();
    let store = store_from(&|k: &str| std::env::var(k).ok(), &mut warnings);
    (store, warnings)
}

/// `MPIT_TUNER_STORE`, `MPIT_TUNER_SITE_STORE`, `MPIT_TUNER_STORE_MAX_AGE`.
fn store_from(lookup: &impl Fn(&str) -> Option<String>, warnings: &mut Vec<String>) -> StoreConfig {
    let mut store = StoreConfig {
        user: None,
        ..StoreConfig::default()
    };
    let off = |v: &str| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no" | "none"
        )
    };
    match lookup("MPIT_TUNER_STORE").map(|v| v.trim().to_string()) {
        Some(v) if off(&v) => {}
        Some(v) if !v.is_empty() => store.user = Some(PathBuf::from(v)),
        _ => {
            store.user = tuning_store::default_path();
            if store.user.is_none() {
                warnings.push(
                    "neither XDG_CACHE_HOME nor HOME is set: no tuning store (set MPIT_TUNER_STORE \
                     to a file to have one)"
                        .into(),
                );
            }
        }
    }
    if let Some(v) = lookup("MPIT_TUNER_SITE_STORE").map(|v| v.trim().to_string()) {
        if !v.is_empty() && !off(&v) {
            store.site = Some(PathBuf::from(v));
        }
    }
    if let Some(v) = lookup("MPIT_TUNER_STORE_MAX_AGE") {
        match v.trim().parse::<f64>() {
            Ok(days) if days.is_finite() && days >= 0.0 => store.max_age_days = days,
            _ => warnings.push(format!(
                "MPIT_TUNER_STORE_MAX_AGE={v:?} is not a number of days (0 or more); using {}",
                tuning_store::MAX_AGE_DAYS
            )),
        }
    }
    store
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_seconds<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// `MPIT_TUNER_COLLECTIVES`, with the window of
/// `MPIT_TUNER_COLLECTIVES_WINDOW` ([`window_from`]).
fn collectives_from(
    lookup: &impl Fn(&str) -> Option<String>,
    window: Option<u32>,
    warnings: &mut Vec<String>,
) -> Option<CollectiveConfig> {
    let v = lookup("MPIT_TUNER_COLLECTIVES")?;
    // A mode with the policy file's or the default settings; a list (in
    // mode `all`, as a list always was).
    let mut collectives = Vec::new();
    let mut measure = false;
    let mut mode = CollectiveMode::All;
    match v.trim().to_ascii_lowercase().as_str() {
        "" | "off" | "0" | "false" | "no" => return None,
        "safe" => mode = CollectiveMode::Safe,
        "tune" | "on" | "1" | "true" | "yes" | "all" => {}
        "measure" => measure = true,
        list => {
            // One word may be a misspelt mode; in a list, a collective.
            let one = !list.contains(',');
            for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match Collective::parse(item) {
                    Some(c) if !collectives.contains(&c) => collectives.push(c),
                    Some(_) => {}
                    None => warnings.push(format!(
                        "MPIT_TUNER_COLLECTIVES: `{item}` is not {}a collective the tuner knows ({}); ignored",
                        if one { "a mode (off, safe, all, measure) nor " } else { "" },
                        COLLECTIVES.map(|c| c.name()).join(", ")
                    )),
                }
            }
            if collectives.is_empty() {
                warnings.push(format!(
                    "MPIT_TUNER_COLLECTIVES={v:?} names no collective; collective tuning stays off"
                ));
                return None;
            }
        }
    }
    Some(CollectiveConfig {
        mode,
        collectives,
        window,
        measure,
    })
}

/// `MPIT_TUNER_COLLECTIVES_WINDOW`, a whole number of calls of at least 1.
fn window_from(
    lookup: &impl Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Option<u32> {
    let w = lookup("MPIT_TUNER_COLLECTIVES_WINDOW")?;
    match w.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Some(n),
        _ => {
            warnings.push(format!(
                "MPIT_TUNER_COLLECTIVES_WINDOW={w:?} is not a whole number of calls of at least 1; using the policy file's or {}",
                Params::default().window
            ));
            None
        }
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Some(true),
        "0" | "off" | "false" | "no" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> (Config, Vec<String>) {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_without_environment() {
        let (c, w) = config(&[]);
        assert!(c.enabled && w.is_empty());
        assert_eq!(c.interval, Duration::from_secs(1));
        assert!(c.samples("anything"));
    }

    #[test]
    fn good_values_are_taken() {
        let (c, w) = config(&[
            ("MPIT_TUNER_INTERVAL", "1ms"),
            (
                "MPIT_TUNER_PVARS",
                "pml_ob1_.*, mpool_hugepage_bytes_allocated",
            ),
            ("MPIT_TUNER_QUIET", "1"),
            ("MPIT_TUNER", "on"),
        ]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.interval, Duration::from_millis(1));
        assert!(c.samples("pml_ob1_unexpected_msgq_length"));
        assert!(c.samples("mpool_hugepage_bytes_allocated"));
        assert!(!c.samples("osc_rdma_put_retry_count"));
        assert!(c.quiet);
    }

    #[test]
    fn collective_tuning_modes() {
        let of = |v: &str| config(&[("MPIT_TUNER_COLLECTIVES", v)]);
        let (c, w) = of("safe");
        let cc = c.collectives.unwrap();
        assert_eq!(
            (cc.mode, cc.measure, w.len()),
            (CollectiveMode::Safe, false, 0)
        );
        assert_eq!(cc.describe(), "safe: all");
        for all in ["all", "tune", "on", "1"] {
            let cc = of(all).0.collectives.unwrap();
            assert_eq!(cc.mode, CollectiveMode::All, "{all}");
        }
        let cc = of("allreduce,bcast").0.collectives.unwrap();
        assert_eq!(cc.mode, CollectiveMode::All);
        assert_eq!(cc.describe(), "all: allreduce,bcast");
        assert_eq!(
            of("measure").0.collectives.unwrap().describe(),
            "measure: all"
        );
        let (c, _) = of("off");
        assert!(c.collectives.is_none() && c.collectives_off);
        assert!(config(&[]).0.collectives.is_none());
        let (c, w) = of("sfe");
        assert!(c.collectives.is_none());
        assert!(
            w.iter()
                .any(|w| w.contains("`sfe` is not a mode (off, safe, all, measure)")),
            "{w:?}"
        );
    }

    #[test]
    fn the_node_dir_is_a_path_or_off() {
        let (c, w) = config(&[]);
        assert_eq!(c.node_dir.as_deref(), Some(Path::new("/dev/shm")));
        assert!(w.is_empty());
        let (c, w) = config(&[("MPIT_TUNER_NODE_DIR", "/tmp/node")]);
        assert_eq!(c.node_dir.as_deref(), Some(Path::new("/tmp/node")));
        assert!(w.is_empty());
        let (c, _) = config(&[("MPIT_TUNER_NODE_DIR", "OFF")]);
        assert_eq!(c.node_dir, None);
        let (c, w) = config(&[("MPIT_TUNER_NODE_DIR", "shm")]);
        assert_eq!(c.node_dir.as_deref(), Some(Path::new("/dev/shm")));
        assert!(w[0].contains("MPIT_TUNER_NODE_DIR=\"shm\""), "{w:?}");
    }

    #[test]
    fn the_log_layout_is_rank_node_or_auto() {
        use vocab::record::LogLayout;
        assert_eq!(config(&[]).0.log_layout, None);
        let (c, w) = config(&[("MPIT_TUNER_LOG_LAYOUT", "Node")]);
        assert_eq!((c.log_layout, w.len()), (Some(LogLayout::Node), 0));
        let (c, w) = config(&[("MPIT_TUNER_LOG_LAYOUT", "rank")]);
        assert_eq!((c.log_layout, w.len()), (Some(LogLayout::Rank), 0));
        let (c, w) = config(&[("MPIT_TUNER_LOG_LAYOUT", "auto")]);
        assert_eq!((c.log_layout, w.len()), (None, 0));
        let (c, w) = config(&[("MPIT_TUNER_LOG_LAYOUT", "per-host")]);
        assert_eq!(c.log_layout, None);
        assert!(w[0].contains("MPIT_TUNER_LOG_LAYOUT=\"per-host\""), "{w:?}");
    }

    #[test]
    fn bad_values_warn_by_name_and_fall_back() {
        let (c, w) = config(&[("MPIT_TUNER_INTERVAL", "soon"), ("MPIT_TUNER_PVARS", "(")]);
        assert_eq!(c.interval, DEFAULT_INTERVAL);
        assert!(w[0].contains("MPIT_TUNER_INTERVAL=\"soon\""), "{w:?}");
        assert!(w.iter().any(|m| m.contains("MPIT_TUNER_PVARS")));
        assert!(c.samples("anything"));
        let (c, w) = config(&[("MPIT_TUNER_INTERVAL", "10us")]);
        assert_eq!(c.interval, DEFAULT_INTERVAL);
        assert!(w[0].contains("1ms minimum"));
        let (c, _) = config(&[("MPIT_TUNER", "off")]);
        assert!(!c.enabled);
    }

    #[test]
    fn durations_use_the_policies_grammar() {
        let (c, w) = config(&[
            ("MPIT_TUNER_INTERVAL", "250ms"),
            ("MPIT_TUNER_REFRESH", "0"),
            ("MPIT_TUNER_FLUSH", "2s"),
        ]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.interval, Duration::from_millis(250));
        assert_eq!(c.refresh, None);
        assert_eq!(c.flush, Duration::from_secs(2));
        // A bare number other than 0 has no unit: refused, with a hint.
        let (c, w) = config(&[("MPIT_TUNER_INTERVAL", "10"), ("MPIT_TUNER_FLUSH", "0")]);
        assert_eq!(c.interval, DEFAULT_INTERVAL);
        assert!(w[0].contains("write \"10s\""), "{w:?}");
        assert!(w[1].contains("not a positive duration"), "{w:?}");
    }
}
