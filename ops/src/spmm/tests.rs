use super::*;

fn next(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

fn isas() -> Vec<Isa> {
    Isa::supported()
}

/// A random n × n_cols CSR (offsets, indices): every `empty_every`-th row empty, the
/// others with fewer than `max_deg` draws, each row sorted and deduplicated when
/// `sorted` (a store's rows), else in draw order with repeats.
fn random_csr(
    seed: &mut u64,
    n: usize,
    n_cols: usize,
    empty_every: usize,
    max_deg: usize,
    sorted: bool,
) -> (Vec<u32>, Vec<u32>) {
    let (mut offsets, mut indices) = (vec![0u32], vec![]);
    for i in 0..n {
        let deg = if i % empty_every == 0 {
            0
        } else {
            next(seed) as usize % max_deg
        };
        let mut row: Vec<u32> = (0..deg)
            .map(|_| (next(seed) % n_cols as u64) as u32)
            .collect();
        if sorted {
            row.sort_unstable();
            row.dedup();
        }
        indices.extend(row);
        offsets.push(indices.len() as u32);
    }
    (offsets, indices)
}

/// A random weighted CSR (`random_csr`'s, sorted rows) and a random X of `f` columns.
fn random_operands(
    seed: &mut u64,
    (n, n_cols, f): (usize, usize, usize),
    empty_every: usize,
    max_deg: usize,
) -> (Vec<u32>, Vec<u32>, Vec<f32>, Vec<f32>) {
    let (offsets, indices) = random_csr(seed, n, n_cols, empty_every, max_deg, true);
    let vals: Vec<f32> = (0..indices.len())
        .map(|_| (next(seed) % 2000) as f32 / 997.0 - 1.0)
        .collect();
    let xs: Vec<f32> = (0..n_cols * f)
        .map(|_| (next(seed) % 4000) as f32 / 1999.0 - 1.0)
        .collect();
    (offsets, indices, vals, xs)
}

/// Every `How` this CPU runs (packed or in place), with `accumulate`.
fn every_how(accumulate: bool) -> Vec<How> {
    isas()
        .into_iter()
        .flat_map(|isa| [false, true].map(|packed| (isa, packed)))
        .filter(|&(isa, packed)| !(packed && isa == Isa::Generic))
        .map(|(isa, packed)| How {
            isa,
            packed,
            prefetch: !packed,
            accumulate,
        })
        .collect()
}

/// out (row-major, X's width) = or += A·X on path `how`, panel by panel.
fn panels(a: CsrRef<'_>, x: MatRef<'_>, out: &mut [f32], how: How) {
    let f = x.n_cols();
    let out = Out {
        ptr: out.as_mut_ptr(),
        row_stride: f,
    };
    let mut pack = PackBuffer::take(how.packed);
    let mut c = 0;
    while c < f {
        let cols = (f - c).min(PANEL);
        // SAFETY: columns c..c + cols lie within X's and out's width (out holds A's rows
        // × f); the CSR is well formed and names rows of X.
        unsafe { panel(Rows::of(a), x, c, cols, &out, how, &mut pack) };
        c += cols;
    }
    pack.give_back();
}

/// X streamed in parts of rows (a sub-CSR per part, columns renumbered, each part's
/// product continuing the last's through `accumulate`) gives one product's bits on
/// every path this CPU has, packed or in place, however the parts cut the rows.
#[test]
fn streaming_x_in_parts_of_rows_equals_one_product_bit_for_bit() {
    // Sorted rows (a store's), some empty, some with every entry in one part.
    let mut seed = 5u64;
    let (n, n_cols, f) = (37usize, 53usize, 83usize);
    let (offsets, indices, vals, xs) = random_operands(&mut seed, (n, n_cols, f), 7, 15);
    let a = CsrRef {
        offsets: &offsets,
        indices: &indices,
        values: Some(&vals),
        n_cols,
    };
    let mut want = vec![0f32; n * f];
    spmm_blocked(a, &xs, f, &mut want, f).unwrap();
    // Through the public entry point (this CPU's widest path).
    let mut got = vec![0f32; n * f];
    let x = MatRef::row_major(&xs, n_cols, f).unwrap();
    spmm_accumulate(a, x, MatMut::row_major(&mut got, n, f).unwrap()).unwrap();
    assert_eq!(bits(&want), bits(&got), "one part through spmm_accumulate");
    // Every path, X in parts of rows.
    for how in every_how(true) {
        for parts in [
            vec![0, n_cols],
            vec![0, 13, 30, n_cols],
            vec![0, 1, 2, 40, n_cols],
        ] {
            let mut got = vec![0f32; n * f];
            for p in parts.windows(2) {
                let (p0, p1) = (p[0] as u32, p[1] as u32);
                let (mut so, mut si, mut sv) = (vec![0u32], vec![], vec![]);
                for i in 0..n {
                    for k in offsets[i] as usize..offsets[i + 1] as usize {
                        if (p0..p1).contains(&indices[k]) {
                            si.push(indices[k] - p0);
                            sv.push(vals[k]);
                        }
                    }
                    so.push(si.len() as u32);
                }
                let sub = CsrRef {
                    offsets: &so,
                    indices: &si,
                    values: Some(&sv),
                    n_cols: (p1 - p0) as usize,
                };
                let xp = &xs[p0 as usize * f..p1 as usize * f];
                let x = MatRef::row_major(xp, (p1 - p0) as usize, f).unwrap();
                panels(sub, x, &mut got, how);
            }
            assert!(
                bits(&want) == bits(&got),
                "{how:?}, parts {parts:?}: differs from one product"
            );
        }
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A product that does not accumulate writes every element of out, an empty row as
/// zeros, on every path: what lets its callers hand it a recycled buffer of stale
/// values instead of zeroing one first (`Tensor::scratch`).
#[test]
fn a_product_overwrites_every_element_of_out_on_every_path() {
    let mut seed = 11u64;
    let (n, n_cols, f) = (41usize, 29usize, 70usize);
    let (offsets, indices, vals, xs) = random_operands(&mut seed, (n, n_cols, f), 5, 9);
    let a = CsrRef {
        offsets: &offsets,
        indices: &indices,
        values: Some(&vals),
        n_cols,
    };
    let x = MatRef::row_major(&xs, n_cols, f).unwrap();
    for how in every_how(false) {
        let mut outs = [vec![0f32; n * f], vec![f32::NAN; n * f]];
        for got in outs.iter_mut() {
            panels(a, x, got, how);
        }
        assert_eq!(bits(&outs[0]), bits(&outs[1]), "{how:?}");
    }
    // Through the public entry point, feature blocks narrower than the width.
    let mut stale = vec![f32::NAN; n * f];
    spmm_view_blocked(a, x, MatMut::row_major(&mut stale, n, f).unwrap(), 16).unwrap();
    let mut zeroed = vec![0f32; n * f];
    spmm_view_blocked(a, x, MatMut::row_major(&mut zeroed, n, f).unwrap(), 16).unwrap();
    assert_eq!(bits(&zeroed), bits(&stale));
}

/// Every path this CPU can run (plain; AVX2 and AVX-512 where present; packed and in
/// place; with and without prefetching) gives the plain loop's result bit for bit, at
/// every panel width from 1 to 64 (partial vectors), an odd offset and stride (no
/// aligned load anywhere), unweighted and weighted, with empty rows.
#[test]
fn every_path_equals_the_plain_order_bit_for_bit() {
    let mut seed = 11u64;
    let (n, n_cols, stride, c) = (29usize, 41usize, 71usize, 3usize);
    let (offsets, indices) = random_csr(&mut seed, n, n_cols, 5, 12, false);
    let nnz = indices.len();
    let vals: Vec<f32> = (0..nnz)
        .map(|_| (next(&mut seed) % 2000) as f32 / 997.0 - 1.0)
        .collect();
    let xs: Vec<f32> = (0..n_cols * stride)
        .map(|_| (next(&mut seed) % 4000) as f32 / 1999.0 - 1.0)
        .collect();
    let x = MatRef::new(&xs, n_cols, stride, stride).unwrap();
    for weighted in [false, true] {
        let a = CsrRef {
            offsets: &offsets,
            indices: &indices,
            values: weighted.then_some(&vals[..]),
            n_cols,
        };
        for cols in 1..=PANEL {
            let mut want = None;
            for isa in isas() {
                for packed in [false, true] {
                    if packed && isa == Isa::Generic {
                        continue;
                    }
                    for prefetch in [false, true] {
                        let how = How {
                            isa,
                            packed,
                            prefetch,
                            accumulate: false,
                        };
                        let mut got = vec![f32::NAN; n * stride];
                        let out = Out {
                            ptr: got.as_mut_ptr(),
                            row_stride: stride,
                        };
                        let mut pack = PackBuffer::take(packed);
                        // SAFETY: columns c..c + cols lie within X's and out's width
                        // (3 + 64 ≤ 71), the CSR is well formed, out is ours.
                        unsafe { panel(Rows::of(a), x, c, cols, &out, how, &mut pack) };
                        pack.give_back();
                        // Outside the panel's columns nothing is written.
                        for i in 0..n {
                            let row = &got[i * stride..(i + 1) * stride];
                            assert!(row[..c].iter().all(|v| v.is_nan()));
                            assert!(row[c + cols..].iter().all(|v| v.is_nan()));
                        }
                        let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                        match &want {
                            None => want = Some(bits),
                            Some(w) => assert!(
                                *w == bits,
                                "{how:?}, {cols} columns, weighted {weighted}: differs from the plain loop"
                            ),
                        }
                    }
                }
            }
            // The plain loop's value of one element, by hand.
            let i = n - 1;
            let mut s = 0f32;
            for k in offsets[i] as usize..offsets[i + 1] as usize {
                let v = if weighted { vals[k] } else { 1.0 };
                s = v.mul_add(xs[indices[k] as usize * stride + c + cols - 1], s);
            }
            let w = want.unwrap();
            assert_eq!(w[i * stride + c + cols - 1], s.to_bits());
        }
    }
}

#[test]
fn auto_packs_when_cheap_and_prefetches_only_slow_layouts_read_in_place() {
    let n_cols = 4;
    let offsets = [0u32, 8];
    let many = [0u32, 1, 2, 3, 0, 1, 2, 3];
    let dense = CsrRef {
        offsets: &offsets,
        indices: &many,
        values: None,
        n_cols,
    };
    // One entry for a 64-row X: packing would copy more than it gathers.
    let sparse_offsets = [0u32, 1];
    let sparse = CsrRef {
        offsets: &sparse_offsets,
        indices: &[5],
        values: None,
        n_cols: 64,
    };
    // Packing would exceed PACK_MAX_BYTES (a panel of 64 floats per row of X).
    let rows_over = PACK_MAX_BYTES / (PANEL * 4) + 1;
    let huge_offsets = [0u32, rows_over as u32];
    let huge_indices = vec![0u32; rows_over];
    let huge = CsrRef {
        offsets: &huge_offsets,
        indices: &huge_indices,
        values: None,
        n_cols: rows_over,
    };
    // Starts on a cache line; `skip` 1 puts a view one float off it.
    let buf = AlignedVec::zeroed(64 * 1040 + 32);
    let buf = buf.as_slice();
    let view = |skip: usize, rows: usize, stride: usize| {
        MatRef::new(&buf[skip..], rows, 512, stride).unwrap()
    };
    let vector = Isa::current() != Isa::Generic;
    let how = |g, a, x| {
        let h = How::choose(g, a, x, false);
        (h.packed, h.prefetch)
    };
    let slow = view(0, n_cols, 512);
    let good = view(0, n_cols, 528);
    let unaligned = view(1, n_cols, 528);
    // Cheap: packed whatever the layout (where there is a vector unit).
    assert_eq!(how(Gather::Auto, dense, slow), (vector, !vector));
    assert_eq!(how(Gather::Auto, dense, good), (vector, false));
    assert_eq!(how(Gather::Auto, dense, unaligned), (vector, !vector));
    // Too few entries for the rows of X: in place, prefetching on a slow layout only.
    let wide = view(0, 64, 512);
    assert_eq!(how(Gather::Auto, sparse, wide), (false, true));
    let wide_good = view(0, 64, 528);
    assert_eq!(how(Gather::Auto, sparse, wide_good), (false, false));
    // Too large a panel: in place, even when asked (the view is never read, only its
    // layout).
    let one_row = MatRef::new(buf, 1, 512, 512).unwrap();
    assert!(!How::choose(Gather::Auto, huge, one_row, false).packed);
    assert!(!How::choose(Gather::Packed, huge, one_row, false).packed);
    // The caller decides.
    assert_eq!(how(Gather::InPlace, dense, slow), (false, true));
    assert_eq!(how(Gather::Packed, sparse, good), (vector, false));
}

/// A narrow output has fewer column blocks than threads: its rows are split too, at equal
/// shares of the entries (hub rows and runs of empty rows included), and the product is
/// the one lane's bit for bit, overwriting and accumulating, on 2, 3 and 5 threads.
#[test]
fn narrow_outputs_split_their_rows_across_threads_with_the_same_bits() {
    let mut seed = 53;
    let (n, n_cols, f) = (5 * SPLIT_ROWS + 77, 9000, 16);
    let (offsets, mut indices, vals, xs) = random_operands(&mut seed, (n, n_cols, f), 7, 12);
    // A hub: row 3 names every column.
    let hub: Vec<u32> = (0..n_cols as u32).collect();
    let at = offsets[3] as usize..offsets[4] as usize;
    let grown = hub.len() - at.len();
    indices.splice(at, hub);
    let offsets: Vec<u32> = offsets
        .iter()
        .enumerate()
        .map(|(i, &o)| if i > 3 { o + grown as u32 } else { o })
        .collect();
    let vals: Vec<f32> = (0..indices.len()).map(|k| vals[k % vals.len()]).collect();
    let a = CsrRef {
        offsets: &offsets,
        indices: &indices,
        values: Some(&vals),
        n_cols,
    };
    let x = MatRef::row_major(&xs, n_cols, f).unwrap();
    let start: Vec<f32> = (0..n * f).map(|i| (i % 13) as f32 * 0.25).collect();
    let product = |threads: usize, accumulate: bool| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut out = start.clone();
        pool.install(|| {
            let o = MatMut::row_major(&mut out, n, f).unwrap();
            if accumulate {
                spmm_accumulate(a, x, o).unwrap();
            } else {
                run("test", a, x, o, f, Gather::InPlace, false).unwrap();
            }
        });
        bits(&out)
    };
    for accumulate in [false, true] {
        let one = product(1, accumulate);
        for threads in [2, 3, 5] {
            assert!(
                product(threads, accumulate) == one,
                "{threads} threads, accumulate {accumulate}: not one lane's bits"
            );
        }
    }
    // The splits: balanced by entries, covering every row once.
    let how = How::choose(Gather::InPlace, a, x, false);
    let s = row_splits(&how, &offsets, 4);
    assert_eq!((s[0], *s.last().unwrap()), (0, n));
    assert!(s.windows(2).all(|w| w[0] < w[1]), "{s:?}");
    assert_eq!(s.len(), 5, "{s:?}: four ranges");
    let nnz = indices.len();
    let widest = offsets
        .windows(2)
        .map(|w| (w[1] - w[0]) as usize)
        .max()
        .unwrap();
    for w in s.windows(2) {
        let entries = (offsets[w[1]] - offsets[w[0]]) as usize;
        assert!(
            entries.abs_diff(nnz / 4) <= widest,
            "{s:?}: a range of {entries} of {nnz} entries"
        );
    }
}
