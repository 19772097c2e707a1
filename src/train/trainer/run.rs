//! One training run: its phases (each set up for its sampler, then its epochs of steps,
//! validation and checkpoints), the outcome; [`Step`]: one phase's steps.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::super::Result;
use crate::compile::{
    advise_training, lower_for, plan_hash, schedule, setup_phase, PhaseEnv, PhaseRun,
};
use crate::exec::StepInput;
use crate::exec::StepRunner;
use crate::ir::Value;
use crate::op::{GraphSource, Registry};
use crate::plan::{Lowered, SamplerPlan};
use crate::store::{Access, GraphStore, Role};

use super::super::evaluate::{link_split_gives, selection, Evaluator};
use super::super::log::{Record, RunDist, StepMs};
use super::super::observer::{EpochLoss, Observer, Validation};
use super::super::state::{guard_outputs, params_hash, Identity, TrainState};
use super::super::TrainError;
use crate::dist::{step_sync, StepSync};
use crate::infer::link::no_split;

use super::{TrainOptions, TrainOutcome};

/// Trains `opts.plan` on `opts.store` with `registry`'s ops and `runner`: JPDC's Algorithm 2
/// (each step a sampled subgraph, its forward and backward pass, an update), each update
/// agreed with the other parts in a job (GAD's Algorithm 2, through `sync`), a validation
/// every `[eval] every` epochs keeping the best parameters (and stopping early after
/// `[eval] patience` evaluations without progress), a checkpoint after every whole epoch,
/// the test of the kept parameters at the end.
pub(super) fn run(
    opts: &TrainOptions<'_>,
    registry: &Registry,
    runner: &dyn StepRunner,
) -> Result<TrainOutcome> {
    let (store, plan) = (opts.store, opts.plan);
    if opts.verify.runs_check(store) {
        crate::store::check(store)?;
    }
    let lowered = lower_for(plan, store, registry)?;
    let sched = schedule(plan, opts.epochs);
    check_memory(opts, &lowered, &sched)?;
    if let (Some(_), Some(r)) = (&opts.dist, lowered.running.first()) {
        // Each rank would fold its own batches into them, and the parts' parameters
        // (which carry them) would disagree after the first epoch.
        return Err(TrainError::Run(format!(
            "`batchnorm` (running statistics `{}`) trains in one process: a distributed job does not combine its ranks' running statistics yet",
            r.name
        )));
    }
    let n_train = match &lowered.link {
        // A link plan's epochs count edges (compile::setup_phase), its loss no nodes; its
        // evaluation needs the store's split.
        Some(_) if store.link_split().is_none() => return Err(no_split(store).into()),
        Some(task) => {
            link_split_gives(store, task.metric)?;
            store.n_nodes().max(1)
        }
        None => training_nodes(store)?,
    };
    // Every collective call of the run goes through `sync`, in the order crate::dist::sync
    // documents.
    let mut sync = step_sync(
        opts.dist.as_ref(),
        plan.distributed,
        store,
        n_train,
        opts.seed,
    );
    let eval = Evaluator::new(opts, &lowered, runner_threads(runner))?;
    let id = Identity {
        plan_hash: plan_hash(plan),
        seed: opts.seed,
        graph_id: sync.graph_id(store.identity())?,
        store,
        job: sync.job_name(),
    };
    let writes = sync.writes_outputs();
    let (ckpt, log) = (opts.checkpoint.as_deref(), opts.log.as_deref());
    let _claims = guard_outputs(ckpt, log, writes, &lowered)?;
    let total: usize = sched.iter().map(|p| p.2).sum();
    let (mut state, resumed) = TrainState::start(
        opts.init_from.as_deref(),
        plan.optimizer,
        ckpt.filter(|_| opts.resume),
        &lowered,
        &id,
        sync.as_mut(),
        total,
    )?;
    let record = run_record(opts, runner, id.plan_hash, sync.run_info()?);
    let at = (state.step, state.elapsed);
    let log_to = (log.filter(|_| writes), opts.json && writes);
    let mut obs = Observer::open(log_to, &opts.progress, resumed, record, at, total)?;
    let stop = opts.stop_after.unwrap_or(usize::MAX);
    let max_steps = opts.max_steps.unwrap_or(u64::MAX);
    let every = plan.eval.every.max(1);
    let mut phase: Option<(usize, PhaseRun<'_>)> = None;
    while state.early.stopped_at.is_none()
        && state.epoch < total.min(stop)
        && state.step < max_steps
    {
        state.epoch += 1;
        let (pi, sp) = phase_of(&sched, state.epoch);
        // The optimizer's learning rate times the phase's factor (set every epoch: a resumed
        // run starts in any phase).
        let factor = plan.phases.get(pi).and_then(|p| p.lr_factor);
        state
            .opt
            .set_lr(plan.optimizer.lr() * factor.unwrap_or(1.0));
        // Before the set-up, which samples too (issue 56: 26 s to scale 27's first step).
        advise_training(opts.io_hints, store, &sp, Access::Random);
        if phase.as_ref().is_none_or(|(i, _)| *i != pi) {
            let env = PhaseEnv {
                seed: opts.seed,
                n_train,
                io_hints: opts.io_hints,
                threads: runner_threads(runner),
                link: lowered.link.as_ref().map(|l| l.sampling),
            };
            let mut ph = setup_phase(store, &lowered, &sp, pi, &env)?;
            // Each step being collective, a job steps as often as its largest part wants.
            ph.steps_per_epoch = sync.steps(ph.steps_per_epoch)?;
            phase = Some((pi, ph));
        }
        let ph = &phase.as_ref().expect("set up").1;
        obs.epoch_begins(state.epoch, state.step, ph.steps_per_epoch, stop, max_steps);
        let n_steps = ph.steps_per_epoch.min(max_steps - state.step);
        let step = Step { opts, runner, ph };
        let t_train = Instant::now();
        let train_loss = step.epoch(n_steps, &mut state, sync.as_mut(), &mut obs)?;
        let train_ms = t_train.elapsed().as_secs_f64() * 1e3;
        sync.params_agree(state.epoch, &|| params_hash(&state.params))?;
        let last = state.epoch == total || state.step >= max_steps;
        let evaluates = state.epoch.is_multiple_of(every) || last;
        let mut stops = false;
        let val = match &eval {
            Some(e) if evaluates => {
                advise_training(opts.io_hints, store, &sp, Access::Normal);
                let t = Instant::now();
                // No validation nodes: nothing measured, no best (the last parameters
                // are the run's, issue 55 item 1).
                e.measure(sync.as_ref(), runner, &state.params, Role::Val)?
                    .map(|val| {
                        let verdict = state.record_val(val, &plan.eval, |m| selection(m, &lowered));
                        stops = verdict.stop;
                        let ms = t.elapsed().as_secs_f64() * 1e3;
                        Validation {
                            val,
                            best: verdict.best,
                            ms,
                        }
                    })
            }
            _ => None,
        };
        let mut pos = obs.epoch_ends(state.epoch, state.step, (train_loss, train_ms), val)?;
        // Every rank asks at the same epochs; the one that evaluates decides.
        if plan.eval.patience.is_some() && evaluates && sync.stops(stops)? {
            state.early.stopped_at = Some(state.epoch);
            let kept = state.best.as_ref().map(|b| b.epoch);
            pos = obs.stopped(state.epoch, kept, &plan.eval)?;
        }
        // An epoch cut short by `max_steps` is not checkpointed.
        if let Some(path) = ckpt.filter(|_| n_steps == ph.steps_per_epoch) {
            // A job's consensus state, for the checkpoint (a collective call).
            let dist = sync.gather()?;
            if writes {
                state.save(path, &id, obs.now(), log.map(|_| pos), dist)?;
            }
        }
    }
    obs.training_ends();
    let complete =
        state.early.stopped_at.is_some() || state.epoch >= total || state.step >= max_steps;
    finish(state, eval.as_ref(), complete, (sync.as_ref(), runner), obs)
}

/// The outcome of a run that ended in `state`: the best parameters with their validation
/// (the last ones', validated now, when none was), and their test when the run is
/// `complete` (not stopped by `stop_after`). A role without labelled nodes has no metrics
/// (None, `null` in the log's `test` record), never a 0 (issue 55 item 1); without
/// validation nodes the parameters are the last epoch's.
fn finish(
    state: TrainState,
    eval: Option<&Evaluator<'_>>,
    complete: bool,
    (sync, runner): (&dyn StepSync, &dyn StepRunner),
    mut obs: Observer,
) -> Result<TrainOutcome> {
    let (epochs, steps, stopped_at) = (state.epoch, state.step, state.early.stopped_at);
    let (val, test, best_epoch, params) = match eval {
        None => (None, None, epochs, state.params),
        Some(e) => {
            let (val, best_epoch, params) = match state.best {
                Some(b) => (Some(b.val), b.epoch, b.params),
                None => {
                    let val = e.measure(sync, runner, &state.params, Role::Val)?;
                    (val, epochs, state.params)
                }
            };
            let test = match complete {
                true => {
                    let test = e.measure(sync, runner, &params, Role::Test)?;
                    obs.test(best_epoch, val, test)?;
                    test
                }
                false => None,
            };
            (val, test, best_epoch, params)
        }
    };
    Ok(TrainOutcome {
        records: obs.records(),
        val,
        test,
        best_epoch,
        params,
        epochs,
        steps,
        stopped_at,
    })
}

/// The steps of one phase.
struct Step<'s, 'g> {
    opts: &'s TrainOptions<'s>,
    runner: &'s dyn StepRunner,
    ph: &'s PhaseRun<'g>,
}

impl Step<'_, '_> {
    /// One epoch of `n_steps` steps; the mean step loss. The epoch's subgraphs are sampled
    /// ahead on the runner's pool while steps compute.
    fn epoch(
        &self,
        n_steps: u64,
        state: &mut TrainState,
        sync: &mut dyn StepSync,
        obs: &mut Observer,
    ) -> Result<EpochLoss> {
        let steps = state.step..state.step + n_steps;
        let (mut loss_sum, mut mean_sum) = (0.0, Some(0.0));
        let mut result: Result<()> = Ok(());
        self.runner
            .with_prefetch(&self.ph.source, steps, &mut |source| {
                result = (0..n_steps).try_for_each(|_| {
                    let (loss, mean) = self.one(source, state, sync, obs)?;
                    loss_sum += loss;
                    mean_sum = mean_sum.zip(mean).map(|(s, m)| s + m);
                    Ok(())
                });
            });
        result?;
        let n = n_steps as f64;
        Ok(EpochLoss {
            normalised: loss_sum / n,
            mean: mean_sum.map(|s| s / n),
        })
    }

    /// One step, the body of JPDC's Algorithm 2: forward and backward on the step's
    /// subgraph (from `source`), the gradients combined with the other parts' in a job
    /// (GAD's Eq. 15; nothing alone), the update, the step's record. Returns the step's
    /// loss (the job's combined loss in a job) and its plain mean over the subgraph's
    /// training nodes (this part's, in a job).
    fn one(
        &self,
        source: &dyn GraphSource,
        state: &mut TrainState,
        sync: &mut dyn StepSync,
        obs: &mut Observer,
    ) -> Result<(f64, Option<f64>)> {
        let (opts, ph) = (self.opts, self.ph);
        let (epoch, step) = (state.epoch, state.step);
        if opts.interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(TrainError::Interrupted { epoch, step });
        }
        let t0 = Instant::now();
        let vals = self.runner.run_step(
            StepInput::new(&ph.graph, &ph.wanted, &state.params)
                .source(source)
                .step(step, opts.seed)
                .training(true),
        )?;
        let loss = vals
            .get(ph.loss)
            .and_then(|v| v.as_scalar())
            .ok_or_else(|| TrainError::Run("the step gave no loss".into()))?;
        if !loss.is_finite() {
            return Err(TrainError::Run(format!(
                "the loss is {loss} at step {step} (epoch {epoch}); {}: lower the learning rate?",
                self.non_finite_origin(state, step)
            )));
        }
        let mean_loss = self.mean_loss(&vals, source, &state.params, step);
        let t_opt = Instant::now();
        let mut grads = Vec::with_capacity(ph.grads.len());
        for (name, gid) in &ph.grads {
            let g = vals
                .get(*gid)
                .and_then(|v| v.as_dense())
                .ok_or_else(|| TrainError::Run(format!("no gradient of `{name}`")))?;
            // Issue 55 item 7: a non-finite gradient would make the parameters NaN and
            // the next loss NaN far from its cause; O(parameters), beside the update.
            if let Some(i) = g.data.iter().position(|x| !x.is_finite()) {
                return Err(TrainError::Run(format!(
                    "the gradient of `{name}` is {} (value {i}) at step {step} (epoch {epoch}); {}: lower the learning rate?",
                    g.data[i],
                    self.non_finite_origin(state, step)
                )));
            }
            grads.push(g.data.as_slice());
        }
        let t = Instant::now();
        let combined = sync.combine(loss, &grads)?;
        let comm = combined.as_ref().map(|c| (t.elapsed(), c.bytes));
        let loss = combined.as_ref().map_or(loss, |c| c.loss);
        state.update(ph.grads.iter().enumerate().map(|(i, (name, _))| {
            let g = match &combined {
                Some(c) => &c.grads[c.offsets[i]..c.offsets[i] + grads[i].len()],
                None => grads[i],
            };
            (name.as_str(), g)
        }))?;
        // The batchnorms' running statistics, from this step's (state, not parameters).
        for (name, momentum, id) in &ph.running {
            let stats = vals
                .get(*id)
                .and_then(|v| v.as_dense())
                .ok_or_else(|| TrainError::Run(format!("no step statistics of `{name}`")))?;
            crate::op::builtin::update_running(&mut state.params, name, *momentum, stats)
                .map_err(|e| TrainError::Run(e.to_string()))?;
        }
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let times = vals.times;
        obs.step(Record::Step {
            epoch,
            step,
            time: obs.now(),
            loss,
            nodes: vals.bindings.nodes,
            entries: vals.bindings.entries,
            pairs: (vals.bindings.pairs > 0).then_some(vals.bindings.pairs),
            ms: StepMs {
                sampling: ms(times.sampling),
                aggregation: ms(times.aggregation),
                transformation: ms(times.transformation),
                other: ms(times.other),
                optimizer: ms(t_opt.elapsed()),
                wall: ms(t0.elapsed()),
                allreduce: comm.map(|c| ms(c.0)),
            },
            allreduce_bytes: comm.map(|c| c.1),
            mean_loss,
        })?;
        state.step += 1;
        Ok((loss, mean_loss))
    }

    /// Where step `step`'s first non-finite value came from (issue 55 item 7), for the
    /// error that stops the run: a parameter that already holds one, else the first node,
    /// in the graph's order, whose output holds one while its inputs do not — found by
    /// running the step again on the interpreter keeping every value (only on this path:
    /// it holds the whole step's values at once).
    fn non_finite_origin(&self, state: &TrainState, step: u64) -> String {
        let first_bad = |d: &[f32]| d.iter().position(|x| !x.is_finite()).map(|i| (i, d[i]));
        for (name, t) in state.params.iter() {
            if let Some((i, x)) = first_bad(&t.data) {
                return format!("parameter `{name}` already holds {x} (value {i})");
            }
        }
        let graph = &self.ph.graph;
        let order = match graph.topo_order() {
            Ok(o) => o,
            Err(e) => return format!("its origin is unknown ({e})"),
        };
        let vals = match crate::exec::Interpreter.run_step(
            StepInput::new(graph, &order, &state.params)
                .source(&self.ph.source)
                .step(step, self.opts.seed)
                .training(true),
        ) {
            Ok(v) => v,
            Err(e) => return format!("its origin is unknown (the diagnostic pass failed: {e})"),
        };
        for id in order {
            let bad = match vals.get(id) {
                Some(Value::Dense(t)) => first_bad(&t.data),
                Some(Value::Sparse(m)) => first_bad(&m.values.data),
                Some(Value::Scalar(x)) if !x.is_finite() => Some((0, *x as f32)),
                _ => None,
            };
            if let Some((i, x)) = bad {
                let node = graph.node(id);
                return format!(
                    "the first non-finite value is {x} (value {i}) from node {} `{}` (op {}) with finite inputs",
                    id.index(),
                    node.label,
                    node.op.name()
                );
            }
        }
        "a second run of the step on the interpreter gave only finite values".into()
    }

    /// The step's loss with every training node of the subgraph weighted alike (the plain
    /// mean cross-entropy, where the step's loss weights node v by 1/λ_v): the loss op run
    /// again on its logits and targets with uniform weights. None for a plan whose loss
    /// is not a built-in one, or a subgraph without training nodes.
    fn mean_loss(
        &self,
        vals: &crate::exec::StepValues,
        source: &dyn GraphSource,
        params: &crate::ir::Params,
        step: u64,
    ) -> Option<f64> {
        let (z, t) = self.ph.loss_inputs?;
        let (logits, targets) = (vals.get(z)?, vals.get(t)?.as_targets()?);
        let count = targets.weights.iter().filter(|&&w| w > 0.0).count();
        if count == 0 {
            return None;
        }
        let w = 1.0 / count as f32;
        let uniform = Value::Targets(Arc::new(crate::ir::Targets {
            weights: targets
                .weights
                .iter()
                .map(|&x| if x > 0.0 { w } else { 0.0 })
                .collect(),
            ..targets.clone()
        }));
        let ctx = crate::op::Ctx {
            source: Some(source),
            params,
            step,
            seed: self.opts.seed,
            training: true,
            node: self.ph.loss,
            bindings: vals.bindings,
        };
        let op = &self.ph.graph.node(self.ph.loss).op;
        op.forward(&[logits, &uniform], &ctx).ok()?.as_scalar()
    }
}

/// Refuses a plan whose parameters and step do not fit the memory limit, before any
/// parameter, optimiser buffer or evaluation plan is allocated.
fn check_memory(
    opts: &TrainOptions<'_>,
    lowered: &Lowered,
    sched: &[(usize, SamplerPlan, usize)],
) -> Result<()> {
    if let Some((limit, source)) = opts.memory_limit.resolve() {
        let samplers: Vec<SamplerPlan> = sched.iter().map(|p| p.1.clone()).collect();
        let est = crate::compile::memory::estimate(
            lowered,
            Some(&opts.plan.optimizer),
            opts.store,
            &samplers,
        )?;
        crate::compile::memory::check(opts.plan, lowered, &est, limit, &source)?;
    }
    Ok(())
}

/// |V_train|, refused when zero. The message says what to pass when the store was made (issue 54, item 8): labels when
/// it has none, a split when no labelled node has the training role.
fn training_nodes(store: &GraphStore) -> Result<usize> {
    let path = store.path().display();
    match store.role_count(Role::Train) {
        0 if store.n_classes() == 0 => Err(TrainError::Run(format!(
            "{path}: no labels, so no training nodes: a GNN plan learns node classes from labelled training nodes; import the graph with its labels and a split, `saintflow import edgelist EDGES -o {path} --features X.npy --labels Y.npy --split 0.6,0.2,0.2` (labels as .npy or class_map.json; `--roles role.json` for a given split), or learn node vectors without labels with an [embedding] plan (`saintflow train deepwalk --graph {path}`)"
        ))),
        0 => Err(TrainError::Run(format!(
            "{path}: no training nodes (role `train`; the store has labels of {} classes): import the graph with a split that has training nodes, `--split 0.6,0.2,0.2` (fractions of the labelled nodes) or `--roles role.json` (its `tr` list)",
            store.n_classes()
        ))),
        n => Ok(n),
    }
}

/// The phase (its index and sampler) that epoch `epoch` (from 1) belongs to.
fn phase_of(sched: &[(usize, SamplerPlan, usize)], epoch: usize) -> (usize, SamplerPlan) {
    let mut acc = 0;
    sched
        .iter()
        .find(|p| {
            acc += p.2;
            epoch <= acc
        })
        .map(|p| (p.0, p.1.clone()))
        .expect("epoch within the schedule")
}

/// The log's first record: what is trained, on what (and a job's facts).
fn run_record(
    opts: &TrainOptions<'_>,
    runner: &dyn StepRunner,
    hash: u64,
    dist: Option<RunDist>,
) -> Record {
    Record::Run {
        plan: opts.plan.name.clone(),
        plan_hash: format!("{hash:016x}"),
        effective_plan: opts.plan.effective_text().to_string(),
        graph: opts
            .graph_name
            .clone()
            .unwrap_or_else(|| opts.store.path().display().to_string()),
        seed: opts.seed,
        threads: runner.threads(),
        runner: runner.name().to_string(),
        dist,
    }
}

/// The runner's worker count as the planner takes it (a runner reports at least one).
fn runner_threads(runner: &dyn StepRunner) -> std::num::NonZeroUsize {
    std::num::NonZeroUsize::new(runner.threads()).unwrap_or(std::num::NonZeroUsize::MIN)
}
