//! The arithmetic of llama.cpp's batched quantized `mul_mat` paths, which its CPU
//! backend takes instead of `vec_dot` (`docs/quants.md`, "Which kernel llama.cpp
//! uses"):
//!
//! - [`Path::RepackGemm`] / [`Path::RepackGemv`]: the kernels of `ggml-cpu/repack.cpp`
//!   for weights that llama.cpp repacked at load time (Q4_0, IQ4_NL, Q4_K, Q2_K);
//! - [`Path::Tiled`]: the K-quant kernel of `ggml-cpu/tiled/` (Q2_K … Q6_K, IQ4_XS)
//!   for batches of 8 or more rows;
//! - [`Path::Lanes`]: Q8_0 and Q5_0 prompts (and Q4_0 / IQ4_NL ones where not
//!   repacked), which llama.cpp gives to llamafile's tinyBLAS_Q0, in tinyBLAS_Q0's
//!   float order (eight lanes of 4-element sums per output) but through the wide VNNI
//!   kernel (where the CPU has AVX-512 VNNI); and Q4_1 / Q5_1 prompts, whose x86
//!   `vec_dot` has that order plus a chain for the mins;
//! - [`Path::Wide`]: ours, not llama.cpp's (`--fast-int8`): the same prompts through
//!   the wide VNNI kernel with the repack kernels' float chain.
//!
//! Each computes one output as exact integer sums over fixed chunks of the row,
//! combined by a short chain of float operations; only that chain (and the chunking)
//! differs from `vec_dot`. We keep ggml's block layouts and unpack tiles of 8 weight
//! rows per `mul_mat` into integers (`Unpacked`), reused for every activation row.
//! The kernels have a scalar and AVX2 / AVX-512 versions whose integer sums are exact
//! and whose float chain is one piece of code (`recipe::chunk_step`, on `f32` or on
//! the 8 lanes of a vector), so every level gives the same bits.

#[cfg(target_arch = "x86_64")]
mod gemv_x86;
#[cfg(target_arch = "x86_64")]
mod group_gemm_x86;
mod recipe;
mod unpack;
mod wide;
#[cfg(target_arch = "x86_64")]
mod wide_x86;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::sync::OnceLock;

pub(crate) use recipe::{act_row_size, Acc, Plan};
use unpack::SUB;
pub(crate) use unpack::{Unpacked, TILE};
pub(crate) use wide::{WideAcc, WIDE};

use wide::{Shape, WideActs, WideCols, WideTile};

use crate::cpu::simd::SimdLevel;
use crate::quants::interleave::repacks;
use crate::types::GgmlType;
use recipe::Act;

/// One of llama.cpp's batched quantized `mul_mat` kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// `ggml_gemm_*_8x8_q8_*` of `repack.cpp`: the src1 rows in whole groups of 4.
    RepackGemm,
    /// `ggml_gemv_*_8x8_q8_*`: the src1 rows after the last whole group of 4.
    RepackGemv,
    /// `ggml_compute_forward_mul_mat_tiled`.
    Tiled,
    /// The wide VNNI kernel for the 32-element types llama.cpp runs through
    /// tinyBLAS_Q0 ([`wide_takes`]): per block `acc = fma(f32(Σ q·a), d·dy, acc)`.
    Wide,
    /// The wide VNNI kernel with tinyBLAS_Q0's own float chain (eight lanes of
    /// 4-element sums per output, see `Plan::lanes`): llama.cpp's bits for the
    /// [`lanes_takes`] types.
    Lanes,
}

/// Which family of kernels a `mul_mat` node goes to (see [`route`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// The repacked-weight kernels.
    Repack,
    /// The tiled K-quant kernel.
    Tiled,
    /// The wide kernel for Q8_0 / Q5_0 batches ([`Path::Wide`]).
    Wide,
    /// The wide kernel for tinyBLAS_Q0's batches in its order ([`Path::Lanes`]).
    Lanes,
}

impl Route {
    /// The kernel for src1 row `i11` of the `ne11` rows of a plane.
    pub fn path(self, i11: usize, ne11: usize) -> Path {
        match self {
            Route::Tiled => Path::Tiled,
            Route::Wide => Path::Wide,
            Route::Lanes => Path::Lanes,
            Route::Repack if i11 < ne11 - ne11 % 4 => Path::RepackGemm,
            Route::Repack => Path::RepackGemv,
        }
    }
}

/// Whether [`Path::Wide`] takes weights of `typ`: the 32-element types whose batches
/// llama.cpp gives to tinyBLAS_Q0 and whose values fit a byte with a bias.
pub fn wide_takes(typ: GgmlType) -> bool {
    matches!(typ, GgmlType::Q8_0 | GgmlType::Q5_0)
}

/// Whether [`Path::Lanes`] takes weights of `typ`: the types llama.cpp gives to
/// tinyBLAS_Q0 when they are not repacked (Q4_0 and IQ4_NL are, as file-mapped 2-D
/// weights of whole 8-row groups), and Q4_1 and Q5_1, whose x86 `vec_dot` (which
/// llama.cpp runs for their batches) has the same chain plus one for the mins.
pub fn lanes_takes(typ: GgmlType) -> bool {
    use GgmlType as T;
    matches!(
        typ,
        T::Q4_0 | T::Q4_1 | T::Q5_0 | T::Q5_1 | T::Q8_0 | T::IQ4_NL
    )
}

/// `src1` rows from which a [`lanes_takes`] type leaves tinyBLAS_Q0 for the wide
/// kernel: below it, laying out a wide tile costs more than its rows save.
pub const WIDE_MIN_ROWS: usize = 16;

/// Whether `ggml-cpu/tiled` handles weights of `typ` (of the types we implement).
pub fn tiles(typ: GgmlType) -> bool {
    use GgmlType as T;
    matches!(
        typ,
        T::Q2_K | T::Q3_K | T::Q4_K | T::Q5_K | T::Q6_K | T::IQ4_XS
    )
}

/// The batch kernels ggml's `mul_mat` uses for `src0` of type `typ` and shape `ne0`
/// times `src1` of type `src1_typ` and shape `ne1`, or `None` when it uses llamafile's
/// sgemm or `vec_dot`. `mapped`: `src0` lives in a read-only file mapping, which is how
/// model weights are loaded here and our counterpart of llama.cpp placing them in its
/// CPU_REPACK buffer.
///
/// In llama.cpp's order: repacked weights (2-D, `src1` F32 and at most 3-D) always go
/// to their kernels, whatever the batch; then the tiled kernel takes batches of 8 or
/// more `src1` rows (`ne1[1] >= 8`) of F32 or Q8_K. Ours on top, where this
/// process's SIMD level has the wide kernel: batches of [`WIDE_MIN_ROWS`] or more F32
/// rows times [`lanes_takes`] weights go to [`Route::Lanes`] (tinyBLAS_Q0's bits), or
/// with `fast_int8` ([`crate::Executor::set_fast_int8`]) the [`wide_takes`] ones to
/// [`Route::Wide`].
pub fn route(
    typ: GgmlType,
    ne0: [usize; 4],
    mapped: bool,
    src1_typ: GgmlType,
    ne1: [usize; 4],
    fast_int8: bool,
) -> Option<Route> {
    let two_d = ne0[2] == 1 && ne0[3] == 1;
    if mapped && two_d && repacks(typ, ne0[1]) && src1_typ == GgmlType::F32 && ne1[3] == 1 {
        return Some(Route::Repack);
    }
    let src1_ok = matches!(src1_typ, GgmlType::F32 | GgmlType::Q8_K);
    if tiles(typ) && src1_ok && ne1[1] >= 8 {
        return Some(Route::Tiled);
    }
    if src1_typ != GgmlType::F32 || ne1[1] < WIDE_MIN_ROWS || kernels().wide.is_none() {
        return None;
    }
    if fast_int8 && wide_takes(typ) {
        Some(Route::Wide)
    } else {
        lanes_takes(typ).then_some(Route::Lanes)
    }
}

/// Whether the unpacked values of `typ` can be negative (all but the types with mins).
fn has_signed_values(typ: GgmlType) -> bool {
    !has_mins(typ)
}

/// Whether blocks of `typ` carry a min (`dmin` or `m`) besides their scale.
fn has_mins(typ: GgmlType) -> bool {
    use GgmlType as T;
    matches!(typ, T::Q2_K | T::Q4_K | T::Q5_K | T::Q4_1 | T::Q5_1)
}

/// Whether `typ` has scales below the block's `d` (all but the 32-element types).
fn has_scales(typ: GgmlType) -> bool {
    typ.blck_size() != 32
}

/// The chunking and float chain of `path` for weights of `typ`.
pub(crate) fn plan(typ: GgmlType, path: Path) -> Option<Plan> {
    use GgmlType as T;
    let legacy = !has_scales(typ);
    let ok = match path {
        Path::Tiled => tiles(typ),
        Path::RepackGemm | Path::RepackGemv => repacks(typ, 0),
        Path::Wide => wide_takes(typ),
        Path::Lanes => lanes_takes(typ),
    };
    if !ok {
        return None;
    }
    let group = typ.blck_size();
    let chunk = match (path, typ) {
        (Path::RepackGemm, T::Q4_K) => 64,
        (Path::RepackGemm, T::Q2_K) => 128,
        _ => group,
    };
    Some(Plan {
        group,
        chunk,
        has_min: has_mins(typ),
        signed: has_signed_values(typ),
        scaled: !legacy,
        act: match typ {
            T::Q4_1 | T::Q5_1 => Act::Q8_1,
            _ if legacy => Act::Q8_0,
            _ => Act::Q8K,
        },
        tiled: path == Path::Tiled,
        lanes: path == Path::Lanes,
    })
}

/// A batch kernel: adds the slab of a tile (elements `k0 .. k0 + w.n` of its rows)
/// into the sums `acc[r]` of activation row `a[r]` ([`Acc::outputs`] once all slabs
/// went in).
pub(crate) type Kernel = fn(&Plan, &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]);

/// Elements of the weight rows unpacked at a time: a tile's slab then stays in the L1
/// cache while every activation row runs through it.
pub(crate) const SLAB: usize = 1024;

/// Panics unless `w` is a tile of whole blocks and chunks, every row of `a` holds its
/// elements, and `acc` has a state for each row of `a`.
fn check(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &[Acc]) {
    let n = w.n;
    assert!(
        n.is_multiple_of(p.group)
            && n.is_multiple_of(p.chunk)
            && k0.is_multiple_of(p.group)
            && w.q.len() >= TILE * n
            && w.sv.len() * 2 >= TILE * n
            && w.m.len() * SUB >= TILE * n
            && w.d.len() * p.group >= TILE * n
            && w.dmin.len() * p.group >= TILE * n
            && a.iter().all(|a| a.len() >= act_row_size(p.act, k0 + n))
            && acc.len() == a.len(),
        "batch kernel: rows do not match"
    );
}

fn kernel_scalar(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]) {
    check(p, w, k0, a, acc);
    recipe::tile_scalar(p, w, k0, a, acc)
}

#[cfg(target_arch = "x86_64")]
fn kernel_avx2(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]) {
    check(p, w, k0, a, acc);
    if p.scaled && !p.signed && w.qi.len() >= TILE * w.n && w.sci.len() * SUB >= TILE * w.n {
        // SAFETY: `check` sized everything and the interleaved parts were checked
        // above; this kernel is only handed out by `kernels_for` after AVX2, FMA and
        // F16C were detected.
        return unsafe { x86::tile_avx2_interleaved(p, w, k0, a, acc) };
    }
    // SAFETY: `check` sized everything; this kernel is only handed out by
    // `kernels_for` after AVX2, FMA and F16C were detected.
    unsafe { x86::tile_avx2(p, w, k0, a, acc) }
}

/// [`fill_avx2`], and for the types with scales and unsigned values (Q2_K, Q4_K,
/// Q5_K) the interleaved tile that [`kernel_avx2`] then runs on.
#[cfg(target_arch = "x86_64")]
fn fill_avx2_interleaved(u: &mut Unpacked, typ: GgmlType, n: usize, rows: &[&[u8]]) {
    fill_avx2(u, typ, n, rows);
    if has_scales(typ) && !has_signed_values(typ) {
        // SAFETY: only handed out by `kernels_for` after AVX2 was detected.
        unsafe { x86::interleave_avx2(u, true, false) };
    } else {
        // A tile reused from another type keeps no stale interleaved copy.
        u.qi.clear();
    }
}

#[cfg(target_arch = "x86_64")]
fn kernel_avx512(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]) {
    check(p, w, k0, a, acc);
    // SAFETY: as `kernel_avx2`; the AVX-512 level includes AVX-512 F/BW/VL.
    unsafe { x86::tile_avx512(p, w, k0, a, acc) }
}

/// A GEMV straight from the blocks of [`TILE`] weight rows of `n` elements: adds their
/// products with one activation row `a` into `acc`, giving the bits of [`Unpacked::fill`]
/// followed by [`Kernel`], and meanwhile fetches the rows `next` (any slices, only
/// their start matters) into the cache. `false` (and `acc` untouched) for a type it
/// does not take.
pub(crate) type Gemv =
    fn(&Plan, GgmlType, n: usize, &[&[u8]; TILE], next: &[&[u8]; TILE], a: &[u8], &mut Acc) -> bool;

/// [`Gemv`] over one group of 8 rows in the interleaved layout
/// ([`crate::quants::interleave`]) instead of 8 rows as stored: the same bits.
pub(crate) type GroupGemv = fn(&Plan, GgmlType, n: usize, group: &[u8], a: &[u8], &mut Acc) -> bool;

/// The GEMM over one group of 8 interleaved rows ([`crate::quants::interleave`]) of
/// `n` elements: adds their products with each activation row `a[j]` into `acc[j]`,
/// giving the bits of de-interleaving the group, [`Unpacked::fill`] and [`Kernel`].
/// `false` (and `acc` untouched) for a type or plan it does not take.
pub(crate) type GroupGemm =
    fn(&Plan, GgmlType, n: usize, group: &[u8], a: &[&[u8]], &mut [Acc]) -> bool;

/// Fills a tile (see [`Unpacked::fill`]).
pub(crate) type Fill = fn(&mut Unpacked, GgmlType, usize, &[&[u8]]);

/// One SIMD level's batch code.
#[derive(Clone, Copy)]
pub(crate) struct Kernels {
    /// Unpacks a tile.
    pub fill: Fill,
    /// Runs a tile against activation rows.
    pub tile: Kernel,
    /// The direct GEMV, where this level has one.
    pub gemv: Option<Gemv>,
    /// The direct GEMV over interleaved rows, where this level has one.
    pub group_gemv: Option<GroupGemv>,
    /// The direct GEMM over interleaved rows, where this level has one.
    pub group_gemm: Option<GroupGemm>,
    /// A fill and tile kernel for segments of few activation rows, where they differ
    /// from `fill` and `tile` (preparing a tile for the main ones costs more than it
    /// saves on one or two rows).
    pub few: Option<(Fill, Kernel)>,
    /// The fill and kernel of wide tiles of 16 rows ([`WideScratch`]), where the
    /// level has them.
    pub wide: Option<(WideFill, WideKernel)>,
}

/// Fills a wide tile (see [`WideTile::fill`]).
pub(crate) type WideFill = fn(&mut WideTile, &Plan, Shape, GgmlType, usize, &[&[u8]]);

#[cfg(target_arch = "x86_64")]
fn wide_fill_avx512(
    t: &mut WideTile,
    p: &Plan,
    sh: Shape,
    typ: GgmlType,
    n: usize,
    rows: &[&[u8]],
) {
    // SAFETY: only handed out by `kernels_for` at the AVX-512 level (with AVX2, FMA and
    // F16C); `fill_with` checks the rows.
    unsafe { wide_x86::fill_wide(t, p, sh, typ, n, rows) }
}

/// A wide tile kernel: adds the slab `t` (elements `k0 .. k0 + t.n` of its rows) into
/// `acc[j]` for activation row `cols.a[j]`; the first slab (`k0 == 0`) replaces what
/// `acc[j]` held.
pub(crate) type WideKernel = fn(&Plan, Shape, &WideTile, k0: usize, WideCols, &mut [WideAcc]);

#[cfg(target_arch = "x86_64")]
fn wide_vnni(p: &Plan, sh: Shape, t: &WideTile, k0: usize, cols: WideCols, acc: &mut [WideAcc]) {
    let WideCols { a, acts, j0 } = cols;
    let n = t.n;
    let (ablk, _, _) = p.act.layout();
    assert!(
        n.is_multiple_of(p.chunk)
            && p.chunk.is_multiple_of(sh.subw)
            && k0.is_multiple_of(p.group)
            && t.qw.len() >= WIDE * n
            && (!p.scaled || t.sc.len() * sh.subw >= WIDE * n)
            && (!p.has_min || p.lanes || t.mp.len() * 32 >= WIDE * n)
            && t.d.len() * p.group >= WIDE * n
            && t.dmin.len() * p.group >= WIDE * n
            && a.iter().all(|a| a.len() >= act_row_size(p.act, k0 + n))
            && acc.len() == a.len()
            && acts.corr.len() >= (j0 + a.len()) * acts.ncorr
            && acts.dy.len() >= (j0 + a.len()) * acts.ndy
            && acts.ncorr * sh.subw >= k0 + n
            && acts.ndy * ablk >= k0 + n,
        "wide kernel: rows do not match"
    );
    // SAFETY: everything the kernel reads was sized above; only handed out by
    // `kernels_for` after AVX-512 VNNI was detected on top of the AVX-512 level.
    unsafe { wide_x86::tile_wide(p, sh, t, k0, cols, acc) }
}

/// Byte multiply-adds one call of [`int8_peak_probe`] does per round.
pub const INT8_PEAK_MACS_PER_ROUND: usize = 16 * 64;

/// Runs `rounds` rounds of independent `vpdpbusd` chains ([`INT8_PEAK_MACS_PER_ROUND`]
/// byte multiply-adds each) and returns a value that depends on all of them: timed,
/// this CPU's int8 peak per core, for the benchmark that sets the wide kernel against
/// it. `None` where the CPU has no AVX-512 VNNI.
pub fn int8_peak_probe(rounds: usize, seed: i32) -> Option<i32> {
    #[cfg(target_arch = "x86_64")]
    if crate::quants::dot::has_avx512_vnni() && SimdLevel::Avx512.is_available() {
        // SAFETY: AVX-512 F and VNNI were detected just above.
        return Some(unsafe { wide_x86::vnni_peak(rounds, seed) });
    }
    let _ = (rounds, seed);
    None
}

/// The buffers of the wide path, reused from call to call.
#[derive(Default)]
pub(crate) struct WideScratch {
    tile: WideTile,
    acts: WideActs,
    /// The running sums of the activation rows against the current tile.
    pub acc: Vec<WideAcc>,
}

impl WideScratch {
    /// Prepares the activation rows `a` of `n` elements for weights of `typ` under
    /// plan `p`; `false` when the wide path does not take `typ`.
    pub fn prepare(&mut self, typ: GgmlType, p: &Plan, n: usize, a: &[&[u8]]) -> bool {
        let Some(sh) = wide::shape_for(typ, p) else {
            return false;
        };
        self.acts.prepare(p, sh, n, a);
        true
    }

    /// Runs up to [`WIDE`] weight rows `w` of `n` elements of `typ` against the
    /// prepared activation rows, each run `(rows, plan)` of them with its plan, slab
    /// by slab; leaves the sums in [`WideScratch::acc`] (one per prepared row).
    /// `next`: the rows of the tile that comes after this one (may be empty), whose
    /// first slab is fetched into the cache while the last slab of `w` runs.
    #[allow(clippy::too_many_arguments)]
    pub fn tile(
        &mut self,
        (fill, wide): (WideFill, WideKernel),
        typ: GgmlType,
        n: usize,
        w: &[&[u8]],
        next: &[&[u8]],
        a: &[&[u8]],
        runs: &[(std::ops::Range<usize>, Plan)],
    ) {
        let sh = wide::shape_for(typ, &runs[0].1).expect("prepared for a wide type");
        let (blck, size) = (typ.blck_size(), typ.type_size());
        // Kept from tile to tile: the kernels start each tile's first slab from zero.
        self.acc.resize(a.len(), WideAcc::default());
        for k0 in (0..n).step_by(SLAB) {
            let len = SLAB.min(n - k0);
            let at = k0 / blck * size;
            let mut rows: [&[u8]; WIDE] = [&[]; WIDE];
            for (row, w) in rows.iter_mut().zip(w) {
                *row = &w[at..];
            }
            fill(&mut self.tile, &runs[0].1, sh, typ, len, &rows[..w.len()]);
            // The rows' next slab (or the next tile's first), fetched while the kernel
            // runs: 16-32 rows are as many short streams, which the hardware
            // prefetcher does not run ahead into, and the fill would wait on memory.
            let (ahead, from): (&[&[u8]], usize) = if k0 + SLAB < n {
                (w, (k0 + SLAB) / blck * size)
            } else {
                (next, 0)
            };
            let bytes = SLAB.min(n) / blck * size;
            for row in ahead {
                if let Some(r) = row.get(from..) {
                    crate::cpu::simd::prefetch(r.as_ptr(), bytes.min(r.len()));
                }
            }
            for (run, p) in runs {
                let cols = WideCols {
                    a: &a[run.clone()],
                    acts: &self.acts,
                    j0: run.start,
                };
                wide(p, sh, &self.tile, k0, cols, &mut self.acc[run.clone()]);
            }
        }
    }
}

fn fill_scalar(u: &mut Unpacked, typ: GgmlType, n: usize, rows: &[&[u8]]) {
    u.fill(typ, n, rows)
}

#[cfg(target_arch = "x86_64")]
fn fill_avx2(u: &mut Unpacked, typ: GgmlType, n: usize, rows: &[&[u8]]) {
    // SAFETY: only handed out by `kernels_for` after AVX2, FMA and F16C were detected.
    unsafe { x86::fill_avx2(u, typ, n, rows) }
}

#[cfg(target_arch = "x86_64")]
fn kernel_vnni(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]) {
    check(p, w, k0, a, acc);
    assert!(
        w.qi.len() >= TILE * w.n
            && if p.scaled {
                w.sci.len() * SUB >= TILE * w.n
            } else {
                w.qsum.len() * 32 >= TILE * w.n
            },
        "batch kernel: tile not interleaved"
    );
    // SAFETY: `check` sized everything, and the interleaved parts were checked above;
    // this kernel is only handed out by `kernels_for` after AVX-512 VNNI was detected
    // on top of the AVX-512 level.
    unsafe { x86::tile_vnni(p, w, k0, a, acc) }
}

#[cfg(target_arch = "x86_64")]
fn fill_vnni(u: &mut Unpacked, typ: GgmlType, n: usize, rows: &[&[u8]]) {
    fill_avx2(u, typ, n, rows);
    // SAFETY: only handed out by `kernels_for` at the VNNI level, which has AVX2.
    unsafe { x86::interleave_avx2(u, has_scales(typ), has_signed_values(typ)) };
}

/// Checks that a GEMV's rows hold `n` elements of `typ` and its activation row `n`
/// of the plan's activation type.
///
/// # Panics
/// When they do not.
#[cfg(target_arch = "x86_64")]
fn check_gemv(p: &Plan, typ: GgmlType, n: usize, w: &[&[u8]; TILE], a: &[u8]) {
    assert!(
        n.is_multiple_of(typ.blck_size())
            && w.iter().all(|w| w.len() >= typ.row_size(n))
            && a.len() >= act_row_size(p.act, n),
        "batch gemv: rows do not match"
    );
}

#[cfg(target_arch = "x86_64")]
fn gemv_avx2(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    w: &[&[u8]; TILE],
    next: &[&[u8]; TILE],
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    check_gemv(p, typ, n, w, a);
    // SAFETY: the rows were checked to hold `n` elements (and it declines the types it
    // does not take); only handed out by `kernels_for` after AVX2, FMA and F16C were
    // detected.
    unsafe { gemv_x86::gemv_avx2(p, typ, n, w, next, a, acc) }
}

#[cfg(target_arch = "x86_64")]
fn gemv_vnni(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    w: &[&[u8]; TILE],
    next: &[&[u8]; TILE],
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    check_gemv(p, typ, n, w, a);
    // SAFETY: as `gemv_avx2`; only handed out by `kernels_for` after AVX-512 VNNI was
    // detected on top of the AVX-512 level.
    unsafe { gemv_x86::gemv_vnni(p, typ, n, w, next, a, acc) }
}

/// Checks that a GEMV's `group` holds 8 interleaved rows of `n` elements of `typ` and
/// its activation row `n` of the plan's activation type.
///
/// # Panics
/// When they do not.
#[cfg(target_arch = "x86_64")]
fn check_group_gemv(p: &Plan, typ: GgmlType, n: usize, group: &[u8], a: &[u8]) {
    assert!(
        crate::quants::interleave::interleaves(typ)
            && n.is_multiple_of(typ.blck_size())
            && group.len() >= TILE * typ.row_size(n)
            && a.len() >= act_row_size(p.act, n),
        "batch gemv: interleaved rows do not match"
    );
}

#[cfg(target_arch = "x86_64")]
fn group_gemv_avx2(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    group: &[u8],
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    check_group_gemv(p, typ, n, group, a);
    // SAFETY: the group was checked to hold 8 interleaved rows of `n` elements; only
    // handed out by `kernels_for` after AVX2, FMA and F16C were detected.
    unsafe { gemv_x86::group_gemv_avx2(p, typ, n, group, a, acc) }
}

#[cfg(target_arch = "x86_64")]
fn group_gemm_avx2(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    group: &[u8],
    a: &[&[u8]],
    acc: &mut [Acc],
) -> bool {
    if !group_gemm_x86::takes(p, typ) {
        return false;
    }
    for a in a {
        check_group_gemv(p, typ, n, group, a);
    }
    assert!(
        acc.len() >= a.len(),
        "batch gemm: fewer sums than activation rows"
    );
    // SAFETY: the group was checked to hold 8 interleaved Q4_K rows of `n` elements and
    // every activation row `n` Q8_K elements; only handed out by `kernels_for` after
    // AVX2, FMA and F16C were detected.
    unsafe { group_gemm_x86::group_gemm_avx2(p, n, group, a, acc) };
    true
}

#[cfg(target_arch = "x86_64")]
fn group_gemv_vnni(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    group: &[u8],
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    check_group_gemv(p, typ, n, group, a);
    // SAFETY: as `group_gemv_avx2`; only handed out by `kernels_for` after AVX-512 VNNI
    // was detected on top of the AVX-512 level.
    unsafe { gemv_x86::group_gemv_vnni(p, typ, n, group, a, acc) }
}

const SCALAR: Kernels = Kernels {
    fill: fill_scalar,
    tile: kernel_scalar,
    gemv: None,
    group_gemv: None,
    group_gemm: None,
    few: None,
    wide: None,
};

/// The batch code of SIMD level `level`; `None` when this CPU cannot run it (NEON
/// runs the scalar code).
pub(crate) fn kernels_for(level: SimdLevel) -> Option<Kernels> {
    if !level.is_available() {
        return None;
    }
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => Some(Kernels {
            fill: fill_avx2_interleaved,
            tile: kernel_avx2,
            gemv: Some(gemv_avx2),
            group_gemv: Some(group_gemv_avx2),
            group_gemm: Some(group_gemm_avx2),
            few: None,
            wide: None,
        }),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 if crate::quants::dot::has_avx512_vnni() => Some(Kernels {
            fill: fill_vnni,
            tile: kernel_vnni,
            gemv: Some(gemv_vnni),
            group_gemv: Some(group_gemv_vnni),
            group_gemm: None,
            few: Some((fill_avx2, kernel_avx512)),
            wide: Some((wide_fill_avx512, wide_vnni)),
        }),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => Some(Kernels {
            fill: fill_avx2,
            tile: kernel_avx512,
            gemv: Some(gemv_avx2),
            group_gemv: Some(group_gemv_avx2),
            group_gemm: Some(group_gemm_avx2),
            few: None,
            wide: None,
        }),
        _ => Some(SCALAR),
    }
}

/// The batch code of the level `mul_mat` runs at (the best, or `GGML_SIMD`'s).
pub(crate) fn kernels() -> Kernels {
    static K: OnceLock<Kernels> = OnceLock::new();
    *K.get_or_init(|| kernels_for(crate::cpu::simd::kernels().level).unwrap_or(SCALAR))
}

/// Products of weight rows with activation rows, as [`products_for`] returns them.
pub type Products = Box<dyn Fn(usize, &[&[u8]], &[&[u8]]) -> Vec<f32> + Send + Sync>;

/// `path`'s products of weight rows of `typ` with activation rows of its
/// `vec_dot_type` at SIMD level `level`, as `mul_mat` computes them (tiles of 8 weight
/// rows in slabs of 1024 elements): the returned
/// function maps `(n, w, a)` to the `a.len() × w.len()` outputs, activation row after
/// activation row. For tests and benchmarks. `None` when `path` does not take `typ` or
/// this CPU cannot run `level`; the function panics on rows shorter than `n` elements.
pub fn products_for(typ: GgmlType, path: Path, level: SimdLevel) -> Option<Products> {
    let p = plan(typ, path)?;
    let k = kernels_for(level)?;
    Some(Box::new(move |n: usize, w: &[&[u8]], a: &[&[u8]]| {
        let mut res = vec![0f32; a.len() * w.len()];
        let mut s = WideScratch::default();
        if let Some(wide) = k.wide.filter(|_| s.prepare(typ, &p, n, a)) {
            let runs = [(0..a.len(), p)];
            for (t, rows) in w.chunks(WIDE).enumerate() {
                s.tile(wide, typ, n, rows, &[], a, &runs);
                for (r, acc) in s.acc.iter().enumerate() {
                    let at = r * w.len() + t * WIDE;
                    res[at..at + rows.len()].copy_from_slice(&acc.outputs(&p)[..rows.len()]);
                }
            }
            return res;
        }
        if p.lanes {
            // Levels without the wide kernel: the lanes chain as a dot product
            // (tinyBLAS_Q0's, or the x86 `vec_dot` of Q4_1 / Q5_1), in plain Rust.
            let dot = crate::quants::dot::lanes_dot(typ).expect("a lanes dot product");
            for (r, a1) in a.iter().enumerate() {
                for (i, w1) in w.iter().enumerate() {
                    res[r * w.len() + i] = dot(n, w1, a1);
                }
            }
            return res;
        }
        let mut tile = Unpacked::default();
        let mut acc = vec![Acc::default(); a.len()];
        let (blck, size) = (typ.blck_size(), typ.type_size());
        for (t, rows) in w.chunks(TILE).enumerate() {
            acc.fill(Acc::default());
            for k0 in (0..n).step_by(SLAB) {
                let slab: Vec<&[u8]> = rows.iter().map(|r| &r[k0 / blck * size..]).collect();
                (k.fill)(&mut tile, typ, SLAB.min(n - k0), &slab);
                (k.tile)(&p, &tile, k0, a, &mut acc);
            }
            for (r, acc) in acc.iter().enumerate() {
                let at = r * w.len() + t * TILE;
                res[at..at + rows.len()].copy_from_slice(&acc.outputs(&p)[..rows.len()]);
            }
        }
        res
    }))
}

/// `path`'s dot product of one row of `typ` with one row of its `vec_dot_type`
/// ([`products_for`] of single rows), with `vec_dot`'s signature `(n, x, y)`.
pub fn dot_for(
    typ: GgmlType,
    path: Path,
    level: SimdLevel,
) -> Option<impl Fn(usize, &[u8], &[u8]) -> f32> {
    let f = products_for(typ, path, level)?;
    Some(move |n: usize, x: &[u8], y: &[u8]| f(n, &[x], &[y])[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuTypeTraits;

    /// The AVX2 transpose of the interleaved values writes the scalar one's bytes, the
    /// scales' part included, with and without the signed types' flip.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_interleave_is_the_scalar_one() {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut byte = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as i8
        };
        for n in [32, 64, 256, 1024, 48] {
            for (scaled, signed) in [(true, false), (true, true), (false, true)] {
                let mut a = Unpacked {
                    n,
                    rows: TILE,
                    q: (0..TILE * n).map(|_| byte()).collect(),
                    sv: (0..TILE * n / 2).map(|_| byte() as i16).collect(),
                    ..Default::default()
                };
                let mut b = Unpacked {
                    n,
                    rows: TILE,
                    q: a.q.clone(),
                    sv: a.sv.clone(),
                    ..Default::default()
                };
                a.interleave(scaled, signed);
                // SAFETY: AVX2 was detected above.
                unsafe { x86::interleave_avx2(&mut b, scaled, signed) };
                assert_eq!(a.qi, b.qi, "n {n} scaled {scaled} signed {signed}");
                assert_eq!((a.sci, a.qsum), (b.sci, b.qsum));
            }
        }
    }

    /// Uniform values in [-1, 1) from an xorshift stream seeded with `s`.
    fn uniform(mut s: u64) -> impl FnMut() -> f32 {
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
        }
    }

    /// The direct GEMV, over rows as stored or interleaved, gives the bits of unpacking
    /// the tile and running the scalar kernel on it, for every type it takes, at every
    /// level that has one.
    #[test]
    fn gemv_matches_the_tile_kernel() {
        let mut rand = uniform(0x9e37_79b9_7f4a_7c15u64);
        for typ in [
            GgmlType::Q4_0,
            GgmlType::IQ4_NL,
            GgmlType::Q4_K,
            GgmlType::Q2_K,
        ] {
            let p = plan(typ, Path::RepackGemv).expect("repack plan");
            for n in [256, 768, 1024, 1280, 4864] {
                let w: Vec<f32> = (0..TILE * n).map(|i| rand() * (1 + i % 7) as f32).collect();
                let wq = crate::quants::quantize(typ, &w, n).expect("quantize weights");
                let a: Vec<f32> = (0..n).map(|_| rand() * 3.0).collect();
                let vdt = typ.traits().vec_dot_type;
                let mut aq = vec![0u8; vdt.row_size(n)];
                (vdt.traits().from_float.expect("activation quantizer"))(&a, &mut aq);
                let rows: [&[u8]; TILE] =
                    std::array::from_fn(|i| &wq[i * typ.row_size(n)..][..typ.row_size(n)]);
                let mut want = Unpacked::default();
                want.fill(typ, n, &rows);
                let mut acc = [Acc::default()];
                recipe::tile_scalar(&p, &want, 0, &[&aq], &mut acc);
                let mut group = vec![0u8; wq.len()];
                crate::quants::interleave::interleave_group(typ, n, &wq, &mut group);
                let bits = |a: &Acc| a.outputs(&p).map(f32::to_bits);
                for level in crate::cpu::simd::available_levels() {
                    let Some(k) = kernels_for(level) else {
                        continue;
                    };
                    if let Some(gemv) = k.gemv {
                        let mut got = Acc::default();
                        assert!(gemv(&p, typ, n, &rows, &rows, &aq, &mut got), "{typ}");
                        assert_eq!(bits(&got), bits(&acc[0]), "{typ} n={n} {}", level.name());
                    }
                    if let Some(gemv) = k.group_gemv {
                        let mut got = Acc::default();
                        assert!(gemv(&p, typ, n, &group, &aq, &mut got), "{typ}");
                        let l = level.name();
                        assert_eq!(bits(&got), bits(&acc[0]), "{typ} n={n} {l} interleaved");
                    }
                }
            }
        }
    }

    /// The direct GEMM over an interleaved group gives the bits of unpacking the tile
    /// and running the scalar kernel on it, for any number of activation rows and
    /// sums carried in from earlier slabs, at every level that has one.
    #[test]
    fn group_gemm_matches_the_tile_kernel() {
        let mut rand = uniform(0x5851_f42d_4c95_7f2du64);
        let typ = GgmlType::Q4_K;
        let p = plan(typ, Path::RepackGemm).expect("repack plan");
        for n in [256, 768, 1280, 4864] {
            let w: Vec<f32> = (0..TILE * n).map(|i| rand() * (1 + i % 7) as f32).collect();
            let wq = crate::quants::quantize(typ, &w, n).expect("quantize weights");
            let rows: [&[u8]; TILE] =
                std::array::from_fn(|i| &wq[i * typ.row_size(n)..][..typ.row_size(n)]);
            let mut group = vec![0u8; wq.len()];
            crate::quants::interleave::interleave_group(typ, n, &wq, &mut group);
            let vdt = typ.traits().vec_dot_type;
            let quant = vdt.traits().from_float.expect("activation quantizer");
            for nrows in [1, 3, 4, 5, 8, 9] {
                let aq: Vec<Vec<u8>> = (0..nrows)
                    .map(|_| {
                        let a: Vec<f32> = (0..n).map(|_| rand() * 3.0).collect();
                        let mut q = vec![0u8; vdt.row_size(n)];
                        quant(&a, &mut q);
                        q
                    })
                    .collect();
                let a: Vec<&[u8]> = aq.iter().map(|q| &q[..]).collect();
                let start: Vec<Acc> = (0..nrows)
                    .map(|_| Acc {
                        acc: std::array::from_fn(|_| rand()),
                        accm: std::array::from_fn(|_| rand()),
                    })
                    .collect();
                let mut want_tile = Unpacked::default();
                want_tile.fill(typ, n, &rows);
                let mut want = start.clone();
                recipe::tile_scalar(&p, &want_tile, 0, &a, &mut want);
                let bits = |a: &[Acc]| -> Vec<[u32; TILE]> {
                    a.iter().map(|a| a.outputs(&p).map(f32::to_bits)).collect()
                };
                for level in crate::cpu::simd::available_levels() {
                    let Some(gemm) = kernels_for(level).and_then(|k| k.group_gemm) else {
                        continue;
                    };
                    let mut got = start.clone();
                    assert!(gemm(&p, typ, n, &group, &a, &mut got), "takes Q4_K");
                    let l = level.name();
                    assert_eq!(bits(&got), bits(&want), "n={n} rows={nrows} {l}");
                    let gemv_plan = plan(typ, Path::RepackGemv).expect("gemv plan");
                    assert!(!gemm(&gemv_plan, typ, n, &group, &a, &mut got), "{l}");
                }
            }
        }
    }

    /// Every level's wide fill gives the plain-Rust tile, for whole and partial tiles.
    #[test]
    fn every_level_fills_the_same_wide_tiles() {
        let mut s = 0x0bad_cafe_f00d_1234u64;
        for typ in crate::quants::types().filter(|&t| wide::shape(t).is_some()) {
            let path = if tiles(typ) {
                Path::Tiled
            } else if wide_takes(typ) {
                Path::Wide
            } else if repacks(typ, 0) {
                Path::RepackGemm
            } else {
                Path::Lanes
            };
            let p = plan(typ, path).expect("plan");
            let sh = wide::shape(typ).expect("shape");
            let sizes = [(256, 16), (768, 5), (1024, 16), (800, 3), (96, 16)];
            for (n, nrows) in sizes.into_iter().filter(|(n, _)| n % typ.blck_size() == 0) {
                let rows: Vec<Vec<u8>> = (0..nrows)
                    .map(|_| {
                        let x: Vec<f32> = (0..n)
                            .map(|_| {
                                s ^= s << 13;
                                s ^= s >> 7;
                                s ^= s << 17;
                                (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                            })
                            .collect();
                        crate::quants::quantize(typ, &x, n).expect("quantize")
                    })
                    .collect();
                let rows: Vec<&[u8]> = rows.iter().map(|r| &r[..]).collect();
                let mut want = WideTile::default();
                want.fill(&p, sh, typ, n, &rows);
                for level in crate::cpu::simd::available_levels() {
                    let Some((fill, _)) = kernels_for(level).and_then(|k| k.wide) else {
                        continue;
                    };
                    let mut got = WideTile::default();
                    fill(&mut got, &p, sh, typ, n, &rows);
                    let lanes = |v: &[u8]| -> Vec<u8> {
                        v.chunks_exact(4 * WIDE)
                            .flat_map(|g| g[..4 * nrows].to_vec())
                            .collect()
                    };
                    assert_eq!(
                        lanes(&got.qw),
                        lanes(&want.qw),
                        "{typ} {n} {}",
                        level.name()
                    );
                    let live = |v: &[f32]| -> Vec<u32> {
                        v.chunks_exact(WIDE)
                            .flat_map(|g| g[..nrows].iter().map(|x| x.to_bits()))
                            .collect()
                    };
                    assert_eq!(live(&got.d), live(&want.d), "{typ}");
                    assert_eq!(live(&got.dmin), live(&want.dmin), "{typ}");
                    let live_i = |v: &[i32]| -> Vec<i32> {
                        v.chunks_exact(WIDE)
                            .flat_map(|g| g[..nrows].to_vec())
                            .collect()
                    };
                    if p.scaled {
                        assert_eq!(live_i(&got.sc), live_i(&want.sc), "{typ}");
                    }
                    if p.has_min {
                        assert_eq!(live_i(&got.mp), live_i(&want.mp), "{typ}");
                    }
                }
            }
        }
    }

    /// Every level unpacks random block bytes into the scalar code's bytes.
    #[test]
    fn every_level_unpacks_the_same_bytes() {
        let mut s = 0x1234_5678_9abc_def0u64;
        for typ in crate::quants::types().filter(|&t| tiles(t) || repacks(t, 0) || wide_takes(t)) {
            let n = 512;
            let rows: Vec<Vec<u8>> = (0..3)
                .map(|_| {
                    (0..typ.row_size(n))
                        .map(|_| {
                            s ^= s << 13;
                            s ^= s >> 7;
                            s ^= s << 17;
                            s as u8
                        })
                        .collect()
                })
                .collect();
            let rows: Vec<&[u8]> = rows.iter().map(|r| &r[..]).collect();
            let mut want = Unpacked::default();
            want.fill(typ, n, &rows);
            for level in crate::cpu::simd::available_levels() {
                let Some(k) = kernels_for(level) else {
                    continue;
                };
                let mut got = Unpacked::default();
                (k.fill)(&mut got, typ, n, &rows);
                let sv = if typ.blck_size() == 32 { 0 } else { 3 * n / 2 };
                let live = |u: &Unpacked| (u.q[..3 * n].to_vec(), u.sv[..sv].to_vec());
                assert_eq!(live(&got), live(&want), "{typ} {}", level.name());
                // NaN scales (random bytes) may differ in payload between conversions.
                let bits = |v: &[f32]| {
                    let canon = |x: &f32| {
                        if x.is_nan() {
                            f32::NAN.to_bits()
                        } else {
                            x.to_bits()
                        }
                    };
                    v.iter().map(canon).collect::<Vec<_>>()
                };
                assert_eq!(bits(&got.d), bits(&want.d), "{typ} {}", level.name());
                assert_eq!(got.m, want.m, "{typ}");
            }
        }
    }
}
