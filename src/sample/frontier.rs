//! Frontier sampling with the Dashboard (JPDC Algorithms 3–4; IPDPS 2019 §IV).
//!
//! A frontier of m nodes; each step pops a frontier node u with probability ∝ deg(u),
//! replaces it by a uniformly random neighbour v, and adds v to the sample, until the node
//! budget n is reached. The Dashboard makes a pop O(1) expected instead of O(m):
//!
//! * `db` (DB): η·m·d̄ pins. A frontier node of degree d owns d consecutive pins (at most
//!   `pin_cap`), each holding the node's frontier slot. Probing a uniformly random position
//!   of the used prefix `db[..tail]` until it hits a valid pin selects a node with
//!   probability ∝ its pin count, i.e. ∝ degree. The expected number of probes is
//!   tail / valid ≤ η after a cleanup.
//! * `ia` (IA): per frontier slot, the node and its pin range.
//! * Pop = invalidate the node's pin range (a contiguous fill: vectorised by the compiler,
//!   this is the intra-sampler parallelism); append = fill the next pins at `tail`.
//! * Cleanup when the tail reaches the end: copy each live slot's pin range (walking IA,
//!   never the whole DB) into a second buffer and swap: O(valid pins + m).
//! * Corner case: a node with more pins than the room left after a cleanup grows DB to fit.

use rand_core::RngCore;

use crate::sample::params::SamplerParams;
use crate::sample::{below, SampleError, Sampler};
use crate::store::{Csr, GraphStore};

/// A pin that belongs to no frontier node.
const INVALID: u32 = u32::MAX;

/// One frontier slot's entry in IA.
#[derive(Debug, Clone, Copy)]
struct Slot {
    node: u32,
    start: usize,
    pins: usize,
}

/// The Dashboard: a pin table over the current frontier.
#[derive(Debug, Clone)]
pub struct Dashboard {
    db: Vec<u32>,
    spare: Vec<u32>,
    tail: usize,
    valid: usize,
    ia: Vec<Slot>,
    cleanups: u64,
    grows: u64,
}

impl Dashboard {
    /// An empty Dashboard of `capacity` pins for `slots` frontier slots.
    pub fn new(capacity: usize, slots: usize) -> Self {
        Dashboard {
            db: vec![INVALID; capacity.max(1)],
            spare: Vec::new(),
            tail: 0,
            valid: 0,
            ia: vec![
                Slot {
                    node: 0,
                    start: 0,
                    pins: 0
                };
                slots
            ],
            cleanups: 0,
            grows: 0,
        }
    }

    /// Empties the Dashboard for reuse with exactly `capacity` pins and `slots` slots.
    ///
    /// Exactly: the pin layout (and so which slot a probe hits) depends on the capacity, so
    /// a table grown by an earlier draw must shrink back, or a draw would depend on the
    /// draws before it on the same thread. Invariant used: `db[tail..]` is all INVALID.
    pub fn reset(&mut self, capacity: usize, slots: usize) {
        let used = self.tail.min(capacity);
        self.db.resize(capacity.max(1), INVALID);
        self.db[..used].fill(INVALID);
        self.tail = 0;
        self.valid = 0;
        self.ia.clear();
        self.ia.resize(
            slots,
            Slot {
                node: 0,
                start: 0,
                pins: 0,
            },
        );
    }

    /// Sets frontier slot `slot` to `node` with `pins` pins (the slot must be empty).
    ///
    /// When the tail reaches the end, a cleanup compacts the live pins; if they then fill
    /// more than half of DB (or the new node does not fit at all, the high-degree corner
    /// case), DB grows to twice the live pins plus the new ones. So between two cleanups at
    /// least as many pins are appended as the cleanup copies: cleanup costs O(1) amortised
    /// per pin, whatever the degree skew.
    pub fn put(&mut self, slot: usize, node: u32, pins: usize) {
        if self.tail + pins > self.db.len() {
            self.cleanup();
            if 2 * (self.tail + pins) > self.db.len() {
                let want = 2 * (self.tail + pins);
                self.db.resize(want, INVALID);
                self.grows += 1;
            }
        }
        self.db[self.tail..self.tail + pins].fill(slot as u32);
        self.ia[slot] = Slot {
            node,
            start: self.tail,
            pins,
        };
        self.tail += pins;
        self.valid += pins;
    }

    /// Empties frontier slot `slot`, invalidating its pins; returns its node.
    pub fn take(&mut self, slot: usize) -> u32 {
        let s = self.ia[slot];
        self.db[s.start..s.start + s.pins].fill(INVALID);
        self.valid -= s.pins;
        self.ia[slot].pins = 0;
        s.node
    }

    /// A frontier slot drawn with probability ∝ its pin count, or `None` if no slot has pins.
    pub fn select(&self, rng: &mut impl RngCore) -> Option<usize> {
        if self.valid == 0 {
            return None;
        }
        loop {
            let p = below(rng, self.tail as u64) as usize;
            let s = self.db[p];
            if s != INVALID {
                return Some(s as usize);
            }
        }
    }

    /// The node in frontier slot `slot`.
    pub fn node(&self, slot: usize) -> u32 {
        self.ia[slot].node
    }

    /// Compacts the live pins to the front, walking IA (O(valid + m)), not DB.
    fn cleanup(&mut self) {
        self.spare.clear();
        self.spare.resize(self.db.len(), INVALID);
        let mut tail = 0;
        for (slot, s) in self.ia.iter_mut().enumerate() {
            if s.pins == 0 {
                continue;
            }
            self.spare[tail..tail + s.pins].fill(slot as u32);
            s.start = tail;
            tail += s.pins;
        }
        std::mem::swap(&mut self.db, &mut self.spare);
        self.tail = tail;
        self.cleanups += 1;
    }

    /// Cleanups so far.
    pub fn cleanups(&self) -> u64 {
        self.cleanups
    }

    /// Times DB had to grow for a node with more pins than the free room.
    pub fn grows(&self) -> u64 {
        self.grows
    }

    /// Pins currently valid.
    pub fn valid_pins(&self) -> usize {
        self.valid
    }

    /// DB capacity in pins.
    pub fn capacity(&self) -> usize {
        self.db.len()
    }
}

sampler_params! {
    /// Parameters of the frontier sampler (plan `kind = "frontier"`).
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct FrontierParams {
        /// Frontier size m.
        pub frontier: usize = 1000,
        /// Node budget n.
        ///
        /// Nodes added to the sample, counting the initial frontier and repeats (the
        /// sample's unique nodes are fewer).
        pub budget: usize = 8000,
        /// Dashboard size factor η.
        ///
        /// DB starts at η·m·d̃ pins, d̃ the size-biased mean pin count, and is kept at
        /// least η times the live pins.
        pub eta: f64 = 2.0,
        /// At most this many pins per node (IPDPS 2019 used 30 on skewed graphs).
        ///
        /// `None`: the node's degree.
        pub pin_cap: Option<usize> = None,
    }
}

impl SamplerParams for FrontierParams {
    const KIND: &'static str = "frontier";
    const DOC: &'static str = "Frontier sampling with the Dashboard";
    type Sampler<'g> = FrontierSampler<'g>;

    fn build<'g>(
        &self,
        _: &'g GraphStore,
        graph: Csr<'g>,
    ) -> Result<FrontierSampler<'g>, SampleError> {
        FrontierSampler::new(graph, *self)
    }

    /// Every pop adds one node: the initial frontier and the pops make n draws.
    fn expected_nodes(&self) -> Option<usize> {
        Some(self.budget)
    }
}

/// The frontier sampler over one graph.
pub struct FrontierSampler<'g> {
    graph: Csr<'g>,
    params: FrontierParams,
    /// Nodes with at least one neighbour: the only ones that can be in a frontier.
    candidates: crate::sample::EdgeNodes,
    /// DB capacity, η·m·d̄ over the candidates.
    capacity: usize,
}

impl<'g> FrontierSampler<'g> {
    /// A frontier sampler over `graph`.
    pub fn new(graph: Csr<'g>, params: FrontierParams) -> Result<Self, SampleError> {
        if params.frontier == 0 || params.budget < params.frontier {
            return Err(SampleError::Param(format!(
                "frontier: expected 1 ≤ m ≤ n, got m = {}, n = {}",
                params.frontier, params.budget
            )));
        }
        if !(params.eta.is_finite() && params.eta >= 1.0) {
            return Err(SampleError::Param(format!(
                "frontier: η expected ≥ 1, got {}",
                params.eta
            )));
        }
        if params.pin_cap == Some(0) {
            return Err(SampleError::Param(
                "frontier: pin cap expected ≥ 1, got 0".into(),
            ));
        }
        let candidates = crate::sample::EdgeNodes::new(graph);
        if candidates.is_empty() {
            return Err(SampleError::NoEdges);
        }
        // Frontier nodes are reached through edges, so their pin counts follow the
        // size-biased distribution: mean Σp²/Σp, not Σp/N. Sizing DB with it avoids
        // growing during the first draws on skewed graphs.
        let (sum, sum_sq) = candidates.iter().fold((0f64, 0f64), |(s, q), v| {
            let p = pins_of(graph.degree(v), params.pin_cap) as f64;
            (s + p, q + p * p)
        });
        let mean_pins = sum_sq / sum;
        let m = params.frontier.min(candidates.len());
        let capacity = (params.eta * m as f64 * mean_pins).ceil() as usize;
        Ok(FrontierSampler {
            graph,
            params,
            candidates,
            capacity,
        })
    }

    /// Samples with a caller-owned Dashboard (exposed for tests and benches).
    pub fn sample_with(
        &self,
        db: &mut Dashboard,
        rng: &mut impl RngCore,
        out: &mut Vec<u32>,
    ) -> Result<(), SampleError> {
        let m = self.params.frontier.min(self.candidates.len());
        for slot in 0..m {
            let v = self
                .candidates
                .get(below(rng, self.candidates.len() as u64) as usize);
            db.put(slot, v, pins_of(self.graph.degree(v), self.params.pin_cap));
            out.push(v);
        }
        for _ in m..self.params.budget {
            let Some(slot) = db.select(rng) else { break };
            let u = db.take(slot);
            let v = crate::sample::random_neighbor(self.graph, u, rng)?;
            db.put(slot, v, pins_of(self.graph.degree(v), self.params.pin_cap));
            out.push(v);
        }
        Ok(())
    }

    /// A fresh Dashboard sized for this sampler.
    pub fn dashboard(&self) -> Dashboard {
        Dashboard::new(
            self.capacity,
            self.params.frontier.min(self.candidates.len()),
        )
    }
}

fn pins_of(degree: usize, cap: Option<usize>) -> usize {
    cap.map_or(degree, |c| degree.min(c))
}

impl Sampler for FrontierSampler<'_> {
    fn name(&self) -> String {
        let p = &self.params;
        format!(
            "frontier(m={}, n={}, eta={}{})",
            p.frontier,
            p.budget,
            p.eta,
            p.pin_cap
                .map_or(String::new(), |c| format!(", pin_cap={c}"))
        )
    }

    fn graph(&self) -> Csr<'_> {
        self.graph
    }

    fn sample_nodes(
        &self,
        rng: &mut crate::sample::SampleRng,
        out: &mut Vec<u32>,
    ) -> Result<(), SampleError> {
        // One Dashboard per thread, reused across subgraphs (no allocation per draw).
        thread_local! {
            static DB: std::cell::RefCell<Option<Dashboard>> = const { std::cell::RefCell::new(None) };
        }
        DB.with(|cell| {
            let mut cell = cell.borrow_mut();
            let db = cell.get_or_insert_with(|| self.dashboard());
            db.reset(
                self.capacity,
                self.params.frontier.min(self.candidates.len()),
            );
            self.sample_with(db, rng, out)
        })
    }
}
