//! Neighbourhood heuristics of a pair (u, v) over a graph (Liben-Nowell & Kleinberg 2007;
//! the baselines of the OGB link leaderboards), with Γ(x) the neighbours of x:
//!
//! * common neighbours CN = |Γ(u) ∩ Γ(v)|;
//! * Adamic–Adar AA = Σ_{w ∈ Γ(u) ∩ Γ(v)} 1 / ln deg(w);
//! * resource allocation RA = Σ_{w ∈ Γ(u) ∩ Γ(v)} 1 / deg(w).
//!
//! A common neighbour w of u ≠ v has degree ≥ 2, so ln deg(w) > 0. The intersection walks
//! the two sorted rows together (O(d_u + d_v)), or, when one row is over 32 times the
//! other, binary-searches the short row's ids in the long one (O(d_s log d_l): a hub's row
//! is not walked for every pair). Pairs are scored in parallel (rayon); rows are read
//! checked (ids < N), so a damaged store is an error, not a panic.

use rayon::prelude::*;

use crate::store::{Csr, StoreError};

/// A heuristic's name on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Heuristic {
    /// Common neighbours (`cn`).
    CommonNeighbours,
    /// Adamic–Adar (`aa`).
    AdamicAdar,
    /// Resource allocation (`ra`).
    ResourceAllocation,
}

impl Heuristic {
    /// Every heuristic, in the order `eval-link` reports them.
    pub const ALL: [Heuristic; 3] = [
        Heuristic::CommonNeighbours,
        Heuristic::AdamicAdar,
        Heuristic::ResourceAllocation,
    ];

    /// `cn`, `aa` or `ra`.
    pub fn name(self) -> &'static str {
        match self {
            Heuristic::CommonNeighbours => "cn",
            Heuristic::AdamicAdar => "aa",
            Heuristic::ResourceAllocation => "ra",
        }
    }

    /// The name in words.
    pub fn title(self) -> &'static str {
        match self {
            Heuristic::CommonNeighbours => "common neighbours",
            Heuristic::AdamicAdar => "Adamic-Adar",
            Heuristic::ResourceAllocation => "resource allocation",
        }
    }

    /// Parses `cn`, `aa` or `ra`; an unknown name is an error naming the known ones.
    pub fn parse(s: &str) -> Result<Heuristic, String> {
        let s = s.trim();
        Heuristic::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown heuristic {s:?}, expected one of cn, aa, ra{}",
                    crate::suggest::did_you_mean(s, Heuristic::ALL.iter().map(|h| h.name()))
                )
            })
    }

    /// The score of (u, v) over `graph`; an id ≥ N (u, v or a stored neighbour) is an error.
    pub fn score(self, graph: Csr<'_>, u: u32, v: u32) -> Result<f64, StoreError> {
        let (a, b) = (graph.checked_neighbors(u)?, graph.checked_neighbors(v)?);
        let weight = |w: u32| {
            let d = graph.degree(w) as f64;
            match self {
                Heuristic::CommonNeighbours => 1.0,
                Heuristic::AdamicAdar => 1.0 / d.ln(),
                Heuristic::ResourceAllocation => 1.0 / d,
            }
        };
        let mut sum = 0.0;
        for_each_common(a, b, |w| sum += weight(w));
        Ok(sum)
    }

    /// The scores of the pairs `pairs` (flat: u₀, v₀, u₁, v₁, …), in parallel.
    pub fn scores(self, graph: Csr<'_>, pairs: &[u32]) -> Result<Vec<f64>, StoreError> {
        pairs
            .par_chunks_exact(2)
            .map(|p| self.score(graph, p[0], p[1]))
            .collect()
    }
}

/// Calls `f` on every id in both sorted rows, ascending.
pub fn for_each_common(a: &[u32], b: &[u32], mut f: impl FnMut(u32)) {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.len().saturating_mul(32) < long.len() {
        for &w in short {
            if long.binary_search(&w).is_ok() {
                f(w);
            }
        }
        return;
    }
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                f(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 0–1, 0–2, 0–3, 1–2, 1–3, 2–4, 3–4, 4–5 (symmetric, sorted rows).
    fn graph() -> (Vec<u64>, Vec<u32>) {
        let rows: [&[u32]; 6] = [
            &[1, 2, 3],
            &[0, 2, 3],
            &[0, 1, 4],
            &[0, 1, 4],
            &[2, 3, 5],
            &[4],
        ];
        crate::store::mmap::csr_arrays(&rows)
    }

    #[test]
    fn cn_aa_ra_by_hand() {
        let (o, i) = graph();
        let g = Csr::new(&o, &i).unwrap();
        // Γ(0) ∩ Γ(1) = {2, 3}, degrees 3 and 3.
        // Γ(0) ∩ Γ(4) = {2, 3}; Γ(1) ∩ Γ(5) = {}; Γ(2) ∩ Γ(3) = {0, 1, 4}: degrees 3, 3, 3.
        // Γ(4) ∩ Γ(0) = {2, 3}; Γ(5) ∩ Γ(2) = {4}: degree 3.
        let cases: [(u32, u32, f64, f64, f64); 4] = [
            (0, 1, 2.0, 2.0 / 3f64.ln(), 2.0 / 3.0),
            (1, 5, 0.0, 0.0, 0.0),
            (2, 3, 3.0, 3.0 / 3f64.ln(), 1.0),
            (5, 2, 1.0, 1.0 / 3f64.ln(), 1.0 / 3.0),
        ];
        for (u, v, cn, aa, ra) in cases {
            for (h, want) in [
                (Heuristic::CommonNeighbours, cn),
                (Heuristic::AdamicAdar, aa),
                (Heuristic::ResourceAllocation, ra),
            ] {
                let got = h.score(g, u, v).unwrap();
                assert!(
                    (got - want).abs() < 1e-12,
                    "{h:?}({u}, {v}) = {got}, expected {want}"
                );
                assert_eq!(got, h.score(g, v, u).unwrap(), "symmetric");
            }
        }
        let all = Heuristic::CommonNeighbours
            .scores(g, &[0, 1, 1, 5, 2, 3])
            .unwrap();
        assert_eq!(all, vec![2.0, 0.0, 3.0]);
        let e = Heuristic::AdamicAdar
            .score(g, 0, 6)
            .unwrap_err()
            .to_string();
        assert!(e.contains("node id 6 out of range"), "{e}");
    }

    #[test]
    fn both_intersections_agree() {
        let long: Vec<u32> = (0..1000).map(|x| x * 3).collect();
        for short in [vec![0u32, 3, 4, 2997], vec![], vec![5, 6, 2999, 3000]] {
            let mut got = Vec::new();
            for_each_common(&short, &long, |w| got.push(w));
            let want: Vec<u32> = short
                .iter()
                .copied()
                .filter(|x| x % 3 == 0 && *x < 3000)
                .collect();
            assert_eq!(got, want);
            let mut merged = Vec::new();
            for_each_common(&long[..4], &short, |w| merged.push(w));
            let want: Vec<u32> = short
                .iter()
                .copied()
                .filter(|x| long[..4].contains(x))
                .collect();
            assert_eq!(merged, want);
        }
    }

    #[test]
    fn names_parse_and_unknown_ones_are_refused() {
        for h in Heuristic::ALL {
            assert_eq!(Heuristic::parse(h.name()).unwrap(), h);
        }
        let e = Heuristic::parse("ca").unwrap_err();
        assert!(
            e.contains("unknown heuristic \"ca\", expected one of cn, aa, ra"),
            "{e}"
        );
    }
}
