//! `partition`: `partition_store` (k-way partition, GAD augmentation, one store per rank)
//! on the base store (64 nodes) with every option from the input: k (0..=79: beyond N
//! too), the ranks P (none, or 0..=79), ε and α as raw f64 bits (NaN, ∞ and negatives
//! included), the walk length L (0..=65535) and the seed.
//!
//! Property: the call returns; when it succeeds, `partition.json` reads back as the report
//! returned, every rank store it lists opens verified and is the one listed
//! (`check_rank_store`), the source check accepts the partitioned store, and the ranks' own
//! nodes add up to N, each node owned once.

use saintflow::dist::partition::write::{check_rank_store, check_source, read_report};
use saintflow::dist::partition::{
    partition_store, AugmentOptions, PartitionOptions, PartitionSpec,
};
use saintflow::progress::Progress;
use saintflow::store::GraphStore;

use crate::base;
use crate::input::Input;

/// The fuzz target's body (see the module documentation).
pub fn partition(data: &[u8]) {
    let mut input = Input::new(data);
    let k = usize::from(input.u8() % 80);
    let ranks = match input.u8() {
        0 => None,
        r => Some(usize::from(r % 80)),
    };
    let epsilon = f64::from_bits(input.u64());
    let alpha = f64::from_bits(input.u64());
    let layers = usize::from(input.u16());
    let seed = input.u64();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let src = base::write_store(tmp.path(), "g.sf");
    let out = tmp.path().join("parts");
    let spec = PartitionSpec {
        partition: PartitionOptions { k, epsilon, seed },
        augment: AugmentOptions {
            layers,
            alpha,
            seed,
            ..AugmentOptions::default()
        },
        ranks,
        ..PartitionSpec::default()
    };
    let report = match partition_store(&src, &out, &spec, false, &Progress::hidden()) {
        Ok(r) => r,
        Err(e) => {
            let _ = e.to_string();
            assert!(!out.exists(), "a refused partition left {}", out.display());
            return;
        }
    };
    let read = read_report(&out).unwrap_or_else(|e| panic!("partition.json unreadable: {e}"));
    assert_eq!(read.ranks.len(), report.ranks.len());
    let source = GraphStore::open(&src).expect("base store");
    check_source(&read, &out, &source).unwrap_or_else(|e| panic!("{e}"));
    let mut own = 0;
    for (r, rank) in read.ranks.iter().enumerate() {
        let store = GraphStore::open_verified(out.join(&rank.store))
            .unwrap_or_else(|e| panic!("rank {r}'s store fails verification: {e}"));
        check_rank_store(&read, &out, r, &store).unwrap_or_else(|e| panic!("{e}"));
        own += rank.own;
    }
    assert_eq!(own as u64, report.n_nodes, "own nodes over the ranks");
}
