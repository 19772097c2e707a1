//! The MPI transport of distributed training (cargo feature `mpi`: the `mpi` crate over the
//! system's MPI library, OpenMPI or MPICH): [`MpiComm`], a [`Collective`] on
//! `MPI_COMM_WORLD`. Started by `mpirun -np P saintflow train PLAN --partitions DIR`.

use std::sync::Mutex;

use mpi::collective::SystemOperation;
use mpi::environment::{Threading, Universe};
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives};

use super::{Collective, DistError, ReduceOp};

/// `MPI_COMM_WORLD`, initialised with `MPI_THREAD_SERIALIZED`: training calls MPI from a
/// worker thread of its pool, one call at a time (the mutex).
pub struct MpiComm {
    inner: Mutex<Inner>,
    rank: usize,
    size: usize,
    library: String,
}

struct Inner {
    world: SimpleCommunicator,
    // Finalises MPI when dropped, after the communicator.
    _universe: Universe,
}

// SAFETY: MPI is initialised with at least `MPI_THREAD_SERIALIZED`, which allows calls from
// any thread as long as no two are concurrent; every call goes through `MpiComm::inner`'s
// mutex, so the handles may move between threads.
unsafe impl Send for Inner {}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("library", &self.library)
            .finish()
    }
}

impl MpiComm {
    /// Initialises MPI (once per process).
    pub fn init() -> Result<MpiComm, DistError> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| DistError::Run("MPI was initialised already".into()))?;
        if threading < Threading::Serialized {
            return Err(DistError::Run(format!(
                "the MPI library gives thread support {threading:?}, training needs Serialized (calls from a worker thread)"
            )));
        }
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let library = mpi::environment::library_version()
            .map(|v| v.lines().next().unwrap_or("").trim().to_string())
            .unwrap_or_default();
        Ok(MpiComm {
            inner: Mutex::new(Inner {
                world,
                _universe: universe,
            }),
            rank,
            size,
            library,
        })
    }

    /// Ends every rank of the job at once (`MPI_Abort`): what a rank does on an error, so
    /// the others are not left waiting in a collective call.
    pub fn abort(&self, code: i32) -> ! {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.world.abort(code)
    }

    /// The MPI library's own version line.
    pub fn library(&self) -> &str {
        &self.library
    }
}

impl Collective for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn allreduce_f32(&self, buf: &mut [f32]) -> Result<(), DistError> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let send = buf.to_vec();
        inner
            .world
            .all_reduce_into(&send[..], buf, SystemOperation::sum());
        Ok(())
    }

    fn allreduce_u64(&self, buf: &mut [u64], op: ReduceOp) -> Result<(), DistError> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let send = buf.to_vec();
        let op = match op {
            ReduceOp::Sum => SystemOperation::sum(),
            ReduceOp::Min => SystemOperation::min(),
            ReduceOp::Max => SystemOperation::max(),
        };
        inner.world.all_reduce_into(&send[..], buf, op);
        Ok(())
    }

    fn name(&self) -> String {
        "mpi".into()
    }
}
