//! GEMM against OpenBLAS in one process (issue 33): the six products of a GraphSAGE step
//! (forward X·W, ∇X = ∇Y·Wᵀ, ∇W = Xᵀ·∇Y at 8000 rows × 512/1024), at 1 and 2 threads,
//! round-robin so that every library sees the same machine state, medians of `REPS`
//! timed repetitions after a checked warm-up. Each timed call follows a pause (the previous
//! library's idle threads gone) and an untimed call of the same product: the core's clock,
//! caches and AMX unit as a step's back-to-back products find them, and as
//! `scripts/torch_bf16_gemm.py` times oneDNN. `WARM=no` times the first call after the
//! pause instead (the protocol before 2026-12-01: on the AMX Xeon it ran OpenBLAS 10–30 %
//! and our AMX tiles 20–35 % slower than back to back, and so set the step's floor too
//! high). First it prints the machine's bound, one core's FMA rate per vector width
//! (`fma_bound`), which every GF/s figure is below.
//!
//! OpenBLAS is the library numpy's wheel bundles (`libscipy_openblas64_`: ILP64, symbols
//! suffixed `64_`), loaded with `dlopen` from `OPENBLAS_LIB`; `scripts/gemm_vs_openblas.sh`
//! makes the venv, finds the library and runs this bench on every instruction set the CPU
//! has (OpenBLAS's AVX2 kernels through `OPENBLAS_CORETYPE=Haswell`, ours through
//! `SAINTFLOW_ISA=avx2`). Without `OPENBLAS_LIB` only saintflow's rates are printed.
//!
//! Run: `OPENBLAS_LIB=/path/libscipy_openblas64_-….so cargo bench -p saintflow-ops --bench gemm_openblas`
//! (`REPS`, default 9; `THREADS`, default "1,2"; `IMPLS`, default "openblas,saintflow",
//! also `saintflow_avx2`, `saintflow_avx512`, `saintflow_generic`, `gemm_crate` and
//! `saintflow_bf16`, the bf16 product where the CPU has AVX512_BF16 (on AMX tiles where
//! it has them), `saintflow_bf16_avx512` and `saintflow_bf16_amx`, the bf16 product on
//! the named tiles;
//! `SHAPES`, default all: 0-based rows of the shape list).

use std::ffi::{c_char, c_int, c_void, CString};
use std::time::Instant;

use saintflow_ops::gemm::{
    amx, gemm_view_bf16, gemm_view_isa, gemm_view_with, Bf16Tiles, Isa, Precision, Trans,
};
use saintflow_ops::{MatMut, MatRef};

type Sgemm = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    i64,
    i64,
    i64,
    f32,
    *const f32,
    i64,
    *const f32,
    i64,
    f32,
    *mut f32,
    i64,
);
type SetThreads = unsafe extern "C" fn(c_int);

struct OpenBlas {
    sgemm: Sgemm,
    set_threads: SetThreads,
    /// The kernels OpenBLAS chose (`SkylakeX`, `Haswell`, …).
    core: String,
}

fn load_openblas() -> Option<OpenBlas> {
    let path = std::env::var("OPENBLAS_LIB").ok()?;
    // OpenBLAS's idle threads spin 2^28 cycles (≈ 0.1 s) after each call before they
    // sleep; the library timed next would share its cores with them (measured: our GEMM
    // at 55 % when timed right after OpenBLAS on 2 threads, 100 % when timed after another
    // library). 2^4 cycles: they sleep at once, read when the library loads.
    if std::env::var_os("OPENBLAS_THREAD_TIMEOUT").is_none() {
        std::env::set_var("OPENBLAS_THREAD_TIMEOUT", "4");
    }
    let c = CString::new(path.clone()).ok()?;
    // SAFETY: dlopen/dlsym with NUL-terminated names; the symbols' C signatures are
    // OpenBLAS's cblas_sgemm and openblas_set_num_threads in their ILP64 (`64_`) build.
    unsafe {
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if h.is_null() {
            eprintln!("dlopen {path} failed");
            return None;
        }
        let sym = |name: &str| -> *mut c_void {
            let n = CString::new(name).unwrap();
            libc::dlsym(h, n.as_ptr() as *const c_char)
        };
        let (s, t) = (
            sym("scipy_cblas_sgemm64_"),
            sym("scipy_openblas_set_num_threads64_"),
        );
        if s.is_null() || t.is_null() {
            eprintln!("{path}: no scipy_cblas_sgemm64_ / scipy_openblas_set_num_threads64_");
            return None;
        }
        let name = sym("scipy_openblas_get_corename64_");
        let core = if name.is_null() {
            "?".to_string()
        } else {
            let f =
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> *const c_char>(name);
            std::ffi::CStr::from_ptr(f()).to_string_lossy().into_owned()
        };
        Some(OpenBlas {
            sgemm: std::mem::transmute::<*mut c_void, Sgemm>(s),
            set_threads: std::mem::transmute::<*mut c_void, SetThreads>(t),
            core,
        })
    }
}

/// Pause before every timed call (see the loop).
const PAUSE_MS: u64 = 30;

fn fill(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i + seed) * 7919) % 1000) as f32 / 1000.0 - 0.5)
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// The machine's bound for these tables: one core's multiply-add rate with nothing to
/// wait for (12 independent chains of register FMAs, the best of 5 timings of 10⁷
/// steps), per vector width the CPU has. A GEMM at this rate spends no cycle outside its
/// FMAs; two threads have twice the bound where each has a core of its own.
fn fma_bound() -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        const CHAINS: usize = 12;
        const STEPS: usize = 10_000_000;
        /// One timing: GFLOP/s of `STEPS` rounds of CHAINS FMAs on `lanes`-float vectors.
        fn rate(lanes: usize, run: unsafe fn(f32) -> f32) -> f64 {
            (0..5)
                .map(|_| {
                    let t0 = Instant::now();
                    // The addend through `black_box` after the clock is read and the sum
                    // through it before: otherwise the pure call moves out of the timing.
                    let y = std::hint::black_box(1e-7);
                    // SAFETY: `run` needs the instruction set its caller checked.
                    std::hint::black_box(unsafe { run(y) });
                    let dt = t0.elapsed().as_secs_f64();
                    (2 * CHAINS * lanes * STEPS) as f64 / dt / 1e9
                })
                .fold(0.0, f64::max)
        }
        /// The CHAINS accumulators after STEPS rounds of acc = acc·x + y, in one vector
        /// type's intrinsics (expanded inside each width's `target_feature` function).
        macro_rules! chains {
            ($set1:ident, $fma:ident, $y:expr) => {{
                let mut acc = [$set1(1.0); CHAINS];
                let (x, y) = ($set1(0.999_999), $set1($y));
                for _ in 0..STEPS {
                    for r in acc.iter_mut() {
                        *r = $fma(*r, x, y);
                    }
                }
                acc
            }};
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(y: f32) -> f32 {
            let acc = chains!(_mm256_set1_ps, _mm256_fmadd_ps, y);
            let mut out = [0f32; 8];
            let sum = acc
                .iter()
                .fold(_mm256_setzero_ps(), |s, r| _mm256_add_ps(s, *r));
            // SAFETY: out holds 8 floats.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), sum) };
            out.iter().sum()
        }
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512(y: f32) -> f32 {
            let acc = chains!(_mm512_set1_ps, _mm512_fmadd_ps, y);
            _mm512_reduce_add_ps(
                acc.iter()
                    .fold(_mm512_setzero_ps(), |s, r| _mm512_add_ps(s, *r)),
            )
        }
        let mut parts = Vec::new();
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            parts.push(format!("AVX2 {:.0} GF/s", rate(8, avx2)));
        }
        if is_x86_feature_detected!("avx512f") {
            parts.push(format!("AVX-512 {:.0} GF/s", rate(16, avx512)));
        }
        (!parts.is_empty()).then(|| format!("FMA bound of one core: {}", parts.join(", ")))
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// One product: C (m×n) = op(A)·op(B), A stored m×k or (ta) k×m, B k×n or (tb) n×k.
struct Shape {
    name: &'static str,
    m: usize,
    k: usize,
    n: usize,
    ta: Trans,
    tb: Trans,
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read from the command line.
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(9);
    let threads: Vec<usize> = std::env::var("THREADS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let impls: Vec<String> = std::env::var("IMPLS")
        .unwrap_or_else(|_| "openblas,saintflow".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    // `WARM=no`: time the first call after each pause (module doc).
    let warm = !matches!(std::env::var("WARM").as_deref(), Ok("no") | Ok("0"));
    let blas = load_openblas();
    let isa = Isa::current();
    println!(
        "saintflow GEMM path: {isa:?}, bf16 on {}; OpenBLAS: {}",
        match (Precision::Bf16.check(), amx::enabled()) {
            (Err(_), _) => "no path here",
            (Ok(()), true) => "AMX tiles",
            (Ok(()), false) => "AVX512_BF16 tiles",
        },
        blas.as_ref()
            .map_or("not loaded".into(), |b| format!("{} kernels", b.core))
    );
    println!(
        "timing: {}",
        if warm {
            "each call after a pause and an untimed call (back to back)"
        } else {
            "the first call after a pause (WARM=no)"
        }
    );
    if let Some(line) = fma_bound() {
        println!("{line}");
    }
    use Trans::{N, T};
    let shapes = [
        Shape {
            name: "nn 8000x512 . 512x512",
            m: 8000,
            k: 512,
            n: 512,
            ta: N,
            tb: N,
        },
        Shape {
            name: "tn (8000x512)' . 8000x512",
            m: 512,
            k: 8000,
            n: 512,
            ta: T,
            tb: N,
        },
        Shape {
            name: "nt 8000x512 . (512x512)'",
            m: 8000,
            k: 512,
            n: 512,
            ta: N,
            tb: T,
        },
        Shape {
            name: "nn 8000x1024 . 1024x512",
            m: 8000,
            k: 1024,
            n: 512,
            ta: N,
            tb: N,
        },
        Shape {
            name: "tn (8000x1024)' . 8000x512",
            m: 1024,
            k: 8000,
            n: 512,
            ta: T,
            tb: N,
        },
        Shape {
            name: "nt 8000x512 . (1024x512)'",
            m: 8000,
            k: 512,
            n: 1024,
            ta: N,
            tb: T,
        },
        // The classifier of a few-class graph (Cora 7, Flickr 7; Reddit 41): narrow C,
        // forward and ∇W (SHAPES=6,7,8; not in the default set).
        Shape {
            name: "nn 5935x1024 . 1024x7",
            m: 5935,
            k: 1024,
            n: 7,
            ta: N,
            tb: N,
        },
        Shape {
            name: "tn (5935x1024)' . 5935x7",
            m: 1024,
            k: 5935,
            n: 7,
            ta: T,
            tb: N,
        },
        Shape {
            name: "nn 5935x1024 . 1024x41",
            m: 5935,
            k: 1024,
            n: 41,
            ta: N,
            tb: N,
        },
        // The JPDC step's 2-class logits: the narrow path (SHAPES=9; not in the default set).
        Shape {
            name: "nn 5935x1024 . 1024x2",
            m: 5935,
            k: 1024,
            n: 2,
            ta: N,
            tb: N,
        },
    ];
    // `SHAPES=1,4`: only those rows of the list above (0-based), e.g. to repeat one cell;
    // default the step's six.
    let only: Option<Vec<usize>> = std::env::var("SHAPES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect());
    let shapes: Vec<&Shape> = shapes
        .iter()
        .enumerate()
        .filter(|(i, _)| only.as_ref().map_or(*i < 6, |o| o.contains(i)))
        .map(|(_, s)| s)
        .collect();
    println!("| threads | shape | {} |", impls.join(" | "));
    println!("|---|---|{}", "---|".repeat(impls.len()));
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
    for &t in &threads {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .unwrap();
        if let Some(b) = &blas {
            // SAFETY: OpenBLAS's thread-count setter.
            unsafe { (b.set_threads)(t as c_int) };
        }
        for &s in &shapes {
            let (ar, ac) = if s.ta == N { (s.m, s.k) } else { (s.k, s.m) };
            let (br, bc) = if s.tb == N { (s.k, s.n) } else { (s.n, s.k) };
            let a = fill(ar * ac, 1);
            let b = fill(br * bc, 2);
            let mut c = vec![0f32; s.m * s.n];
            let mut reference: Option<Vec<f32>> = None;
            let mut times: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
            // One call of library `name` into `c`: false where it is not loaded.
            let call = |name: &str, c: &mut Vec<f32>| -> bool {
                match name {
                    "openblas" => match &blas {
                        Some(bl) => {
                            let ta = if s.ta == N { 111 } else { 112 };
                            let tb = if s.tb == N { 111 } else { 112 };
                            // SAFETY: row-major cblas_sgemm on buffers of the sizes
                            // above (lda = stored columns of A, ldb of B, ldc = n).
                            unsafe {
                                (bl.sgemm)(
                                    101,
                                    ta,
                                    tb,
                                    s.m as i64,
                                    s.n as i64,
                                    s.k as i64,
                                    1.0,
                                    a.as_ptr(),
                                    ac as i64,
                                    b.as_ptr(),
                                    bc as i64,
                                    0.0,
                                    c.as_mut_ptr(),
                                    s.n as i64,
                                )
                            };
                            true
                        }
                        None => false,
                    },
                    "gemm_crate" => {
                        // The `gemm` crate as ops/src/gemm.rs called it before issue 33:
                        // the transposed problem Cᵀ = op(B)ᵀ·op(A)ᵀ, Cᵀ column-major.
                        let (a_rs, a_cs) = if s.ta == N {
                            (ac as isize, 1)
                        } else {
                            (1, ac as isize)
                        };
                        let (b_rs, b_cs) = if s.tb == N {
                            (bc as isize, 1)
                        } else {
                            (1, bc as isize)
                        };
                        let par = if t > 1 {
                            gemm::Parallelism::Rayon(t)
                        } else {
                            gemm::Parallelism::None
                        };
                        // SAFETY: the strides address the row-major buffers above.
                        pool.install(|| unsafe {
                            gemm::gemm(
                                s.n,
                                s.m,
                                s.k,
                                c.as_mut_ptr(),
                                s.n as isize,
                                1,
                                false,
                                b.as_ptr(),
                                b_rs,
                                b_cs,
                                a.as_ptr(),
                                a_rs,
                                a_cs,
                                1.0f32,
                                1.0f32,
                                false,
                                false,
                                false,
                                par,
                            )
                        });
                        true
                    }
                    "saintflow_bf16" => {
                        // bf16 operands, f32 accumulation (issue 33, item 4).
                        let av = MatRef::row_major(&a, ar, ac).unwrap();
                        let bv = MatRef::row_major(&b, br, bc).unwrap();
                        let cv = MatMut::row_major(c, s.m, s.n).unwrap();
                        let bf16 = Precision::Bf16;
                        pool.install(|| gemm_view_with(bf16, av, s.ta, bv, s.tb, cv, false))
                            .unwrap();
                        true
                    }
                    "saintflow_bf16_avx512" | "saintflow_bf16_amx" => {
                        let tiles = match name {
                            "saintflow_bf16_amx" => Bf16Tiles::Amx,
                            _ => Bf16Tiles::Avx512Bf16,
                        };
                        let av = MatRef::row_major(&a, ar, ac).unwrap();
                        let bv = MatRef::row_major(&b, br, bc).unwrap();
                        let cv = MatMut::row_major(c, s.m, s.n).unwrap();
                        pool.install(|| gemm_view_bf16(tiles, av, s.ta, bv, s.tb, cv, false))
                            .unwrap();
                        true
                    }
                    other => {
                        let isa = match other {
                            "saintflow" => Isa::current(),
                            "saintflow_avx2" => Isa::Avx2,
                            "saintflow_avx512" => Isa::Avx512,
                            "saintflow_generic" => Isa::Generic,
                            _ => panic!("unknown IMPLS entry {other}"),
                        };
                        let av = MatRef::row_major(&a, ar, ac).unwrap();
                        let bv = MatRef::row_major(&b, br, bc).unwrap();
                        let cv = MatMut::row_major(c, s.m, s.n).unwrap();
                        pool.install(|| gemm_view_isa(isa, av, s.ta, bv, s.tb, cv, false))
                            .unwrap();
                        true
                    }
                }
            };
            for rep in 0..=reps {
                for (i, name) in impls.iter().enumerate() {
                    // OpenBLAS's idle threads spin for a while after a call, and rayon's
                    // before they sleep: without a pause the library timed next would
                    // share its cores with them.
                    std::thread::sleep(std::time::Duration::from_millis(PAUSE_MS));
                    if warm {
                        // The same call untimed first: what a step sees, products back
                        // to back (AMX and the caches were idle through the pause).
                        call(name, &mut c);
                    }
                    let t0 = Instant::now();
                    let ran = call(name, &mut c);
                    let dt = t0.elapsed().as_secs_f64();
                    if !ran {
                        continue;
                    }
                    if rep == 0 {
                        // Warm-up, checked against the first library's result.
                        match &reference {
                            None => reference = Some(c.clone()),
                            Some(r) => {
                                let worst = r
                                    .iter()
                                    .zip(&c)
                                    .map(|(x, y)| (x - y).abs() / (1.0 + x.abs()))
                                    .fold(0f32, f32::max);
                                // bf16 operands carry 8 bits, 2⁻⁹ per product, and `fill`'s
                                // period-1000 values round alike, so the errors add up (the
                                // tests check bf16 against its own oracle).
                                let tol = if name.contains("bf16") { 0.2 } else { 1e-3 };
                                assert!(worst < tol, "{name} differs at {}: {worst}", s.name);
                            }
                        }
                    } else {
                        times[i].push(dt);
                    }
                }
            }
            let flops = 2.0 * (s.m * s.k * s.n) as f64;
            let meds: Vec<Option<f64>> = times
                .iter()
                .map(|v| (!v.is_empty()).then(|| median(v.clone())))
                .collect();
            let base = meds[0];
            let cells: Vec<String> = meds
                .iter()
                .enumerate()
                .map(|(i, m)| match m {
                    None => "-".into(),
                    Some(m) => {
                        let gf = flops / m / 1e9;
                        match base {
                            Some(b) if i > 0 => {
                                ratios[i].push(b / m);
                                format!("{:.1} ms = {gf:.0} GF/s = {:.0}%", m * 1e3, 100.0 * b / m)
                            }
                            _ => format!("{:.1} ms = {gf:.0} GF/s", m * 1e3),
                        }
                    }
                })
                .collect();
            println!("| {t} | {} | {} |", s.name, cells.join(" | "));
        }
    }
    for (i, r) in ratios.iter().enumerate().skip(1) {
        if !r.is_empty() {
            let geo = (r.iter().map(|x| x.ln()).sum::<f64>() / r.len() as f64).exp();
            let min = r.iter().cloned().fold(f64::INFINITY, f64::min);
            println!(
                "{}: geometric mean {:.1}% of {}, lowest {:.1}%",
                impls[i],
                100.0 * geo,
                impls[0],
                100.0 * min
            );
        }
    }
}
