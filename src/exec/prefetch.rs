//! The subgraph pool (JPDC Algorithm 8): a [`GraphSource`] wrapper that, when step t's
//! subgraph is asked for, has the subgraphs of steps t+1..t+k sampled as tasks on the
//! executor's pool — up to k samplers at once (p_inter = min(k, p)), on the same workers
//! as the compute, so no thread is added — while step t computes; later requests take them
//! ready. Subgraph i depends only on (seed, i), so what comes out is exactly what direct
//! sampling gives.
//!
//! Protocol, in prose. Each step ahead has a slot: `Queued` (its task is spawned, not
//! started), `Running`, or `Ready(result)`. A sampler task claims its slot (`Queued` →
//! `Running`) or, finding it gone, returns without sampling. A request for step t:
//! `Ready` → take it; `Running` → wait for it (it runs on another worker, so it finishes);
//! `Queued` or absent → remove the slot and sample inline (waiting for a task that no
//! worker may be free to start — one worker, busy with this very request — would hang).
//! Slots of steps before t are dropped. [`Prefetch::scope`] returns only after every
//! sampler task has ended (the ones not yet started skip their work), so the wrapped
//! source may be borrowed.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};

use super::pool::{Pool, Scope};
use crate::ir::source::forward_to_inner;
use crate::ir::Targets;
use crate::op::{GraphSource, OpError};
use crate::sample::Subgraph;

enum Slot {
    Queued,
    Running,
    Ready(Result<Subgraph, OpError>),
}

#[derive(Default)]
struct State {
    slots: BTreeMap<u64, Slot>,
    closed: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    ready: Condvar,
}

/// A prefetching [`GraphSource`]; see the module documentation.
pub struct Prefetch<'a, 's> {
    inner: &'a (dyn GraphSource + 'a),
    scope: &'s Scope<'a>,
    ahead: u64,
    /// Steps at or past this one are never sampled ahead (the caller will not ask).
    end: u64,
    shared: Arc<Shared>,
}

impl<'a> Prefetch<'a, '_> {
    /// Runs `f` with a source that serves `source`'s subgraphs, sampling `ahead` steps
    /// ahead on `pool` (0: no prefetching). Returns after every sampler task has ended.
    pub fn scope<R>(
        pool: &Pool,
        source: &'a (dyn GraphSource + 'a),
        ahead: usize,
        f: impl FnOnce(&Prefetch<'a, '_>) -> R,
    ) -> R {
        Prefetch::scope_until(pool, source, ahead, u64::MAX, f)
    }

    /// [`Prefetch::scope`] for a caller that asks for steps below `end` only: nothing at or
    /// past `end` is sampled ahead (an epoch's last step does not start the next epoch's
    /// subgraphs only to drop them when the scope ends).
    pub fn scope_until<R>(
        pool: &Pool,
        source: &'a (dyn GraphSource + 'a),
        ahead: usize,
        end: u64,
        f: impl FnOnce(&Prefetch<'a, '_>) -> R,
    ) -> R {
        let shared = Arc::new(Shared::default());
        let r = pool.scope(|s| {
            let p = Prefetch {
                inner: source,
                scope: s,
                ahead: ahead as u64,
                end,
                shared: shared.clone(),
            };
            let r = catch_unwind(AssertUnwindSafe(|| f(&p)));
            // Tasks not started yet need not sample any more.
            p.shared.state.lock().expect("prefetch").closed = true;
            r
        });
        match r {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    fn spawn_sampler(&self, i: u64) {
        let inner = self.inner;
        let shared = self.shared.clone();
        self.scope.spawn(move |_| {
            {
                let mut st = shared.state.lock().expect("prefetch");
                match st.slots.get(&i) {
                    Some(Slot::Queued) if !st.closed => {
                        st.slots.insert(i, Slot::Running);
                    }
                    _ => return,
                }
            }
            let r = match catch_unwind(AssertUnwindSafe(|| inner.sample(i))) {
                Ok(r) => r,
                Err(_) => Err(OpError::Panicked(format!("sampling subgraph {i}"))),
            };
            shared
                .state
                .lock()
                .expect("prefetch")
                .slots
                .insert(i, Slot::Ready(r));
            shared.ready.notify_all();
        });
    }
}

impl GraphSource for Prefetch<'_, '_> {
    fn sample(&self, step: u64) -> Result<Subgraph, OpError> {
        let mut st = self.shared.state.lock().expect("prefetch");
        // Steps behind this one will not be asked for (the loop moves forward).
        while let Some((&k, _)) = st.slots.first_key_value() {
            if k >= step {
                break;
            }
            st.slots.remove(&k);
        }
        let mut spawn = Vec::new();
        for i in step + 1
            ..=step
                .saturating_add(self.ahead)
                .min(self.end.saturating_sub(1))
        {
            if let std::collections::btree_map::Entry::Vacant(e) = st.slots.entry(i) {
                e.insert(Slot::Queued);
                spawn.push(i);
            }
        }
        let own = loop {
            match st.slots.remove(&step) {
                Some(Slot::Ready(r)) => break Some(r),
                Some(Slot::Running) => {
                    st.slots.insert(step, Slot::Running);
                    st = self.shared.ready.wait(st).expect("prefetch");
                }
                Some(Slot::Queued) | None => break None,
            }
        };
        drop(st);
        for i in spawn {
            self.spawn_sampler(i);
        }
        match own {
            Some(r) => r,
            None => self.inner.sample(step),
        }
    }

    forward_to_inner!();
    /// The inner source's: a fixed subgraph has nothing to prefetch.
    fn fixed_sample(&self) -> Result<Option<std::sync::Arc<Subgraph>>, OpError> {
        self.inner.fixed_sample()
    }
}
