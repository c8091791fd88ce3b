//! End-of-run recommendations, each with its evidence and the exact setting
//! to change for the library in use (MPI Advisor's single-run advice, TAU's
//! SHArP recommendation).
//!
//! Rules, all computed on rank 0 from the cross-rank [`Summary`]:
//! - **eager threshold**: many point-to-point messages are just above the
//!   library's eager limit, so they wait for a rendezvous instead of
//!   overlapping with computation;
//! - **small allreduce**: frequent small allreduces take most of the time
//!   spent in MPI: hardware offload (SHArP, HCOLL) or fewer, larger
//!   reductions;
//! - **unexpected messages**: Open MPI's unexpected-message queue grew long;
//! - **policies**: a policy that kept firing, or kept being refused.

use crate::finalize::Summary;
use crate::sample::toolmetrics::{bucket_floor, BUCKETS};
use mpit::Library;

pub use vocab::summary::Recommendation;

/// What the rules know besides the summary.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The library family.
    pub library: Option<Library>,
    /// The eager limit of shared memory in bytes and where it comes from
    /// (`btl_vader_eager_limit`), if known.
    pub eager_limit: Option<(u64, String)>,
    /// Whether the library has an HCOLL component or CVAR.
    pub has_hcoll: bool,
}

/// Fraction of point-to-point messages above the eager limit that triggers
/// the eager advice.
pub const EAGER_SHARE: f64 = 0.2;
/// Share of MPI time in allreduce that triggers the offload advice.
pub const ALLREDUCE_SHARE: f64 = 0.5;
/// At least this many allreduces (per rank, mean) for the offload advice.
pub const ALLREDUCE_CALLS: f64 = 1000.0;
/// Allreduces no larger than this are "small".
pub const SMALL_ALLREDUCE: f64 = 1024.0;
/// Unexpected-queue length that triggers the advice.
pub const UNEXPECTED_QUEUE: f64 = 64.0;

/// A rule: what it finds in the summary, pushed onto `out`.
type Rule = fn(&Summary, &Context, &mut Vec<Recommendation>);

/// Every rule, in the order their advice is given.
const RULES: &[Rule] = &[eager_threshold, small_allreduce, unexpected_queue, policies];

/// Applies every rule.
pub fn recommend(summary: &Summary, ctx: &Context) -> Vec<Recommendation> {
    let mut out = Vec::new();
    for rule in RULES {
        rule(summary, ctx, &mut out);
    }
    out
}

fn library(ctx: &Context) -> Library {
    ctx.library.unwrap_or(Library::Unknown)
}

/// The cross-rank statistics of quantity `name`.
fn stat<'a>(summary: &'a Summary, name: &str) -> Option<&'a vocab::summary::VariableStats> {
    summary.variables.iter().find(|v| v.name == name)
}

/// Eager threshold versus the point-to-point sizes actually used.
fn eager_threshold(summary: &Summary, ctx: &Context, out: &mut Vec<Recommendation>) {
    let library = library(ctx);
    let mut p2p = [0u64; BUCKETS];
    for family in ["send", "isend", "sendrecv"] {
        if let Some(h) = summary.size_histograms.get(family) {
            for (a, b) in p2p.iter_mut().zip(h) {
                *a += b;
            }
        }
    }
    let total: u64 = p2p.iter().sum();
    let (limit, limit_source) = match (&ctx.eager_limit, library) {
        (Some((l, s)), _) => (*l, s.clone()),
        (None, Library::Mpich) => (
            8192,
            "UCX_RNDV_THRESH (auto; about 8 KiB on shared memory)".into(),
        ),
        // MVAPICH2 2.3.7 chooses its default by processor and by whether
        // CMA is on (src/mpid/ch3/channels/mrail/src/gen2/ibv_param.c):
        // 8 KiB with CMA, 32 or 64 KiB without; the smallest is assumed.
        (None, Library::Mvapich2) => (
            8192,
            "MV2_SMP_EAGERSIZE unset: 8 KiB assumed, MVAPICH2's default is 8-64 KiB by processor"
                .into(),
        ),
        (None, Library::OpenMpi) => (4096, "btl_vader_eager_limit (default 4 KiB)".into()),
        _ => (0, String::new()),
    };
    if total > 0 && limit > 0 {
        // Buckets wholly above the limit.
        let above: u64 = p2p
            .iter()
            .enumerate()
            .filter(|(b, _)| bucket_floor(*b) >= limit)
            .map(|(_, n)| n)
            .sum();
        let share = above as f64 / total as f64;
        let p90_bucket = quantile_bucket(&p2p, 0.9);
        // The smallest power of two above 90% of the messages.
        let wanted = bucket_floor(p90_bucket + 1).max(limit * 2);
        if share >= EAGER_SHARE && wanted <= 4 << 20 {
            let setting = match library {
                Library::OpenMpi => format!("OMPI_MCA_btl_vader_eager_limit={wanted} (environment, read at MPI_Init; the CVAR is read-only)"),
                // MVAPICH2 fails MPI_Init when the eager size (plus one)
                // exceeds half of MV2_SMP_QUEUE_LENGTH (ch3_smp_progress.c),
                // whose default depends on the processor (32 KiB to 4 MiB,
                // ibv_param.c), so the queue length comes with it.
                Library::Mvapich2 => format!(
                    "MV2_SMP_EAGERSIZE={wanted} MV2_SMP_QUEUE_LENGTH={} (shared memory; that queue length or more: MVAPICH2 refuses to start with an eager size of half the queue length or more, and its default length depends on the processor) and MV2_IBA_EAGER_THRESHOLD={wanted} or the pre-init CVAR MPIR_CVAR_IBA_EAGER_THRESHOLD (network)",
                    4 * wanted
                ),
                Library::Mpich => format!("UCX_RNDV_THRESH={wanted} (environment, read at MPI_Init)"),
                _ => format!("the library's eager threshold = {wanted}"),
            };
            // Measured with benches/eager-experiment.sh
            // (BENCHMARKS.md#eager-threshold-experiment-thesis-table-5):
            // within one node, Open MPI's vader sends large messages with a
            // single-copy rendezvous that is already cheap, and eager gained
            // nothing there; across nodes the thesis' gain applies.
            let caveat = match library {
                Library::OpenMpi => "; within one node vader's single-copy rendezvous may already be as fast (no gain measured on shared memory here), so check the runtime before and after",
                _ => "",
            };
            out.push(Recommendation {
                id: "eager-threshold".into(),
                advice: format!(
                    "raise the eager threshold to {wanted} bytes so that these messages are sent eagerly and overlap with computation (costs {}x more buffer memory per peer){caveat}",
                    (wanted / limit.max(1)).max(1)
                ),
                evidence: format!(
                    "{above} of {total} point-to-point messages ({:.0}%) are at least the eager limit of {limit} bytes ({limit_source}); 90% are under {} bytes",
                    share * 100.0,
                    bucket_floor(p90_bucket + 1)
                ),
                setting,
            });
        }
    }
}

/// Small, frequent allreduces dominating MPI time.
fn small_allreduce(summary: &Summary, ctx: &Context, out: &mut Vec<Recommendation>) {
    let library = library(ctx);
    let mean = |name: &str| stat(summary, name).map(|v| v.mean);
    if let (Some(calls), Some(ar_time), Some(mpi_time), Some(p50)) = (
        mean("tool.allreduce.calls"),
        mean("tool.allreduce.time"),
        mean("tool.mpi.time"),
        mean("tool.allreduce.bytes_p50"),
    ) {
        let share = if mpi_time > 0.0 {
            ar_time / mpi_time
        } else {
            0.0
        };
        if calls >= ALLREDUCE_CALLS && share >= ALLREDUCE_SHARE && p50 <= SMALL_ALLREDUCE {
            let setting = match library {
                Library::Mvapich2 => "MV2_ENABLE_SHARP=1 (or the CVAR MPIR_CVAR_ENABLE_SHARP in phase pre-init) on a SHArP-capable InfiniBand fabric".to_string(),
                Library::OpenMpi if ctx.has_hcoll => "OMPI_MCA_coll_hcoll_enable=1 with HCOLL_ENABLE_SHARP=1 (Mellanox HCOLL/SHArP)".to_string(),
                Library::OpenMpi => "this Open MPI has no hcoll component: use a build with HCOLL or UCC (OMPI_MCA_coll_ucc_enable=1) for hardware offload".to_string(),
                Library::Mpich if ctx.has_hcoll => "MPIR_CVAR_ENABLE_HCOLL=1 (MPICH built with HCOLL) with HCOLL_ENABLE_SHARP=1".to_string(),
                _ => "hardware collective offload (SHArP) if the fabric offers it".to_string(),
            };
            out.push(Recommendation {
                id: "small-allreduce".into(),
                advice: "small, frequent allreduces dominate the time in MPI: offload them to the network (SHArP) or combine several into one larger reduction".into(),
                evidence: format!(
                    "{calls:.0} allreduces per rank (median size {p50:.0} bytes) take {:.0}% of the time spent in MPI calls ({ar_time:.3} s of {mpi_time:.3} s per rank)",
                    share * 100.0
                ),
                setting,
            });
        }
    }
}

/// Unexpected-message queue growth (Open MPI).
fn unexpected_queue(summary: &Summary, _ctx: &Context, out: &mut Vec<Recommendation>) {
    let max = |name: &str| stat(summary, name).map(|v| (v.max, v.max_rank));
    if let Some((longest, rank)) = max("pml_ob1_unexpected_msgq_length@world:max") {
        if longest >= UNEXPECTED_QUEUE {
            out.push(Recommendation {
                id: "unexpected-queue".into(),
                advice: "messages arrive before their receives are posted: post receives earlier (MPI_Irecv before the matching sends), or keep large messages out of the eager path so they wait for their receive".into(),
                evidence: format!(
                    "rank {rank}'s unexpected-message queues held up to {longest:.0} messages (pml_ob1_unexpected_msgq_length)"
                ),
                setting: "OMPI_MCA_btl_vader_eager_limit lower than the sizes that pile up; or the policy unexpected-queue-watch".into(),
            });
        }
    }
}

/// Policies that kept firing or kept being refused.
fn policies(summary: &Summary, _ctx: &Context, out: &mut Vec<Recommendation>) {
    for v in &summary.variables {
        if let Some(policy) = v
            .name
            .strip_prefix("policy.")
            .and_then(|n| n.strip_suffix(".refused"))
        {
            if v.max >= 3.0 {
                out.push(Recommendation {
                    id: "policy-refused".into(),
                    advice: format!("policy {policy} keeps asking for writes the library refuses: move it to phase pre-init or init, or remove it"),
                    evidence: format!("{:.0} refused writes on rank {} ({:.1} per rank on average)", v.max, v.max_rank, v.mean),
                    setting: format!("policy {policy}: phase / max_writes"),
                });
            }
        }
        if let Some(policy) = v
            .name
            .strip_prefix("policy.")
            .and_then(|n| n.strip_suffix(".writes"))
        {
            if v.max >= 20.0 {
                out.push(Recommendation {
                    id: "policy-churn".into(),
                    advice: format!("policy {policy} kept changing its CVARs: add a cooldown or hysteresis, or a max_writes"),
                    evidence: format!("{:.0} writes on rank {} ({:.1} per rank on average)", v.max, v.max_rank, v.mean),
                    setting: format!("policy {policy}: cooldown = \"10s\", hysteresis = 3"),
                });
            }
        }
    }
}

/// The bucket that holds quantile `q` of a histogram.
fn quantile_bucket(hist: &[u64], q: f64) -> usize {
    let total: u64 = hist.iter().sum();
    let target = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (b, n) in hist.iter().enumerate() {
        seen += n;
        if seen >= target {
            return b;
        }
    }
    hist.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finalize::VariableStats;
    use crate::sample::toolmetrics::bucket;

    fn stat(name: &str, mean: f64, max: f64) -> VariableStats {
        VariableStats {
            name: name.into(),
            kind: "total".into(),
            ranks: 4,
            min: mean,
            min_rank: 0,
            max,
            max_rank: 1,
            mean,
            stddev: 0.0,
            histogram: vec![4],
        }
    }

    fn with_sends(size: u64, n: u64) -> Summary {
        let mut s = Summary::default();
        let mut h = vec![0u64; BUCKETS];
        h[bucket(size)] = n;
        s.size_histograms.insert("send".into(), h);
        s
    }

    #[test]
    fn eager_advice_fires_above_the_limit_only() {
        let ctx = Context {
            library: Some(Library::OpenMpi),
            eager_limit: Some((4096, "btl_vader_eager_limit".into())),
            has_hcoll: false,
        };
        let r = recommend(&with_sends(65536, 2000), &ctx);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].id, "eager-threshold");
        assert!(
            r[0].setting
                .starts_with("OMPI_MCA_btl_vader_eager_limit=131072"),
            "{}",
            r[0].setting
        );
        assert!(
            r[0].advice.contains("single-copy rendezvous"),
            "{}",
            r[0].advice
        );
        assert!(recommend(&with_sends(1024, 2000), &ctx).is_empty());
        let mpich = Context {
            library: Some(Library::Mpich),
            ..Context::default()
        };
        let r = recommend(&with_sends(32768, 100), &mpich);
        assert!(r[0].setting.starts_with("UCX_RNDV_THRESH=65536"));
        assert!(!r[0].advice.contains("single-copy"), "{}", r[0].advice);
    }

    /// MVAPICH2 refuses to start with an eager size of half its queue
    /// length or more, and the default length depends on the processor, so
    /// the queue length (four times the eager size) comes with it.
    #[test]
    fn mvapich2_eager_advice_grows_the_queue_with_the_eager_size() {
        let ctx = Context {
            library: Some(Library::Mvapich2),
            ..Context::default()
        };
        let r = recommend(&with_sends(65536, 2000), &ctx);
        assert!(
            r[0].setting
                .starts_with("MV2_SMP_EAGERSIZE=131072 MV2_SMP_QUEUE_LENGTH=524288 "),
            "{}",
            r[0].setting
        );
        let r = recommend(&with_sends(16384, 2000), &ctx);
        assert!(
            r[0].setting
                .starts_with("MV2_SMP_EAGERSIZE=32768 MV2_SMP_QUEUE_LENGTH=131072 "),
            "{}",
            r[0].setting
        );
    }

    #[test]
    fn allreduce_advice_needs_many_small_and_dominant() {
        let mut s = Summary {
            variables: vec![
                stat("tool.allreduce.calls", 5000.0, 5000.0),
                stat("tool.allreduce.time", 0.8, 0.9),
                stat("tool.mpi.time", 1.0, 1.1),
                stat("tool.allreduce.bytes_p50", 8.0, 8.0),
            ],
            ..Summary::default()
        };
        let ctx = Context {
            library: Some(Library::Mvapich2),
            ..Context::default()
        };
        let r = recommend(&s, &ctx);
        assert_eq!(r[0].id, "small-allreduce");
        assert!(r[0].setting.contains("MV2_ENABLE_SHARP=1"));
        s.variables[1] = stat("tool.allreduce.time", 0.1, 0.1);
        assert!(recommend(&s, &ctx).is_empty());
    }

    #[test]
    fn neutral_runs_get_no_advice() {
        assert!(recommend(&Summary::default(), &Context::default()).is_empty());
    }
}
