//! Oracles and bench baselines for the samplers: the straightforward frontier sampler
//! (O(m) per pop: a linear scan of the frontier's cumulative degrees) and chi-square
//! helpers for the statistical tests.

use rand_core::RngCore;

use crate::sample::{below, nodes_with_edges, SampleError, SampleRng, Sampler};
use crate::store::Csr;

/// Frontier sampling without the Dashboard: every pop scans the m frontier degrees.
pub struct NaiveFrontier<'g> {
    graph: Csr<'g>,
    frontier: usize,
    budget: usize,
    candidates: Vec<u32>,
    /// Textbook form: each pop rebuilds the cumulative degrees from the graph's offsets
    /// ([`NaiveFrontier::pop`]); otherwise the degrees are cached in a dense array with
    /// their running total (the strongest O(m)-per-pop baseline).
    textbook: bool,
}

impl<'g> NaiveFrontier<'g> {
    /// A naive frontier sampler (frontier size m, node budget n) with cached degrees.
    pub fn new(graph: Csr<'g>, frontier: usize, budget: usize) -> Result<Self, SampleError> {
        let candidates = nodes_with_edges(graph);
        if candidates.is_empty() {
            return Err(SampleError::NoEdges);
        }
        Ok(NaiveFrontier {
            graph,
            frontier,
            budget,
            candidates,
            textbook: false,
        })
    }

    /// The textbook form: cumulative degrees recomputed from the graph at every pop.
    pub fn textbook(graph: Csr<'g>, frontier: usize, budget: usize) -> Result<Self, SampleError> {
        Ok(NaiveFrontier {
            textbook: true,
            ..Self::new(graph, frontier, budget)?
        })
    }

    /// Pops one frontier index with probability ∝ degree by a linear scan.
    pub fn pop(graph: Csr<'_>, frontier: &[u32], rng: &mut impl RngCore) -> usize {
        let total: u64 = frontier.iter().map(|&v| graph.degree(v) as u64).sum();
        let mut r = below(rng, total);
        for (i, &v) in frontier.iter().enumerate() {
            let d = graph.degree(v) as u64;
            if r < d {
                return i;
            }
            r -= d;
        }
        unreachable!("r < total")
    }
}

impl Sampler for NaiveFrontier<'_> {
    fn name(&self) -> String {
        let kind = if self.textbook { "textbook" } else { "cached" };
        format!(
            "naive-frontier-{kind}(m={}, n={})",
            self.frontier, self.budget
        )
    }

    fn graph(&self) -> Csr<'_> {
        self.graph
    }

    /// The straightforward algorithm, written fairly: the frontier's degrees live in a
    /// dense array with their running total, so a pop is one linear scan of m integers.
    fn sample_nodes(&self, rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError> {
        let m = self.frontier.min(self.candidates.len());
        let mut fs: Vec<u32> = (0..m)
            .map(|_| self.candidates[below(rng, self.candidates.len() as u64) as usize])
            .collect();
        let mut deg: Vec<u64> = fs.iter().map(|&v| self.graph.degree(v) as u64).collect();
        let mut total: u64 = deg.iter().sum();
        out.extend_from_slice(&fs);
        for _ in m..self.budget {
            if self.textbook {
                let i = Self::pop(self.graph, &fs, rng);
                let v = crate::sample::random_neighbor(self.graph, fs[i], rng)?;
                fs[i] = v;
                out.push(v);
                continue;
            }
            let mut r = below(rng, total);
            let i = deg
                .iter()
                .position(|&d| {
                    let hit = r < d;
                    r = r.wrapping_sub(d);
                    hit
                })
                .expect("r < total");
            let v = crate::sample::random_neighbor(self.graph, fs[i], rng)?;
            let d = self.graph.degree(v) as u64;
            total = total - deg[i] + d;
            fs[i] = v;
            deg[i] = d;
            out.push(v);
        }
        Ok(())
    }
}

/// Pearson's chi-square statistic of observed counts against expected counts (categories
/// with zero expectation are skipped).
pub fn chi_square(observed: &[u64], expected: &[f64]) -> f64 {
    observed
        .iter()
        .zip(expected)
        .filter(|&(_, &e)| e > 0.0)
        .map(|(&o, &e)| (o as f64 - e).powi(2) / e)
        .sum()
}

/// The chi-square critical value for `df` degrees of freedom at p = 0.001: exact for
/// df 1 and 2, else the Wilson–Hilferty approximation (1.2% high at df 5, 0.1% at df 100).
pub fn chi_square_critical(df: usize) -> f64 {
    match df {
        1 => return 10.828,               // z_{0.9995}²
        2 => return -2.0 * 0.001f64.ln(), // exponential tail: 13.816
        _ => {}
    }
    let k = df as f64;
    let z = 3.090_232; // standard normal quantile at 0.999
    let t = 1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt();
    k * t * t * t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn critical_values_match_tables() {
        // Tabulated χ²_{0.999}: df 5 → 20.515, df 10 → 29.588, df 100 → 149.449.
        for (df, want, tol) in [
            (1, 10.828, 1e-4),
            (2, 13.816, 1e-4),
            (5, 20.515, 0.015),
            (10, 29.588, 0.01),
            (100, 149.449, 0.002),
        ] {
            let got = chi_square_critical(df);
            assert!((got - want).abs() / want < tol, "df {df}: {got} vs {want}");
        }
    }
}
