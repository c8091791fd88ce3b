//! 3DStencil: a synthetic 3-D stencil with a non-blocking halo exchange
//! overlapped with computation, after the 3DStencil application of the MPI_T
//! thesis (shared/seeds/000_*.txt, chapter III).
//!
//! Every rank owns an `n x n x n` block of a periodic 3-D grid (weak scaling:
//! the global grid grows with the rank count), laid out on a 3-D Cartesian
//! process grid. Each iteration:
//!
//! 1. packs its 6 faces into 6 messages of exactly `--msg-bytes` bytes,
//! 2. posts 6 `MPI_Irecv` and 6 `MPI_Isend` (one per neighbour),
//! 3. computes: the Jacobi update of the interior points (those that need no
//!    halo) plus `--compute-us` microseconds of calibrated busy work,
//! 4. waits for all 12 requests (`MPI_Waitall`),
//! 5. unpacks the halos and updates the boundary points.
//!
//! Output contract (rank 0 only): every line is deterministic (a function of
//! the arguments and the rank count only) except the lines starting with
//! `time:`, which carry the timings and may be dropped when comparing runs.
//!
//! Overlap: before the main loop, `BASELINE_ITERS` exchanges run with no
//! computation; their mean duration is `t_comm`, the pure communication time.
//! In the main loop `t_wait` is the mean time spent in `MPI_Waitall` after the
//! computation. Per rank, `overlap = 1 - t_wait / t_comm`, clamped to [0, 1]:
//! 100 % when the messages have all arrived by the time the computation ends
//! (nothing is left to wait for), 0 % when the wait is as long as the
//! communication alone, i.e. no communication progressed during the compute.
//!
//! The `time:` line (rank 0) holds, in this order:
//! - `runtime_s`: main loop wall time, max over ranks (baseline excluded);
//! - `comm_only_us`: `t_comm`, mean over ranks;
//! - `compute_us`: measured computation per iteration (interior update plus
//!   busy work), mean over ranks;
//! - `wait_us`: `t_wait`, mean over ranks;
//! - `overlap_pct`, `overlap_min_pct`: overlap, mean and minimum over ranks;
//! - `spin_us`: the busy work asked for per iteration (`--compute-us`, or
//!   the measured value with `auto`).
//!
//! The busy work is a dependent chain of floating-point operations whose
//! length is calibrated once per rank at start-up (best of 3 trials): a fixed
//! amount of work, not a wait on the clock, so it takes longer when the rank
//! shares its core. It never touches the field: the result does not depend
//! on it, on the timing, or on anything preloaded into the process.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::point_to_point::Status;
use mpi::topology::CartesianCommunicator;
use mpi::traits::*;

/// Exchanges without computation used to measure the pure communication time
/// (after `WARMUP_ITERS` untimed ones).
const BASELINE_ITERS: usize = 10;
const WARMUP_ITERS: usize = 2;
/// Weight of the 7-point Jacobi average.
const W: f64 = 1.0 / 7.0;

const USAGE: &str = "\
usage: stencil3d [--iters N] [--msg-bytes B] [--grid N] [--compute-us U|auto] [--verify]

  --iters N         iterations of the main loop (default 50)
  --msg-bytes B     bytes of every halo message (default 32768); the local
                    block edge is floor(sqrt(B / 8)) points unless --grid is
                    given, and a face that is smaller than B is padded to B
  --grid N          local block edge in points (N x N x N per rank); requires
                    N * N * 8 <= B when --msg-bytes is also given, otherwise
                    sets B = N * N * 8
  --compute-us U    busy computation per iteration in microseconds, on top of
                    the interior stencil update, done by a loop calibrated at
                    start-up (default 200); `auto` uses the measured pure
                    communication time (max over ranks), as the thesis does
  --verify          rank 0 gathers the field and checks it bit for bit against
                    a serial computation of the same global grid
  --help            this text

Rank 0 prints deterministic lines, and timing on lines starting with `time:`.";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Compute {
    Micros(f64),
    Auto,
}

#[derive(Debug, Clone)]
struct Options {
    iters: usize,
    msg_bytes: usize,
    edge: usize,
    compute: Compute,
    verify: bool,
}

enum Parsed {
    Run(Options),
    Help,
}

fn parse_args(args: &[String]) -> Result<Parsed, String> {
    let mut iters = 50usize;
    let mut msg_bytes: Option<usize> = None;
    let mut grid: Option<usize> = None;
    let mut compute = Compute::Micros(200.0);
    let mut verify = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{name} needs a value")),
            }
        };
        match name {
            "--iters" => iters = parse_num(name, &value(name)?)?,
            "--msg-bytes" => msg_bytes = Some(parse_num(name, &value(name)?)?),
            "--grid" => grid = Some(parse_num(name, &value(name)?)?),
            "--compute-us" => {
                let v = value(name)?;
                compute = if v == "auto" {
                    Compute::Auto
                } else {
                    match v.parse::<f64>() {
                        Ok(x) if x.is_finite() && x >= 0.0 => Compute::Micros(x),
                        _ => {
                            return Err(format!(
                                "--compute-us: `{v}` is not a number of microseconds >= 0 or `auto`"
                            ))
                        }
                    }
                }
            }
            "--verify" => verify = true,
            "--help" | "-h" => return Ok(Parsed::Help),
            _ => return Err(format!("unknown argument `{arg}`")),
        }
    }
    if iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    let (edge, msg_bytes) = match (grid, msg_bytes) {
        (Some(0), _) => return Err("--grid must be at least 1".into()),
        (Some(n), None) => (n, n * n * 8),
        (Some(n), Some(b)) if n * n * 8 > b => {
            return Err(format!(
                "--grid {n} needs faces of {} bytes, more than --msg-bytes {b}",
                n * n * 8
            ))
        }
        (Some(n), Some(b)) => (n, b),
        (None, b) => {
            let b = b.unwrap_or(32768);
            if b < 8 {
                return Err(format!("--msg-bytes must be at least 8 (got {b})"));
            }
            (isqrt(b / 8), b)
        }
    };
    if edge > 1024 {
        return Err(format!("local block edge {edge} is too large (max 1024)"));
    }
    if msg_bytes > i32::MAX as usize {
        return Err(format!("--msg-bytes {msg_bytes} is too large"));
    }
    Ok(Parsed::Run(Options {
        iters,
        msg_bytes,
        edge,
        compute,
        verify,
    }))
}

/// Integer square root (floor).
fn isqrt(x: usize) -> usize {
    let mut r = (x as f64).sqrt() as usize;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

fn parse_num(name: &str, v: &str) -> Result<usize, String> {
    v.parse::<usize>()
        .map_err(|_| format!("{name}: `{v}` is not a non-negative integer"))
}

/// Balanced factorisation of `n` ranks over 3 dimensions, in non-increasing
/// order, like `MPI_Dims_create(n, 3, {0, 0, 0})`.
fn dims_create(n: usize) -> [usize; 3] {
    let mut primes = Vec::new();
    let mut m = n;
    let mut p = 2;
    while p * p <= m {
        while m % p == 0 {
            primes.push(p);
            m /= p;
        }
        p += 1;
    }
    if m > 1 {
        primes.push(m);
    }
    let mut dims = [1usize; 3];
    // Largest factors first, each onto the currently smallest dimension.
    for &f in primes.iter().rev() {
        let smallest = (0..3).min_by_key(|&i| dims[i]).unwrap_or(0);
        dims[smallest] *= f;
    }
    dims.sort_unstable_by(|a, b| b.cmp(a));
    dims
}

/// Initial value of the global point (x, y, z): deterministic, in [0, 1).
fn initial_value(x: usize, y: usize, z: usize) -> f64 {
    ((x * 7 + y * 13 + z * 29) % 64) as f64 / 64.0 + 1.0 / 1024.0
}

/// Order-independent hash of one point: combined across points and ranks by
/// wrapping addition, so it does not depend on the decomposition.
fn point_hash(global_index: u64, value: f64) -> u64 {
    let mut z = global_index
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(value.to_bits());
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A local block of `n^3` points with one ghost layer on every side.
struct Block {
    n: usize,
    data: Vec<f64>,
}

impl Block {
    fn new(n: usize) -> Self {
        Block {
            n,
            data: vec![0.0; (n + 2) * (n + 2) * (n + 2)],
        }
    }

    #[inline(always)]
    fn idx(&self, i: usize, j: usize, k: usize) -> usize {
        let m = self.n + 2;
        (i * m + j) * m + k
    }
}

/// The 7-point Jacobi update of point (i, j, k), with a fixed order of the
/// additions so that every decomposition computes the same bits.
#[inline(always)]
fn update_point(cur: &Block, i: usize, j: usize, k: usize) -> f64 {
    let d = &cur.data;
    let c = d[cur.idx(i, j, k)];
    let xm = d[cur.idx(i - 1, j, k)];
    let xp = d[cur.idx(i + 1, j, k)];
    let ym = d[cur.idx(i, j - 1, k)];
    let yp = d[cur.idx(i, j + 1, k)];
    let zm = d[cur.idx(i, j, k - 1)];
    let zp = d[cur.idx(i, j, k + 1)];
    (c + xm + xp + ym + yp + zm + zp) * W
}

/// Points whose update needs no halo: indices 2..=n-1 in every dimension.
fn update_interior(cur: &Block, next: &mut Block) {
    let n = cur.n;
    for i in 2..n {
        for j in 2..n {
            for k in 2..n {
                let v = update_point(cur, i, j, k);
                let at = next.idx(i, j, k);
                next.data[at] = v;
            }
        }
    }
}

/// Points next to a halo: index 1 or n in some dimension.
fn update_boundary(cur: &Block, next: &mut Block) {
    let n = cur.n;
    for i in 1..=n {
        for j in 1..=n {
            let full = i == 1 || i == n || j == 1 || j == n;
            let mut k = 1;
            while k <= n {
                let v = update_point(cur, i, j, k);
                let at = next.idx(i, j, k);
                next.data[at] = v;
                k = if full || k == n { k + 1 } else { n };
            }
        }
    }
}

/// Direction of travel of a message: `2 * axis` towards the minus neighbour,
/// `2 * axis + 1` towards the plus neighbour. Also used as the tag.
fn face_plane(dir: usize, n: usize, ghost: bool) -> usize {
    let plus = dir % 2 == 1;
    match (plus, ghost) {
        (false, false) => 1,    // my minus face, sent to the minus neighbour
        (true, false) => n,     // my plus face, sent to the plus neighbour
        (false, true) => n + 1, // data travelling minus arrives in my plus ghost
        (true, true) => 0,      // data travelling plus arrives in my minus ghost
    }
}

/// Visits the n x n points of the plane `plane` orthogonal to `axis`, in a
/// fixed order, with their index into the block.
fn for_plane(b: &Block, axis: usize, plane: usize, mut f: impl FnMut(usize)) {
    let n = b.n;
    for u in 1..=n {
        for v in 1..=n {
            let at = match axis {
                0 => b.idx(plane, u, v),
                1 => b.idx(u, plane, v),
                _ => b.idx(u, v, plane),
            };
            f(at);
        }
    }
}

fn pack(b: &Block, dir: usize, buf: &mut [u8]) {
    let plane = face_plane(dir, b.n, false);
    let mut off = 0;
    for_plane(b, dir / 2, plane, |at| {
        buf[off..off + 8].copy_from_slice(&b.data[at].to_le_bytes());
        off += 8;
    });
}

fn unpack(b: &mut Block, dir: usize, buf: &[u8]) {
    let plane = face_plane(dir, b.n, true);
    let mut at_list = Vec::with_capacity(b.n * b.n);
    for_plane(b, dir / 2, plane, |at| at_list.push(at));
    for (p, at) in at_list.into_iter().enumerate() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&buf[p * 8..p * 8 + 8]);
        b.data[at] = f64::from_le_bytes(bytes);
    }
}

/// Busy work: a dependent chain of floating-point operations.
#[inline(never)]
fn spin(units: u64) -> f64 {
    let mut x = black_box(1.0f64);
    for _ in 0..units {
        x = x * 0.999_999_9 + 1e-7;
    }
    black_box(x)
}

/// Spin units per microsecond on this rank: the best of a few trials, each
/// doubling the amount of work until it lasts at least 2 ms.
fn calibrate() -> f64 {
    let mut best = 0.0f64;
    for _ in 0..3 {
        let mut units = 1u64 << 10;
        loop {
            let t = Instant::now();
            spin(units);
            let us = t.elapsed().as_secs_f64() * 1e6;
            if us >= 2000.0 {
                best = best.max(units as f64 / us);
                break;
            }
            units *= 2;
        }
    }
    best
}

struct Halo<'c> {
    comm: &'c CartesianCommunicator,
    /// Rank of the neighbour a message travelling in direction `dir` goes to
    /// (`to[dir]`) and the one it comes from (`from[dir]`).
    to: [i32; 6],
    from: [i32; 6],
    send: Vec<Vec<u8>>,
    recv: Vec<Vec<u8>>,
}

impl Halo<'_> {
    /// One exchange: pack, post, run `work` while the messages travel, wait,
    /// unpack. Returns the seconds spent in `work` and in the wait.
    fn exchange(&mut self, cur: &mut Block, work: impl FnOnce(&Block)) -> (f64, f64) {
        for dir in 0..6 {
            pack(cur, dir, &mut self.send[dir]);
        }
        let comm = self.comm;
        let (to, from) = (self.to, self.from);
        let send = &self.send;
        let recv = &mut self.recv;
        let cur_ref: &Block = cur;
        let times = mpi::request::multiple_scope(12, |scope, coll| {
            for (dir, buf) in recv.iter_mut().enumerate() {
                let req = comm
                    .process_at_rank(from[dir])
                    .immediate_receive_into_with_tag(scope, &mut buf[..], dir as i32);
                coll.add(req);
            }
            for (dir, buf) in send.iter().enumerate() {
                let req = comm.process_at_rank(to[dir]).immediate_send_with_tag(
                    scope,
                    &buf[..],
                    dir as i32,
                );
                coll.add(req);
            }
            let t0 = Instant::now();
            work(cur_ref);
            let t1 = Instant::now();
            let mut done: Vec<(usize, Status, &[u8])> = Vec::with_capacity(12);
            coll.wait_all(&mut done);
            let t2 = Instant::now();
            ((t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64())
        });
        for dir in 0..6 {
            unpack(cur, dir, &self.recv[dir]);
        }
        times
    }
}

fn main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("stencil3d: MPI was already initialised");
        return ExitCode::FAILURE;
    };
    let code = run(&universe);
    drop(universe);
    code
}

fn run(universe: &mpi::environment::Universe) -> ExitCode {
    let world = universe.world();
    let size = world.size() as usize;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse_args(&args) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Help) => {
            if world.rank() == 0 {
                println!("{USAGE}");
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            if world.rank() == 0 {
                eprintln!("stencil3d: {e}\n{USAGE}");
            }
            return ExitCode::from(2);
        }
    };

    let dims = dims_create(size);
    let dims_i32 = dims.map(|d| d as i32);
    let Some(cart) = world.create_cartesian_communicator(&dims_i32, &[true; 3], false) else {
        eprintln!("stencil3d: MPI_Cart_create gave no communicator");
        return ExitCode::FAILURE;
    };
    let rank = cart.rank();
    let coords = cart.rank_to_coordinates(rank);
    let n = opts.edge;

    let mut to = [0i32; 6];
    let mut from = [0i32; 6];
    for axis in 0..3 {
        let (minus, plus) = cart.shift(axis as i32, 1);
        let (minus, plus) = (minus.unwrap_or(rank), plus.unwrap_or(rank));
        to[2 * axis] = minus;
        from[2 * axis] = plus;
        to[2 * axis + 1] = plus;
        from[2 * axis + 1] = minus;
    }

    let global = [dims[0] * n, dims[1] * n, dims[2] * n];
    let origin = [
        coords[0] as usize * n,
        coords[1] as usize * n,
        coords[2] as usize * n,
    ];
    let mut cur = Block::new(n);
    let mut next = Block::new(n);
    for i in 1..=n {
        for j in 1..=n {
            for k in 1..=n {
                let at = cur.idx(i, j, k);
                cur.data[at] =
                    initial_value(origin[0] + i - 1, origin[1] + j - 1, origin[2] + k - 1);
            }
        }
    }
    let sum0 = global_sum(&cart, local_sum(&cur));

    if rank == 0 {
        let compute = match opts.compute {
            Compute::Micros(u) => format!("{u}"),
            Compute::Auto => "auto".into(),
        };
        println!(
            "stencil3d: ranks={size} dims={}x{}x{} local={n}x{n}x{n} global={}x{}x{} \
             msg_bytes={} iters={} compute_us={compute}",
            dims[0], dims[1], dims[2], global[0], global[1], global[2], opts.msg_bytes, opts.iters
        );
    }

    let mut halo = Halo {
        comm: &cart,
        to,
        from,
        send: vec![vec![0u8; opts.msg_bytes]; 6],
        recv: vec![vec![0u8; opts.msg_bytes]; 6],
    };

    // Pure communication time. The exchanges only rewrite the ghosts with
    // the current faces, which the main loop rewrites again: no effect on
    // the result.
    cart.barrier();
    for _ in 0..WARMUP_ITERS {
        halo.exchange(&mut cur, |_| {});
    }
    cart.barrier();
    let t = Instant::now();
    for _ in 0..BASELINE_ITERS {
        halo.exchange(&mut cur, |_| {});
    }
    let t_comm = t.elapsed().as_secs_f64() / BASELINE_ITERS as f64;

    let units_per_us = calibrate();
    let compute_us = match opts.compute {
        Compute::Micros(u) => u,
        Compute::Auto => {
            let mut max = 0.0f64;
            cart.all_reduce_into(&(t_comm * 1e6), &mut max, SystemOperation::max());
            max
        }
    };
    let spin_units = (compute_us * units_per_us).round() as u64;

    cart.barrier();
    let start = Instant::now();
    let (mut t_work, mut t_wait) = (0.0f64, 0.0f64);
    for _ in 0..opts.iters {
        let next_ref = &mut next;
        let (w, x) = halo.exchange(&mut cur, |c| {
            update_interior(c, next_ref);
            spin(spin_units);
        });
        t_work += w;
        t_wait += x;
        update_boundary(&cur, &mut next);
        std::mem::swap(&mut cur, &mut next);
    }
    let runtime = start.elapsed().as_secs_f64();

    // Deterministic results: per-rank sums and hashes gathered to rank 0 and
    // combined there in rank order (a reduction could change the order of
    // the floating-point additions from one library or algorithm to another).
    let sum = global_sum(&cart, local_sum(&cur));
    let hash = local_hash(&cur, origin, global);
    let root = cart.process_at_rank(0);
    let iters = opts.iters as f64;
    let overlap = if t_comm > 0.0 {
        (1.0 - (t_wait / iters) / t_comm).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let timing = [
        runtime,
        t_comm * 1e6,
        t_work / iters * 1e6,
        t_wait / iters * 1e6,
        overlap,
    ];
    let mut ok = true;
    if rank == 0 {
        let mut hashes = vec![0u64; size];
        let mut timings = vec![0.0f64; size * timing.len()];
        root.gather_into_root(&hash, &mut hashes[..]);
        root.gather_into_root(&timing[..], &mut timings[..]);
        let h = hashes.iter().fold(0u64, |a, &b| a.wrapping_add(b));
        println!("result: sum={sum:.15e} initial_sum={sum0:.15e} hash={h:016x}");
        if opts.verify {
            ok = verify_on_root(&cart, &cur, &opts, dims, global);
        }
        let rows: Vec<&[f64]> = timings.chunks(timing.len()).collect();
        let max_of = |c: usize| rows.iter().map(|r| r[c]).fold(0.0f64, f64::max);
        let mean_of = |c: usize| rows.iter().map(|r| r[c]).sum::<f64>() / size as f64;
        let min_overlap = rows.iter().map(|r| r[4]).fold(1.0f64, f64::min);
        println!(
            "time: runtime_s={:.6} comm_only_us={:.1} \
             compute_us={:.1} wait_us={:.1} overlap_pct={:.1} overlap_min_pct={:.1} \
             spin_us={compute_us:.1}",
            max_of(0),
            mean_of(1),
            mean_of(2),
            mean_of(3),
            mean_of(4) * 100.0,
            min_overlap * 100.0,
        );
    } else {
        root.gather_into(&hash);
        root.gather_into(&timing[..]);
        if opts.verify {
            verify_send(&cart, &cur);
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Sum over ranks, added in rank order on rank 0 (0 on the other ranks).
fn global_sum(cart: &CartesianCommunicator, v: f64) -> f64 {
    let root = cart.process_at_rank(0);
    if cart.rank() == 0 {
        let mut all = vec![0.0f64; cart.size() as usize];
        root.gather_into_root(&v, &mut all[..]);
        all.iter().sum()
    } else {
        root.gather_into(&v);
        0.0
    }
}

fn local_sum(b: &Block) -> f64 {
    let n = b.n;
    let mut s = 0.0;
    for i in 1..=n {
        for j in 1..=n {
            for k in 1..=n {
                s += b.data[b.idx(i, j, k)];
            }
        }
    }
    s
}

fn local_hash(b: &Block, origin: [usize; 3], global: [usize; 3]) -> u64 {
    let n = b.n;
    let mut h = 0u64;
    for i in 1..=n {
        for j in 1..=n {
            for k in 1..=n {
                let (x, y, z) = (origin[0] + i - 1, origin[1] + j - 1, origin[2] + k - 1);
                let g = ((x * global[1] + y) * global[2] + z) as u64;
                h = h.wrapping_add(point_hash(g, b.data[b.idx(i, j, k)]));
            }
        }
    }
    h
}

fn interior_values(b: &Block) -> Vec<f64> {
    let n = b.n;
    let mut v = Vec::with_capacity(n * n * n);
    for i in 1..=n {
        for j in 1..=n {
            for k in 1..=n {
                v.push(b.data[b.idx(i, j, k)]);
            }
        }
    }
    v
}

fn verify_send(cart: &CartesianCommunicator, cur: &Block) {
    cart.process_at_rank(0)
        .gather_into(&interior_values(cur)[..]);
}

/// Gathers every block on rank 0 and compares it bit for bit with a serial
/// run of the same iterations on the global grid.
fn verify_on_root(
    cart: &CartesianCommunicator,
    cur: &Block,
    opts: &Options,
    dims: [usize; 3],
    global: [usize; 3],
) -> bool {
    let n = opts.edge;
    let size = dims.iter().product::<usize>();
    let mine = interior_values(cur);
    let mut all = vec![0.0f64; size * mine.len()];
    cart.process_at_rank(0)
        .gather_into_root(&mine[..], &mut all[..]);

    let [gx, gy, gz] = global;
    let at = |x: usize, y: usize, z: usize| (x * gy + y) * gz + z;
    let mut a = vec![0.0f64; gx * gy * gz];
    for x in 0..gx {
        for y in 0..gy {
            for z in 0..gz {
                a[at(x, y, z)] = initial_value(x, y, z);
            }
        }
    }
    let mut b = a.clone();
    for _ in 0..opts.iters {
        for x in 0..gx {
            let (xm, xp) = ((x + gx - 1) % gx, (x + 1) % gx);
            for y in 0..gy {
                let (ym, yp) = ((y + gy - 1) % gy, (y + 1) % gy);
                for z in 0..gz {
                    let (zm, zp) = ((z + gz - 1) % gz, (z + 1) % gz);
                    b[at(x, y, z)] = (a[at(x, y, z)]
                        + a[at(xm, y, z)]
                        + a[at(xp, y, z)]
                        + a[at(x, ym, z)]
                        + a[at(x, yp, z)]
                        + a[at(x, y, zm)]
                        + a[at(x, y, zp)])
                        * W;
                }
            }
        }
        std::mem::swap(&mut a, &mut b);
    }

    let mut mismatches = 0usize;
    for r in 0..size {
        let c = cart.rank_to_coordinates(r as i32);
        let block = &all[r * n * n * n..(r + 1) * n * n * n];
        let mut p = 0;
        for i in 0..n {
            for j in 0..n {
                for k in 0..n {
                    let (x, y, z) = (
                        c[0] as usize * n + i,
                        c[1] as usize * n + j,
                        c[2] as usize * n + k,
                    );
                    if block[p].to_bits() != a[at(x, y, z)].to_bits() {
                        mismatches += 1;
                    }
                    p += 1;
                }
            }
        }
    }
    if mismatches == 0 {
        println!("verify: ok ({} points match a serial run)", a.len());
        true
    } else {
        println!("verify: FAILED ({mismatches} of {} points differ)", a.len());
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_like_mpi_dims_create() {
        assert_eq!(dims_create(1), [1, 1, 1]);
        assert_eq!(dims_create(2), [2, 1, 1]);
        assert_eq!(dims_create(4), [2, 2, 1]);
        assert_eq!(dims_create(6), [3, 2, 1]);
        assert_eq!(dims_create(8), [2, 2, 2]);
        assert_eq!(dims_create(12), [3, 2, 2]);
        assert_eq!(dims_create(7), [7, 1, 1]);
    }

    #[test]
    fn boundary_and_interior_cover_every_point_once() {
        for n in 1..6 {
            let mut cur = Block::new(n);
            for v in cur.data.iter_mut() {
                *v = 1.0;
            }
            let mut next = Block::new(n);
            update_interior(&cur, &mut next);
            update_boundary(&cur, &mut next);
            assert_eq!(local_sum(&next), (n * n * n) as f64, "n = {n}");
        }
    }

    #[test]
    fn args() {
        let a = |s: &str| -> Vec<String> { s.split_whitespace().map(String::from).collect() };
        let Ok(Parsed::Run(o)) = parse_args(&a("--msg-bytes 800")) else {
            panic!()
        };
        assert_eq!((o.edge, o.msg_bytes), (10, 800));
        let Ok(Parsed::Run(o)) = parse_args(&a("--grid=4 --compute-us auto")) else {
            panic!()
        };
        assert_eq!((o.edge, o.msg_bytes, o.compute), (4, 128, Compute::Auto));
        assert!(parse_args(&a("--grid 40 --msg-bytes 100")).is_err());
        assert!(parse_args(&a("--iters x")).is_err());
        assert!(parse_args(&a("--bogus")).is_err());
    }
}
