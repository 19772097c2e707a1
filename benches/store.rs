//! Store benchmarks: generator throughput against the disk's sequential-write bound,
//! GraphSAINT import of the shared datasets, and `open` (mmap + cheap checks) against
//! reading every section onto the heap.
//!
//! Run: `cargo bench --bench store` (the import group needs ../shared/data).

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use saintflow::progress::Progress;
use saintflow::store::format::SectionId;
use saintflow::store::gen::{generate_kronecker, KroneckerSpec};
use saintflow::store::import::{import_graphsaint, GraphSaintOptions};
use saintflow::store::GraphStore;

/// "kron16_d16": 2^16 nodes, degree 16, F = 16.
fn kron16() -> KroneckerSpec {
    KroneckerSpec {
        scale: 16,
        degree: 16.0,
        n_features: 16,
        n_classes: 4,
        ..Default::default()
    }
}

fn store_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

fn generator(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let spec = kron16();
    let out = tmp.path().join("g.sf");
    generate_kronecker(&spec, &out, true, &Progress::hidden()).unwrap();
    // At this size the CSR builder keeps its one bucket in memory, so the generator's
    // unavoidable I/O is the store itself.
    let bytes = store_bytes(&out);
    let mut g = c.benchmark_group("gen_kronecker/kron16_d16");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    g.throughput(Throughput::Elements(spec.draws()));
    g.bench_function("saintflow", |b| {
        b.iter(|| generate_kronecker(&spec, &out, true, &Progress::hidden()).unwrap())
    });
    // Bound: writing the same number of bytes sequentially, fsynced.
    let buf = vec![7u8; 1 << 20];
    let path = tmp.path().join("bound.bin");
    g.bench_function("write_bound", |b| {
        b.iter(|| {
            let mut f = File::create(&path).unwrap();
            let mut left = bytes;
            while left > 0 {
                let k = left.min(buf.len() as u64) as usize;
                f.write_all(&buf[..k]).unwrap();
                left -= k as u64;
            }
            f.sync_all().unwrap();
        })
    });
    g.finish();
}

fn import(c: &mut Criterion) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut g = c.benchmark_group("import_graphsaint");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for name in ["cora", "blogcatalog"] {
        let dir = data.join(name);
        if !dir.join("adj_full.npz").exists() {
            eprintln!("{} missing: import/{name} skipped", dir.display());
            continue;
        }
        let out = tmp.path().join(format!("{name}.sf"));
        g.bench_function(name, |b| {
            b.iter(|| {
                import_graphsaint(
                    &dir,
                    &out,
                    &GraphSaintOptions::default(),
                    true,
                    &Progress::hidden(),
                )
                .unwrap()
            })
        });
    }
    g.finish();
}

fn open(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = tmp.path().join("g.sf");
    generate_kronecker(&kron16(), &out, true, &Progress::hidden()).unwrap();
    let mut g = c.benchmark_group("open/kron16_d16");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(store_bytes(&out)));
    g.bench_function("mmap_open", |b| {
        b.iter(|| black_box(GraphStore::open(&out).unwrap()))
    });
    // Baseline: what a loader that reads every section onto the heap pays.
    g.bench_function("read_to_heap", |b| {
        b.iter(|| {
            for id in SectionId::ALL {
                black_box(std::fs::read(out.join(id.file_name())).unwrap());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, generator, import, open);
criterion_main!(benches);
