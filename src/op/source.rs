//! The [`GraphSource`]s of the engine: [`StoreSource`] reads a memory-mapped store through a sampler; tests and
//! embedders may implement their own.

use std::sync::{Arc, OnceLock};

use crate::ir::source::{FeatureCsr, FeatureRows};
use crate::ir::{GraphSource, OpError, TargetLabels, Targets};
use crate::sample::{
    attach_targets, saint_target_weight, sample_subgraph, LinkSampling, NormCounts, Sampler,
    Subgraph,
};
use crate::store::{GraphStore, Labels, Role};

/// A store sampled by a sampler: the training path.
pub struct StoreSource<'g> {
    store: &'g GraphStore,
    sampler: Box<dyn Sampler + 'g>,
    seed: u64,
    clip_to: usize,
    norm: Option<NormCounts>,
    loss_role: Role,
    n_loss: usize,
    will_need: bool,
    link: Option<LinkSampling>,
    /// The whole store's features compressed, made on the first sparse request of a store
    /// whose feature matrix is at most `whole_sparse` bytes.
    sparse: OnceLock<Arc<FeatureCsr>>,
    whole_sparse: usize,
    /// The same per node type (typed stores, `sparse_type_features`), rows from 0 at the
    /// type's first node, made on the type's first sparse request under the same bound.
    sparse_types: std::sync::Mutex<Vec<Option<Arc<FeatureCsr>>>>,
    /// A whole-graph sampler's subgraph (the same at every step), built on the first
    /// request with its relations and shared from then on ([`GraphSource::fixed_sample`];
    /// full-batch training rebuilt the whole graph's pattern, transpose and relation rows
    /// every step, then copied them).
    whole: OnceLock<Arc<Subgraph>>,
}

/// A store whose dense feature matrix is at most this many bytes has it compressed once
/// (one pass over it, then at most 2 × density of its size in memory: 8 bytes per nonzero)
/// when the planner makes the products by the features sparse; a larger one, out of core
/// perhaps, has each step's rows compressed as they are read, from the mapping.
pub const WHOLE_SPARSE_BYTES: usize = 256 << 20;

impl<'g> StoreSource<'g> {
    /// Samples `store` with `sampler` (seeded by `seed`, node counts clipped to a multiple
    /// of `clip_to`); the loss covers nodes of `loss_role`, weighted 1/(their count) —
    /// or GraphSAINT's 1/λ_v when `norm` counts are given.
    pub fn new(
        store: &'g GraphStore,
        sampler: Box<dyn Sampler + 'g>,
        seed: u64,
        clip_to: usize,
        norm: Option<NormCounts>,
        loss_role: Role,
    ) -> StoreSource<'g> {
        let n_loss = store.role_count(loss_role);
        StoreSource {
            store,
            sampler,
            seed,
            clip_to,
            norm,
            loss_role,
            n_loss,
            will_need: false,
            link: None,
            sparse: OnceLock::new(),
            whole_sparse: WHOLE_SPARSE_BYTES,
            sparse_types: std::sync::Mutex::new(Vec::new()),
            whole: OnceLock::new(),
        }
    }

    /// A link plan's source: every subgraph carries its target edges and their negatives
    /// ([`attach_targets`]), weighted by GraphSAINT's edge normalisation when the source has
    /// normalisation counts.
    pub fn link(mut self, sampling: Option<LinkSampling>) -> Self {
        self.link = sampling;
        self
    }

    /// Compress the whole feature matrix once only when it is at most `bytes` (default
    /// [`WHOLE_SPARSE_BYTES`]); 0: every step's rows compressed as read.
    pub fn whole_sparse_features(mut self, bytes: usize) -> Self {
        self.whole_sparse = bytes;
        self
    }

    /// With `on`, every sampled subgraph's feature rows are asked of the kernel
    /// ([`GraphStore::will_need_features`]) as soon as it is drawn: the prefetching
    /// executor draws subgraphs steps ahead, so their pages are read in the background
    /// while earlier steps compute, and the gather finds them in memory. For stores whose
    /// features do not stay in the page cache; elsewhere it only costs the calls.
    pub fn will_need_features(mut self, on: bool) -> Self {
        self.will_need = on;
        self
    }
}

impl StoreSource<'_> {
    /// Subgraph `step`, drawn and built.
    fn draw(&self, step: u64) -> Result<Subgraph, OpError> {
        let mut sub = sample_subgraph(self.sampler.as_ref(), self.seed, step, self.clip_to)
            .map_err(|e| OpError::Source(format!("{}: {e}", self.store.path().display())))?;
        if let Some(cfg) = &self.link {
            let graph = self.sampler.graph();
            // 1/λ_e = N_pre / (fraction · C_e · M): the step's loss estimates the mean over
            // the M undirected edges of the sampled graph.
            let weight = self
                .norm
                .as_ref()
                .map(|norm| saint_target_weight(norm, cfg.fraction, graph));
            attach_targets(
                &mut sub,
                graph,
                cfg,
                self.seed,
                step,
                weight.as_ref().map(|w| w as &dyn Fn(u64) -> f32),
            );
        }
        if self.will_need {
            self.store.will_need_features(&sub.nodes);
        }
        // A typed store's subgraphs carry their relations (what `A_mean[r]` reads); a
        // homogeneous store's are as they always were.
        if self.store.is_typed() {
            crate::sample::typed::attach_relations(self.store, &mut sub)
                .map_err(|e| OpError::Source(format!("{}: {e}", self.store.path().display())))?;
        }
        Ok(sub)
    }
}

impl GraphSource for StoreSource<'_> {
    fn sample(&self, step: u64) -> Result<Subgraph, OpError> {
        match self.fixed_sample()? {
            Some(sub) => Ok((*sub).clone()),
            None => self.draw(step),
        }
    }

    fn fixed_sample(&self) -> Result<Option<Arc<Subgraph>>, OpError> {
        if self.link.is_some() || !self.sampler.whole_graph() {
            return Ok(None);
        }
        if let Some(sub) = self.whole.get() {
            return Ok(Some(Arc::clone(sub)));
        }
        let sub = Arc::new(self.draw(0)?);
        Ok(Some(Arc::clone(self.whole.get_or_init(|| sub))))
    }

    fn types(&self) -> Option<&crate::store::TypesMeta> {
        self.store.types()
    }

    fn type_features(&self, t: usize, nodes: &[u32], out: &mut [f32]) -> Result<(), OpError> {
        let s = self.store;
        if t >= s.n_node_types() {
            return Err(OpError::Source(format!(
                "{}: node type {t} of {}",
                s.path().display(),
                s.n_node_types()
            )));
        }
        let tf = s.type_features(t);
        if out.len() != nodes.len() * tf.width {
            return Err(OpError::Source(format!(
                "type features of `{}`: {} values for {} rows of width {}",
                s.node_type_name(t),
                out.len(),
                nodes.len(),
                tf.width
            )));
        }
        if tf.width == 0 {
            return Ok(());
        }
        for (&v, o) in nodes.iter().zip(out.chunks_exact_mut(tf.width)) {
            let row = tf.row(v).ok_or_else(|| {
                OpError::Source(format!(
                    "{}: node {v} is not of type `{}`",
                    s.path().display(),
                    s.node_type_name(t)
                ))
            })?;
            o.copy_from_slice(row);
        }
        Ok(())
    }

    /// Each row's nonzeros read from the mapping (no dense copy of the rows).
    fn sparse_type_features(
        &self,
        t: usize,
        nodes: &[u32],
        width: usize,
    ) -> Result<FeatureCsr, OpError> {
        let s = self.store;
        if t >= s.n_node_types() || s.type_features(t).width != width {
            return Err(OpError::Source(format!(
                "{}: node type {t} has no features of width {width}",
                s.path().display()
            )));
        }
        let tf = s.type_features(t);
        let not_of_type = |v: u32| {
            OpError::Source(format!(
                "{}: node {v} is not of type `{}`",
                s.path().display(),
                s.node_type_name(t)
            ))
        };
        let mut m = FeatureCsr {
            offsets: Vec::with_capacity(nodes.len() + 1),
            ..FeatureCsr::default()
        };
        m.offsets.push(0);
        if std::mem::size_of_val(tf.data) <= self.whole_sparse {
            // The type's rows compressed once; each request copies its rows' nonzeros.
            let whole = {
                let mut cache = self.sparse_types.lock().unwrap_or_else(|e| e.into_inner());
                if cache.len() <= t {
                    cache.resize(t + 1, None);
                }
                cache[t]
                    .get_or_insert_with(|| {
                        Arc::new(FeatureCsr::from_rows(tf.data.chunks_exact(width.max(1))))
                    })
                    .clone()
            };
            for &v in nodes {
                let k = v
                    .checked_sub(tf.start)
                    .filter(|&k| (k as usize) < tf.count)
                    .ok_or_else(|| not_of_type(v))?;
                let (c, x) = whole.row(k as usize);
                m.cols.extend_from_slice(c);
                m.vals.extend_from_slice(x);
                m.offsets.push(m.cols.len() as u64);
            }
            return Ok(m);
        }
        for &v in nodes {
            m.push_row(tf.row(v).ok_or_else(|| not_of_type(v))?);
        }
        Ok(m)
    }

    fn n_features(&self) -> usize {
        self.store.n_features()
    }

    fn n_classes(&self) -> usize {
        self.store.n_classes()
    }

    fn multilabel(&self) -> bool {
        matches!(self.store.labels(), Labels::Multi { .. })
    }

    fn features(&self, nodes: &[u32], out: &mut [f32]) -> Result<(), OpError> {
        self.store
            .gather_features(nodes, out)
            .map_err(|e| OpError::Source(e.to_string()))
    }

    fn sparse_features(&self, nodes: &[u32]) -> Result<FeatureRows, OpError> {
        let s = self.store;
        let row = |v: u32| {
            s.feature_row(v)
                .map_err(|e| OpError::Source(format!("{}: {e}", s.path().display())))
        };
        if std::mem::size_of_val(s.features()) <= self.whole_sparse {
            if let Some(&v) = nodes.iter().find(|&&v| v as usize >= s.n_nodes()) {
                row(v)?;
            }
            let f = s.n_features();
            let whole = self.sparse.get_or_init(|| {
                Arc::new(FeatureCsr::from_rows(s.features().chunks_exact(f.max(1))))
            });
            return Ok(FeatureRows::Whole(whole.clone()));
        }
        let mut m = FeatureCsr {
            offsets: Vec::with_capacity(nodes.len() + 1),
            ..FeatureCsr::default()
        };
        m.offsets.push(0);
        for &v in nodes {
            m.push_row(row(v)?);
        }
        Ok(FeatureRows::Local(m))
    }

    fn targets(&self, sub: &Subgraph) -> Result<Targets, OpError> {
        let c = self.n_classes();
        let labels = self.store.labels();
        let in_loss = |v: u32| self.store.role(v) == self.loss_role && labels.is_labelled(v);
        let weights = match &self.norm {
            Some(norm) => {
                let mut w = norm.loss_weights(sub, self.n_loss);
                for (wi, &v) in w.iter_mut().zip(&sub.nodes) {
                    if !in_loss(v) {
                        *wi = 0.0;
                    }
                }
                w
            }
            None => {
                let inv = 1.0 / self.n_loss.max(1) as f32;
                sub.nodes
                    .iter()
                    .map(|&v| if in_loss(v) { inv } else { 0.0 })
                    .collect()
            }
        };
        let labels = match labels {
            Labels::Multi { .. } => {
                let mut t = vec![0.0f32; sub.n_nodes() * c];
                for (i, &v) in sub.nodes.iter().enumerate() {
                    for k in 0..c {
                        if labels.has_class(v, k as u32) {
                            t[i * c + k] = 1.0;
                        }
                    }
                }
                TargetLabels::Multi(t)
            }
            Labels::Single(l) => {
                TargetLabels::Single(sub.nodes.iter().map(|&v| l[v as usize]).collect())
            }
        };
        Ok(Targets {
            classes: c,
            labels,
            weights,
        })
    }

    fn degree(&self, node: u32) -> usize {
        self.sampler.graph().degree(node)
    }

    fn aggregator_weights(&self, sub: &Subgraph) -> Option<Vec<f32>> {
        self.norm.as_ref().map(|n| n.aggregator_weights(sub))
    }
    /// A typed store's relation degree, when the sampler draws its full graph (the
    /// relations are the full graph's; a training graph that is a part of it has other
    /// degrees).
    fn relation_degree(&self, r: usize, node: u32) -> Option<usize> {
        let s = self.store;
        let full = self.sampler.graph().n_entries() == s.full().n_entries();
        (s.is_typed() && full && r < s.n_relations()).then(|| s.relation(r).csr.degree(node))
    }
    fn node_weights(&self, sub: &Subgraph) -> Option<Vec<f32>> {
        self.norm.as_ref().map(|n| n.node_weights(sub))
    }
}

/// An in-memory graph whose every step samples the same whole graph: for tests, examples
/// and small experiments (the gradient checks of every op and plan run on one).
#[derive(Clone, Debug)]
pub struct MemorySource {
    /// The graph, as a subgraph of itself (nodes 0..n).
    pub graph: Subgraph,
    /// n × F features, row-major.
    pub features: Vec<f32>,
    /// F.
    pub n_features: usize,
    /// Targets of all nodes.
    pub targets: Targets,
    /// Per-entry aggregator weights, if any.
    pub aggregator_weights: Option<Vec<f32>>,
    /// Per-node weights for statistics over the nodes ([`GraphSource::node_weights`]), if
    /// any.
    pub node_weights: Option<Vec<f32>>,
    /// A link plan's targets and negatives, drawn per step on the whole graph
    /// ([`MemorySource::with_link`]).
    pub link: Option<LinkSampling>,
}

impl MemorySource {
    /// A random symmetric graph on `n` nodes with about `degree` neighbours per node (node
    /// 0 is left isolated, so empty rows are always exercised), N(0, 1) features, random
    /// labels (multi-label: each class with probability ½) and random positive loss
    /// weights on about half of the nodes (the others masked out).
    pub fn random(
        n: usize,
        degree: usize,
        n_features: usize,
        classes: usize,
        multilabel: bool,
        seed: u64,
    ) -> MemorySource {
        use rand::{Rng, SeedableRng};
        let mut rng = crate::sample::SampleRng::seed_from_u64(seed);
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n];
        for u in 1..n {
            for _ in 0..degree.div_ceil(2) {
                let v = rng.random_range(1..n);
                if v != u {
                    rows[u].push(v as u32);
                    rows[v].push(u as u32);
                }
            }
        }
        let mut offsets = vec![0u32];
        let mut indices = Vec::new();
        for r in &mut rows {
            r.sort_unstable();
            r.dedup();
            indices.extend_from_slice(r);
            offsets.push(indices.len() as u32);
        }
        let nnz = indices.len();
        let graph = Subgraph {
            nodes: (0..n as u32).collect(),
            offsets,
            indices,
            parent_entries: (0..nnz as u64).collect(),
            link: None,
            typed: None,
        };
        let features = (0..n * n_features)
            .map(|_| {
                let (a, b): (f64, f64) = (rng.random_range(1e-9..1.0), rng.random());
                ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
            })
            .collect();
        let labels = if multilabel {
            TargetLabels::Multi(
                (0..n * classes)
                    .map(|_| f32::from(u8::from(rng.random_bool(0.5))))
                    .collect(),
            )
        } else {
            TargetLabels::Single(
                (0..n)
                    .map(|_| rng.random_range(0..classes as u32))
                    .collect(),
            )
        };
        let weights = (0..n)
            .map(|_| {
                if rng.random_bool(0.5) {
                    rng.random_range(0.5..1.5) / n as f32
                } else {
                    0.0
                }
            })
            .collect();
        MemorySource {
            graph,
            features,
            n_features,
            targets: Targets {
                classes,
                labels,
                weights,
            },
            aggregator_weights: Some((0..nnz).map(|_| rng.random_range(0.5..2.0)).collect()),
            // Drawn last, so the values above are those of sources made before it existed.
            node_weights: Some((0..n).map(|_| rng.random_range(0.25..4.0)).collect()),
            link: None,
        }
    }

    /// Every step's subgraph (the whole graph) carries targets and negatives drawn by
    /// `sampling`, seeded by the step: what a link plan's gradient check runs on.
    pub fn with_link(mut self, sampling: LinkSampling) -> MemorySource {
        self.link = Some(sampling);
        self
    }
}

impl GraphSource for MemorySource {
    fn sample(&self, step: u64) -> Result<Subgraph, OpError> {
        let mut sub = self.graph.clone();
        if let Some(cfg) = &self.link {
            let offsets: Vec<u64> = self.graph.offsets.iter().map(|&o| u64::from(o)).collect();
            let csr =
                crate::store::Csr::new(&offsets, &self.graph.indices).map_err(OpError::Source)?;
            attach_targets(&mut sub, csr, cfg, 0x11ec, step, None);
        }
        Ok(sub)
    }
    fn n_features(&self) -> usize {
        self.n_features
    }
    fn n_classes(&self) -> usize {
        self.targets.classes
    }
    fn multilabel(&self) -> bool {
        matches!(self.targets.labels, TargetLabels::Multi(_))
    }
    fn features(&self, nodes: &[u32], out: &mut [f32]) -> Result<(), OpError> {
        let f = self.n_features;
        for (i, &v) in nodes.iter().enumerate() {
            let v = v as usize;
            let row = self
                .features
                .get(v * f..(v + 1) * f)
                .ok_or_else(|| OpError::Source(format!("node {v} out of range")))?;
            out[i * f..(i + 1) * f].copy_from_slice(row);
        }
        Ok(())
    }
    fn targets(&self, sub: &Subgraph) -> Result<Targets, OpError> {
        if sub.nodes.len() != self.graph.nodes.len() {
            return Err(OpError::Source(
                "MemorySource serves its whole graph only".into(),
            ));
        }
        Ok(self.targets.clone())
    }
    fn degree(&self, node: u32) -> usize {
        self.graph.neighbors(node as usize).len()
    }
    fn aggregator_weights(&self, _: &Subgraph) -> Option<Vec<f32>> {
        self.aggregator_weights.clone()
    }
    fn node_weights(&self, _: &Subgraph) -> Option<Vec<f32>> {
        self.node_weights.clone()
    }
}
