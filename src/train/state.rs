//! The training state, fresh, back from a checkpoint and into one: what JPDC's Algorithm 2
//! carries from step to step (the weights W and the optimiser's moments) and where the run
//! stands (epoch, step, the best validation so far, the seconds of earlier sessions). Also
//! what a run claims of its outputs before it starts.

use std::collections::BTreeMap;
use std::path::Path;

use super::checkpoint::{load_params, save_params, Checkpoint, EarlyState, SavedTensor};
use super::{Result, TrainError};
use crate::dist::{DistState, StepSync};
use crate::ir::Params;
use crate::metrics::Metrics;
use crate::plan::{Eval, Keep, Lowered, Optimizer};
use crate::store::GraphStore;

/// The best validation metrics so far, their epoch and their parameters.
pub(super) struct Best {
    pub(super) val: Metrics,
    pub(super) epoch: usize,
    pub(super) params: Params,
}

/// Everything a step changes, and what a checkpoint saves.
pub(super) struct TrainState {
    pub(super) params: Params,
    pub(super) opt: OptState,
    /// Epochs begun (the current one included while it runs).
    pub(super) epoch: usize,
    /// Steps done.
    pub(super) step: u64,
    pub(super) best: Option<Best>,
    /// Seconds spent in earlier sessions: a resumed run's clock goes on from them.
    pub(super) elapsed: f64,
    /// Where early stopping stands.
    pub(super) early: EarlyState,
    /// The names in `params` that are state, not parameters (the batchnorms' running
    /// statistics: saved apart in the checkpoint, no optimiser).
    pub(super) state_names: Vec<String>,
}

/// What one validation decided: whether its parameters are the best so far, and whether
/// the run stops early after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Verdict {
    pub(super) best: bool,
    pub(super) stop: bool,
}

/// What a checkpoint of this run is tied to.
pub(super) struct Identity<'a> {
    pub(super) plan_hash: u64,
    pub(super) seed: u64,
    /// The store's identity, or a job's (every part's, [`StepSync::graph_id`]).
    pub(super) graph_id: u64,
    pub(super) store: &'a GraphStore,
    /// A job's name in words ([`StepSync::job_name`]); None alone.
    pub(super) job: Option<String>,
}

impl TrainState {
    /// The state a run starts from: the checkpoint's when `resume` names one that exists
    /// (the run's checkpoint when it resumes; checked against `id`, and the consensus state
    /// handed to `sync`), else fresh (parameters from `id`'s seed, or from `init_from`'s
    /// file; `optimizer`'s state zero). With it, when resumed, the log position the
    /// checkpoint saved (None when it had no log). `total` is the run's number of epochs:
    /// a checkpoint past it is refused (issue 55 item 8: a crafted epoch of 10¹⁸ resumed as
    /// a finished run).
    pub(super) fn start(
        init_from: Option<&Path>,
        optimizer: Optimizer,
        resume: Option<&Path>,
        lowered: &Lowered,
        id: &Identity<'_>,
        sync: &mut dyn StepSync,
        total: usize,
    ) -> Result<(TrainState, Option<Option<u64>>)> {
        let state_decls = lowered.state_decls();
        let params = match init_from {
            // An export holds the running statistics beside the parameters: both read.
            Some(path) => {
                let mut all = lowered.params.clone();
                all.extend(state_decls.iter().cloned());
                super::export::load_safetensors(path, &all)?
            }
            None => {
                let mut p = Params::init(&lowered.params, id.seed);
                for (name, t) in Params::init(&state_decls, id.seed).iter() {
                    p.insert(name.clone(), t.clone());
                }
                p
            }
        };
        let state_names: Vec<String> = state_decls.into_iter().map(|d| d.name).collect();
        let trainable = {
            let mut p = params.clone();
            p.retain(|n| !state_names.iter().any(|s| s == n));
            p
        };
        let mut state = TrainState {
            state_names,
            opt: OptState::new(optimizer, lowered, &trainable),
            params,
            epoch: 0,
            step: 0,
            best: None,
            elapsed: 0.0,
            early: EarlyState::default(),
        };
        let resumed = match resume {
            Some(path) if path.exists() => Some(state.resume(path, id, lowered, sync, total)?),
            _ => None,
        };
        Ok((state, resumed))
    }

    /// Takes the state of the checkpoint at `path`; returns its log position.
    fn resume(
        &mut self,
        path: &Path,
        id: &Identity<'_>,
        lowered: &Lowered,
        sync: &mut dyn StepSync,
        total: usize,
    ) -> Result<Option<u64>> {
        let c = Checkpoint::load(path)?;
        c.check_matches(path, id.plan_hash, id.seed)?;
        if c.epoch > total {
            return Err(TrainError::Checkpoint {
                path: path.to_path_buf(),
                what: format!(
                    "epoch: past this run's end, expected at most {total} completed epochs (the plan's, or --epochs), got {}; give --epochs {} or more to continue it",
                    c.epoch, c.epoch
                ),
            });
        }
        match &id.job {
            Some(job) => c.check_graph_id(path, id.graph_id, job)?,
            None => c.check_graph(path, id.store)?,
        }
        sync.restore(c.dist.as_ref(), path)?;
        self.params = with_state(load_params(&c.params), &c.state);
        check_decls(&self.params, &lowered.params, "parameter", path)?;
        check_decls(&self.params, &lowered.state_decls(), "state", path)?;
        OptState::restore(&mut self.opt.m, &c.opt_m, path)?;
        OptState::restore(&mut self.opt.v, &c.opt_v, path)?;
        self.opt.t = c.opt_t;
        self.epoch = c.epoch;
        self.step = c.step;
        self.elapsed = c.elapsed;
        self.early = c.early.clone().unwrap_or_default();
        if let (Some(bp), Some(bv)) = (&c.best_params, c.best_val) {
            self.best = Some(Best {
                val: bv,
                epoch: c.best_epoch,
                params: with_state(load_params(bp), c.best_state.as_deref().unwrap_or(&[])),
            });
        }
        Ok(c.log_pos)
    }

    /// Writes the state to `path` (atomically), `elapsed` seconds into the run, with the
    /// log's position and a job's consensus state.
    pub(super) fn save(
        &self,
        path: &Path,
        id: &Identity<'_>,
        elapsed: f64,
        log_pos: Option<u64>,
        dist: Option<DistState>,
    ) -> Result<()> {
        Checkpoint {
            plan_hash: id.plan_hash,
            seed: id.seed,
            epoch: self.epoch,
            step: self.step,
            params: self.split(&self.params).0,
            opt_m: OptState::save(&self.opt.m),
            opt_v: OptState::save(&self.opt.v),
            opt_t: self.opt.t,
            best_params: self.best.as_ref().map(|b| self.split(&b.params).0),
            best_epoch: self.best.as_ref().map_or(0, |b| b.epoch),
            best_val: self.best.as_ref().map(|b| b.val),
            elapsed,
            log_pos,
            graph_id: id.graph_id,
            dist,
            best_link: self.best.as_ref().and_then(|b| b.val.link),
            early: Some(self.early.clone()),
            best_loss: self.best.as_ref().and_then(|b| b.val.loss),
            state: self.split(&self.params).1,
            // None for a plan without state: its checkpoint is the last format's plus the
            // two empty fields.
            best_state: self
                .best
                .as_ref()
                .map(|b| self.split(&b.params).1)
                .filter(|s| !s.is_empty()),
        }
        .save(path)
    }

    /// `params` saved as (parameters, state).
    fn split(&self, params: &Params) -> (Vec<SavedTensor>, Vec<SavedTensor>) {
        save_params(params)
            .into_iter()
            .partition(|t| !self.state_names.contains(&t.name))
    }

    /// One optimiser step over every parameter, with its gradient: `grads` yields
    /// (name, gradient).
    pub(super) fn update<'g>(
        &mut self,
        grads: impl IntoIterator<Item = (&'g str, &'g [f32])>,
    ) -> Result<()> {
        self.opt.t += 1;
        for (name, g) in grads {
            let p = self
                .params
                .get_mut(name)
                .expect("every parameter initialised");
            self.opt.update(name, &mut p.data, p.cols, g)?;
        }
        Ok(())
    }

    /// Validation metrics `m` of the current parameters, judged by `eval`'s rule
    /// ([`Eval::watch`]; with none, `selection`'s figure strictly better than its best so
    /// far): kept with them when they are the best (and `eval` keeps the best), and counted
    /// towards `eval`'s patience.
    pub(super) fn record_val(
        &mut self,
        m: Metrics,
        eval: &Eval,
        selection: impl Fn(&Metrics) -> f64,
    ) -> Verdict {
        let figures = |m: &Metrics| -> Vec<f64> {
            match eval.watch.is_empty() {
                true => vec![selection(m)],
                // A figure the evaluation could not give never makes progress.
                false => eval
                    .watch
                    .iter()
                    .map(|w| w.value(m).unwrap_or(f64::NEG_INFINITY))
                    .collect(),
            }
        };
        let now = figures(&m);
        let e = &mut self.early;
        if e.bests.is_empty() {
            // A checkpoint written before early stopping has the best metrics only.
            if let Some(b) = &self.best {
                e.bests = figures(&b.val);
            }
        }
        let first = e.bests.len() != now.len();
        let (best, progress) = if first {
            (true, true)
        } else if eval.watch.is_empty() {
            let better = now[0] > e.bests[0];
            (better, better)
        } else {
            let ge = |(x, b): (&f64, &f64)| x >= b;
            let pairs = || now.iter().zip(&e.bests);
            (pairs().all(ge), pairs().any(ge))
        };
        // The best of each figure so far (under the default rule the new figure when it
        // was strictly better, else the old: the same maximum).
        match first {
            true => e.bests = now,
            false => e
                .bests
                .iter_mut()
                .zip(&now)
                .for_each(|(b, &x)| *b = b.max(x)),
        }
        e.since = if progress { 0 } else { e.since + 1 };
        let stop = eval.patience.is_some_and(|p| e.since >= p as u64);
        if best && eval.keep == Keep::Best {
            self.best = Some(Best {
                val: m,
                epoch: self.epoch,
                params: self.params.clone(),
            });
        }
        Verdict { best, stop }
    }
}

/// xxh3-64 of every parameter's name and bytes, in name order: what the parts of a job
/// compare after each epoch ([`StepSync::params_agree`]).
pub(super) fn params_hash(params: &Params) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for (name, t) in params.iter() {
        h.update(name.as_bytes());
        for x in &t.data {
            h.update(&x.to_le_bytes());
        }
    }
    h.digest()
}

/// g + λ · ∂(Σ_c ‖W[:, c]‖)/∂W for a row-major W of `cols` columns: column c's entries
/// plus λ · W[:, c] / ‖W[:, c]‖ (nothing for a column of zeros, where the norm has no
/// gradient: the subgradient 0 is taken).
fn with_column_lasso(w: &[f32], cols: usize, g: &[f32], lambda: f32) -> Vec<f32> {
    let mut norms = vec![0f64; cols];
    for row in w.chunks_exact(cols.max(1)) {
        norms
            .iter_mut()
            .zip(row)
            .for_each(|(n, &v)| *n += f64::from(v) * f64::from(v));
    }
    let scale: Vec<f32> = norms
        .iter()
        .map(|&n| {
            if n > 0.0 {
                (f64::from(lambda) / n.sqrt()) as f32
            } else {
                0.0
            }
        })
        .collect();
    w.iter()
        .zip(g)
        .enumerate()
        .map(|(k, (&v, &gv))| gv + scale[k % cols.max(1)] * v)
        .collect()
}

/// The optimiser's state: Adam's two moments (SGD's momentum in `m`) and its step count.
pub(super) struct OptState {
    kind: Optimizer,
    weight_decay: BTreeMap<String, f32>,
    lasso: BTreeMap<String, f32>,
    /// Parameters updated by rows (`Lowered::sparse_rows`).
    sparse_rows: std::collections::BTreeSet<String>,
    t: u64,
    m: BTreeMap<String, Vec<f32>>,
    v: BTreeMap<String, Vec<f32>>,
}

impl OptState {
    fn new(kind: Optimizer, lowered: &Lowered, params: &Params) -> OptState {
        let zeros: BTreeMap<String, Vec<f32>> = params
            .iter()
            .map(|(n, t)| (n.clone(), vec![0.0; t.data.len()]))
            .collect();
        OptState {
            kind,
            weight_decay: lowered.weight_decay.clone(),
            lasso: lowered.lasso.clone(),
            sparse_rows: lowered.sparse_rows.clone(),
            t: 0,
            v: if matches!(kind, Optimizer::Adam(_)) {
                zeros.clone()
            } else {
                BTreeMap::new()
            },
            m: zeros,
        }
    }

    /// The learning rate of the steps that follow (a phase's).
    pub(super) fn set_lr(&mut self, lr: f64) {
        self.kind = self.kind.with_lr(lr);
    }

    fn update(
        &mut self,
        name: &str,
        p: &mut [f32],
        cols: usize,
        g: &[f32],
    ) -> Result<(), TrainError> {
        let lassoed;
        let g = match self.lasso.get(name) {
            Some(&l) => {
                lassoed = with_column_lasso(p, cols, g, l);
                &lassoed[..]
            }
            None => g,
        };
        if self.sparse_rows.contains(name) && cols > 0 {
            return self.update_rows(name, p, cols, g);
        }
        let span = 0..p.len();
        self.update_run(name, (p, g), span)
    }

    /// A sparsely updated parameter (issue 57: a featureless type's table): the optimiser
    /// step on the rows whose gradient is not all zero, runs of consecutive such rows at
    /// once; the other rows keep their values and their moments, as PyTorch's `SparseAdam`
    /// leaves the rows absent from a sparse gradient (a touched row whose gradient is
    /// exactly zero counts as untouched here). Adam's bias correction uses the run's step
    /// count t, as for every parameter (SparseAdam's per-parameter count: the same whenever
    /// every step touches the table, as full-batch training does).
    fn update_rows(
        &mut self,
        name: &str,
        p: &mut [f32],
        cols: usize,
        g: &[f32],
    ) -> Result<(), TrainError> {
        let rows = g.len() / cols;
        let touched = |i: usize| g[i * cols..(i + 1) * cols].iter().any(|&x| x != 0.0);
        let mut i = 0;
        while i < rows {
            if !touched(i) {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < rows && touched(j) {
                j += 1;
            }
            let span = i * cols..j * cols;
            let run = (&mut p[span.clone()], &g[span.clone()]);
            self.update_run(name, run, span)?;
            i = j;
        }
        Ok(())
    }

    /// The optimiser on `p`, `g`, the elements `span` of parameter `name`.
    fn update_run(
        &mut self,
        name: &str,
        (p, g): (&mut [f32], &[f32]),
        span: std::ops::Range<usize>,
    ) -> Result<(), TrainError> {
        let wd = f64::from(self.weight_decay.get(name).copied().unwrap_or(0.0));
        let m = &mut self.m.get_mut(name).expect("state per parameter")[span.clone()];
        let r = match self.kind {
            Optimizer::Adam(a) => {
                let v = &mut self.v.get_mut(name).expect("state per parameter")[span];
                saintflow_ops::optim::Adam {
                    weight_decay: wd,
                    ..a
                }
                .step(self.t, p, g, m, v)
            }
            Optimizer::Sgd(s) => saintflow_ops::optim::Sgd {
                weight_decay: wd,
                ..s
            }
            .step(p, g, m),
        };
        r.map_err(|e| TrainError::Run(format!("optimiser on `{name}`: {e}")))
    }

    fn save(map: &BTreeMap<String, Vec<f32>>) -> Vec<SavedTensor> {
        map.iter()
            .map(|(n, d)| SavedTensor {
                name: n.clone(),
                rows: 1,
                cols: d.len(),
                data: d.clone(),
            })
            .collect()
    }

    fn restore(
        map: &mut BTreeMap<String, Vec<f32>>,
        saved: &[SavedTensor],
        path: &Path,
    ) -> Result<(), TrainError> {
        for (name, buf) in map.iter_mut() {
            let s = saved
                .iter()
                .find(|s| &s.name == name)
                .filter(|s| s.data.len() == buf.len())
                .ok_or_else(|| TrainError::Checkpoint {
                    path: path.to_path_buf(),
                    what: format!("no optimiser state of the right size for `{name}`"),
                })?;
            buf.copy_from_slice(&s.data);
        }
        Ok(())
    }
}

/// `params` with the state tensors `state` added.
fn with_state(mut params: Params, state: &[SavedTensor]) -> Params {
    for (name, t) in load_params(state).iter() {
        params.insert(name.clone(), t.clone());
    }
    params
}

/// Every parameter the plan declares (`what` "parameter") or every running statistic
/// (`what` "state"), present in the checkpoint with its shape.
fn check_decls(
    params: &Params,
    decls: &[crate::ir::ParamDecl],
    what: &str,
    path: &Path,
) -> Result<(), TrainError> {
    for d in decls {
        let wrong = match params.get(&d.name) {
            Some(t) if (t.rows, t.cols) == (d.rows, d.cols) => continue,
            Some(t) => format!(
                "{what} `{}` is {}×{}, the plan declares {}×{}",
                d.name, t.rows, t.cols, d.rows, d.cols
            ),
            None if what == "state" => format!(
                "state `{}` (a batchnorm's running statistics) is missing",
                d.name
            ),
            None => format!("{what} `{}` is missing", d.name),
        };
        return Err(TrainError::Checkpoint {
            path: path.to_path_buf(),
            what: wrong,
        });
    }
    Ok(())
}

/// What a run checks and holds before it touches its outputs (issue 28): the checkpoint
/// is not inside a store (item 12); the checkpoint and the log are claimed for the run's
/// life, a second writer refused naming the holder (item 10; only where the run `writes`
/// them: a job writes them once); the checkpoint's disk is there (item 13). Returns the
/// claims, held until dropped.
pub(super) fn guard_outputs(
    ckpt: Option<&Path>,
    log: Option<&Path>,
    writes: bool,
    lowered: &Lowered,
) -> Result<Vec<crate::atomic::OutputLock>, TrainError> {
    // Issue 28, item 12: a checkpoint never goes into a store's directory.
    if let Some(path) = ckpt {
        if let Some(dir) = path
            .parent()
            .filter(|d| crate::store::writer::is_store_dir(d))
        {
            return Err(TrainError::Checkpoint {
                path: path.to_path_buf(),
                what: format!(
                    "{} is a graph store: a checkpoint goes in a directory of its own (e.g. --checkpoint run/)",
                    dir.display()
                ),
            });
        }
    }
    // Issue 28, item 10: one writer per checkpoint and log, held for the whole run; a
    // second run sharing either is refused, naming the holder, before it reads or
    // truncates anything.
    let claims = {
        let mut claims = Vec::new();
        let outputs = [
            (ckpt.filter(|_| writes), "--checkpoint"),
            (log.filter(|_| writes), "--log"),
        ];
        for (path, flag) in outputs.into_iter().filter_map(|(p, f)| Some((p?, f))) {
            let claim = crate::atomic::claim_output(path)
                .map_err(|e| TrainError::io(path, "claim (lock)", e))?;
            match claim {
                // Its `.NAME.lock` goes with the run (issue 58: a clean run left two).
                Ok(lock) => claims.push(lock.removed_on_drop(path)),
                Err(pid) => {
                    return Err(TrainError::Run(format!(
                        "{}: another run is writing it ({}); wait for it to end, or give this run another {flag}",
                        path.display(),
                        pid.map_or("PID unknown".into(), |p| format!("PID {p}"))
                    )))
                }
            }
        }
        claims
    };
    // Issue 28, item 13: the checkpoint's disk before any work: the parameters, Adam's two
    // moments and the best parameters, twice while a new one replaces the old atomically.
    if let Some(path) = ckpt.filter(|_| writes) {
        let values: u64 = lowered
            .params
            .iter()
            .map(|d| (d.rows * d.cols) as u64)
            .sum();
        let need = 2 * (4 * 4 * values + (64 << 10));
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Ok(free) = fs4::available_space(dir) {
            if need > free {
                return Err(TrainError::Checkpoint {
                    path: path.to_path_buf(),
                    what: format!(
                        "needs about {} of disk while written ({values} parameter values, with Adam's moments and the best parameters, twice while replaced atomically); {} has {} free",
                        crate::machine::human(u128::from(need)),
                        dir.display(),
                        crate::machine::human(u128::from(free))
                    ),
                });
            }
        }
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::with_column_lasso;

    /// Issue 57: a sparsely updated table (`Lowered::sparse_rows`): rows with a gradient
    /// take Adam's step exactly as the dense update gives them (three steps, weight decay
    /// on), rows without one keep their value and both moments, bit for bit — also a row
    /// that had a gradient at an earlier step (its moments are not decayed).
    #[test]
    fn sparse_rows_update_only_rows_with_a_gradient() {
        use super::{OptState, Optimizer};
        use std::collections::{BTreeMap, BTreeSet};
        let (rows, cols) = (5, 3);
        let adam = saintflow_ops::optim::Adam::default();
        let state = |sparse: bool| OptState {
            kind: Optimizer::Adam(adam),
            weight_decay: BTreeMap::from([("E".to_string(), 0.01)]),
            lasso: BTreeMap::new(),
            sparse_rows: if sparse {
                BTreeSet::from(["E".to_string()])
            } else {
                BTreeSet::new()
            },
            t: 0,
            m: BTreeMap::from([("E".to_string(), vec![0.0; rows * cols])]),
            v: BTreeMap::from([("E".to_string(), vec![0.0; rows * cols])]),
        };
        let (mut sparse, mut dense) = (state(true), state(false));
        let init: Vec<f32> = (0..rows * cols).map(|i| 0.1 * i as f32 - 0.4).collect();
        let (mut ps, mut pd) = (init.clone(), init.clone());
        // Step 1 touches rows 0, 1, 3; steps 2 and 3 rows 1 and 3 only.
        let touched = [vec![0, 1, 3], vec![1, 3], vec![1, 3]];
        let mut frozen = (vec![0f32; cols], vec![0f32; cols], vec![0f32; cols]);
        for (step, rows_touched) in touched.iter().enumerate() {
            let mut g = vec![0f32; rows * cols];
            for &r in rows_touched {
                for c in 0..cols {
                    g[r * cols + c] = 0.3 - 0.05 * (r * cols + c) as f32 + step as f32 * 0.1;
                }
            }
            sparse.t += 1;
            dense.t += 1;
            sparse.update("E", &mut ps, cols, &g).unwrap();
            // The dense oracle: the same step on the touched rows only.
            for &r in rows_touched {
                let span = r * cols..(r + 1) * cols;
                let m = &mut dense.m.get_mut("E").unwrap()[span.clone()];
                let v = &mut dense.v.get_mut("E").unwrap()[span.clone()];
                saintflow_ops::optim::Adam {
                    weight_decay: 0.01,
                    ..adam
                }
                .step(dense.t, &mut pd[span.clone()], &g[span.clone()], m, v)
                .unwrap();
            }
            if step == 0 {
                frozen = (
                    ps[0..cols].to_vec(),
                    sparse.m["E"][0..cols].to_vec(),
                    sparse.v["E"][0..cols].to_vec(),
                );
            }
        }
        assert_eq!(ps, pd);
        assert_eq!(sparse.m["E"], dense.m["E"]);
        assert_eq!(sparse.v["E"], dense.v["E"]);
        // Rows 2 and 4: never touched, as they started.
        for r in [2, 4] {
            let span = r * cols..(r + 1) * cols;
            assert_eq!(ps[span.clone()], init[span.clone()]);
            assert!(sparse.m["E"][span.clone()].iter().all(|&x| x == 0.0));
            assert!(sparse.v["E"][span].iter().all(|&x| x == 0.0));
        }
        // Row 0: touched at step 1 only, then left as it was.
        assert_ne!(frozen.0, init[0..cols]);
        assert_eq!(ps[0..cols], frozen.0);
        assert_eq!(sparse.m["E"][0..cols], frozen.1);
        assert_eq!(sparse.v["E"][0..cols], frozen.2);
        // A dense parameter would have moved row 2 by weight decay alone.
        let mut whole = state(false);
        let mut pw = init.clone();
        whole.t = 1;
        whole
            .update("E", &mut pw, cols, &vec![0.0; rows * cols])
            .unwrap();
        assert_ne!(pw[2 * cols..3 * cols], init[2 * cols..3 * cols]);
    }

    /// λ · Σ_c ‖W[:, c]‖ in f64.
    fn penalty(w: &[f64], cols: usize, lambda: f64) -> f64 {
        (0..cols)
            .map(|c| {
                w.iter()
                    .skip(c)
                    .step_by(cols)
                    .map(|v| v * v)
                    .sum::<f64>()
                    .sqrt()
            })
            .sum::<f64>()
            * lambda
    }

    /// The lasso's added gradient against central differences of the penalty, a zero
    /// column (the subgradient 0) and the gradient passed through.
    #[test]
    fn column_lasso_gradient_is_the_penalty_s_derivative() {
        let (rows, cols, lambda) = (4, 3, 0.05f32);
        let mut w: Vec<f32> = (0..rows * cols)
            .map(|k| ((k * 37 % 11) as f32 - 5.0) / 7.0)
            .collect();
        for r in 0..rows {
            w[r * cols + 2] = 0.0;
        }
        let g: Vec<f32> = (0..rows * cols).map(|k| k as f32 * 0.01).collect();
        let got = with_column_lasso(&w, cols, &g, lambda);
        let w64: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
        for k in 0..rows * cols {
            let added = f64::from(got[k] - g[k]);
            if k % cols == 2 {
                assert_eq!(added, 0.0, "zero column, entry {k}");
                continue;
            }
            let h = 1e-6;
            let (mut up, mut down) = (w64.clone(), w64.clone());
            up[k] += h;
            down[k] -= h;
            let fd = (penalty(&up, cols, f64::from(lambda))
                - penalty(&down, cols, f64::from(lambda)))
                / (2.0 * h);
            assert!((added - fd).abs() < 1e-6, "entry {k}: {added} vs {fd}");
        }
    }
}
