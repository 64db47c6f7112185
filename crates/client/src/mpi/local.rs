//! An in-process [`Collective`] over threads, one per rank: the coordination logic's unit
//! tests run on it without any MPI library.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use super::Collective;
use crate::error::{Error, Result};

struct Shared {
    barrier: Barrier,
    /// One slot per rank for gathers; slot 0 also carries broadcasts.
    slots: Mutex<Vec<Vec<u8>>>,
}

/// One rank of an in-process world.
pub struct LocalWorld {
    rank: usize,
    size: usize,
    shared: Arc<Shared>,
}

impl LocalWorld {
    /// The `size` ranks of a new world, to be moved to one thread each.
    pub fn world(size: usize) -> Vec<LocalWorld> {
        let shared = Arc::new(Shared {
            barrier: Barrier::new(size),
            slots: Mutex::new(vec![Vec::new(); size]),
        });
        (0..size)
            .map(|rank| LocalWorld {
                rank,
                size,
                shared: shared.clone(),
            })
            .collect()
    }

    fn slots(&self) -> Result<std::sync::MutexGuard<'_, Vec<Vec<u8>>>> {
        self.shared
            .slots
            .lock()
            .map_err(|_| Error::generic("a rank thread panicked"))
    }
}

impl Collective for LocalWorld {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn barrier(&self, _timeout: Duration) -> Result<()> {
        self.shared.barrier.wait();
        Ok(())
    }
    fn broadcast(&self, root: usize, data: &mut Vec<u8>, _timeout: Duration) -> Result<()> {
        if self.rank == root {
            self.slots()?[root] = data.clone();
        }
        self.shared.barrier.wait();
        if self.rank != root {
            *data = self.slots()?[root].clone();
        }
        self.shared.barrier.wait();
        Ok(())
    }
    fn gather(&self, root: usize, data: &[u8], _timeout: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        self.slots()?[self.rank] = data.to_vec();
        self.shared.barrier.wait();
        let all = (self.rank == root)
            .then(|| self.slots().map(|s| s.clone()))
            .transpose()?;
        self.shared.barrier.wait();
        Ok(all)
    }
}
