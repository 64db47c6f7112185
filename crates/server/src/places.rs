//! Places for connections (`--max-connections`, HTTP and gRPC together), and handing the place
//! of an idle connection to a new one when all are taken, so connections that never send a
//! request cannot lock out clients that do.
//!
//! Every open connection has a [`Tag`], shared between the table here and the connection's
//! owner (a server thread's loop, or a gRPC connection task). The owner keeps the tag's state
//! current: busy while a request's body is arriving or its answer is pending, idle otherwise,
//! with when it became idle and whether it has completed a request. A connection over the limit
//! takes the place of the idle connection that never completed a request and has been idle
//! longest, else of the one idle longest; that connection's owner is woken and closes it. A
//! connection whose request head is partly there counts as idle: it has not sent a request.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mio::Waker;
use tokio::sync::Notify;

/// Tag state of a busy connection.
const BUSY: u64 = 0;
/// Tag state of a connection whose place went to a new one.
const EVICTED: u64 = u64::MAX;
/// Idle state bit of a connection that has completed a request: every such connection sorts
/// after every one that has not.
const SERVED: u64 = 1 << 62;
/// Places handed over whose old connection has not closed yet; a new connection that would
/// need one more is refused instead, so open connections never pass the limit by more.
const MAX_HANDOVERS: usize = 64;

/// Where the owner of an evicted connection hears of it.
pub enum Wake {
    /// A server thread's loop: the connection's slot and generation go into the loop's inbox.
    Loop {
        inbox: Arc<Inbox>,
        slot: usize,
        generation: u64,
    },
    /// A gRPC connection task, waiting on this.
    Task(Notify),
}

/// A server thread's eviction inbox and the waker of its loop.
pub struct Inbox {
    evicted: Mutex<Vec<(usize, u64)>>,
    waker: Waker,
}

impl Inbox {
    pub fn new(waker: Waker) -> Inbox {
        Inbox {
            evicted: Mutex::new(Vec::new()),
            waker,
        }
    }

    /// Wakes the loop (to stop, or to read its inbox).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// The (slot, generation) of every connection evicted since the last call.
    pub fn take(&self) -> Vec<(usize, u64)> {
        std::mem::take(&mut *self.evicted.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One connection's entry: its state and how its owner is told of an eviction.
pub struct Tag {
    /// [`BUSY`], [`EVICTED`], or an idle key: [`SERVED`] if it has completed a request, plus
    /// 1 + nanoseconds from the table's epoch to when it became idle.
    state: AtomicU64,
    wake: Wake,
}

impl Tag {
    fn notify(&self) {
        match &self.wake {
            Wake::Loop {
                inbox,
                slot,
                generation,
            } => {
                let mut evicted = inbox.evicted.lock().unwrap_or_else(|e| e.into_inner());
                evicted.push((*slot, *generation));
                drop(evicted);
                inbox.wake();
            }
            Wake::Task(notify) => notify.notify_one(),
        }
    }
}

/// A connection's place, held by its owner until [`Places::leave`].
pub struct Place {
    index: usize,
    tag: Arc<Tag>,
    /// The state the owner last stored (only the owner changes it).
    known: AtomicU64,
    epoch: Instant,
}

impl Place {
    /// Marks the connection busy (not to be evicted); false if its place has gone to another
    /// connection already: close it.
    pub fn busy(&self) -> bool {
        self.set(BUSY)
    }

    /// Marks the connection idle since `since`; `served`: it has completed a request. False if
    /// its place has gone to another connection already: close it.
    pub fn idle(&self, since: Instant, served: bool) -> bool {
        self.set(idle_key(self.epoch, since, served))
    }

    fn set(&self, state: u64) -> bool {
        let known = self.known.load(Ordering::Relaxed);
        if state == known {
            return true;
        }
        let order = (Ordering::AcqRel, Ordering::Acquire);
        let swapped = self
            .tag
            .state
            .compare_exchange(known, state, order.0, order.1);
        if swapped.is_ok() {
            self.known.store(state, Ordering::Relaxed);
        }
        swapped.is_ok()
    }

    /// True once the place has gone to another connection.
    pub fn evicted(&self) -> bool {
        self.tag.state.load(Ordering::Acquire) == EVICTED
    }

    /// Waits until the place has gone to another connection (gRPC connection tasks).
    pub async fn until_evicted(&self) {
        let Wake::Task(notify) = &self.tag.wake else {
            return std::future::pending().await;
        };
        while !self.evicted() {
            notify.notified().await;
        }
    }
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place")
            .field("index", &self.index)
            .field("state", &self.known.load(Ordering::Relaxed))
            .finish()
    }
}

fn idle_key(epoch: Instant, since: Instant, served: bool) -> u64 {
    let nanos = since.saturating_duration_since(epoch).as_nanos() as u64;
    let key = nanos.min(SERVED - 2) + 1;
    if served {
        key | SERVED
    } else {
        key
    }
}

#[derive(Default)]
struct Table {
    tags: Vec<Option<Arc<Tag>>>,
    free: Vec<usize>,
    /// Places handed over whose evicted connection has not left yet.
    handovers: usize,
}

impl Table {
    fn insert(&mut self, tag: Arc<Tag>) -> usize {
        match self.free.pop() {
            Some(index) => {
                self.tags[index] = Some(tag);
                index
            }
            None => {
                self.tags.push(Some(tag));
                self.tags.len() - 1
            }
        }
    }

    /// Evicts the idle connection that sorts first; false when every connection is busy.
    fn evict_one(&mut self) -> bool {
        loop {
            let victim = self
                .tags
                .iter()
                .flatten()
                .map(|tag| (tag.state.load(Ordering::Acquire), tag))
                .filter(|(state, _)| *state != BUSY && *state != EVICTED)
                .min_by_key(|(state, _)| *state);
            let Some((state, tag)) = victim else {
                return false;
            };
            let order = (Ordering::AcqRel, Ordering::Acquire);
            // Fails when the owner changed the state meanwhile: look again.
            if tag
                .state
                .compare_exchange(state, EVICTED, order.0, order.1)
                .is_ok()
            {
                tag.notify();
                self.handovers += 1;
                return true;
            }
        }
    }
}

/// Open connections against [`crate::Limits::max_connections`], and every connection accepted,
/// refused or evicted since start.
pub struct Places {
    open: AtomicUsize,
    accepted: AtomicU64,
    refused: AtomicU64,
    evicted: AtomicU64,
    table: Mutex<Table>,
    epoch: Instant,
}

impl Default for Places {
    fn default() -> Self {
        Places {
            open: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            table: Mutex::new(Table::default()),
            epoch: Instant::now(),
        }
    }
}

impl std::fmt::Debug for Places {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Places")
            .field("open", &self.open())
            .field("totals", &self.totals())
            .finish()
    }
}

impl Places {
    /// Takes a place for a connection accepted at `now` (idle, no request yet): a free one, or
    /// one taken from an idle connection when `max` are open. None when every open connection
    /// is busy (or too many handed-over places are still closing): refuse the connection.
    pub fn enter(&self, max: usize, now: Instant, wake: Wake) -> Option<Place> {
        let known = idle_key(self.epoch, now, false);
        let tag = Arc::new(Tag {
            state: AtomicU64::new(known),
            wake,
        });
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if self.open.load(Ordering::Acquire) >= max {
            if table.handovers >= MAX_HANDOVERS || !table.evict_one() {
                drop(table);
                self.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
        self.open.fetch_add(1, Ordering::AcqRel);
        self.accepted.fetch_add(1, Ordering::Relaxed);
        let index = table.insert(Arc::clone(&tag));
        Some(Place {
            index,
            tag,
            known: AtomicU64::new(known),
            epoch: self.epoch,
        })
    }

    /// Gives back the place of a connection that closed.
    pub fn leave(&self, place: Place) {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = table.tags.get_mut(place.index) {
            if slot.take().is_some() {
                table.free.push(place.index);
            }
        }
        if place.evicted() {
            table.handovers = table.handovers.saturating_sub(1);
        }
        drop(table);
        let _ = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Connections since start: (accepted, refused over the limit).
    pub fn totals(&self) -> (u64, u64) {
        (
            self.accepted.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }

    /// Idle connections closed to make room for a new one, since start.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn task() -> Wake {
        Wake::Task(Notify::new())
    }

    #[test]
    fn places_stop_at_max_while_every_connection_is_busy() {
        let places = Places::default();
        let now = Instant::now();
        let a = places.enter(2, now, task()).unwrap();
        let b = places.enter(2, now, task()).unwrap();
        assert!(a.busy() && b.busy());
        assert!(places.enter(2, now, task()).is_none());
        assert_eq!(places.open(), 2);
        places.leave(a);
        let c = places.enter(2, now, task()).unwrap();
        assert_eq!(places.totals(), (3, 1), "three taken, one refused");
        assert_eq!(places.evicted(), 0);
        places.leave(b);
        places.leave(c);
        assert_eq!(places.open(), 0);
    }

    #[test]
    fn a_new_connection_takes_the_place_of_the_longest_idle_unserved_one() {
        let places = Places::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let served_long_ago = places.enter(3, at(0), task()).unwrap();
        assert!(served_long_ago.idle(at(1), true));
        let never = places.enter(3, at(5), task()).unwrap();
        let newest = places.enter(3, at(9), task()).unwrap();
        // Full: the one that never completed a request goes first, though idle for less time.
        let fourth = places.enter(3, at(10), task()).unwrap();
        assert!(never.evicted() && !newest.evicted() && !served_long_ago.evicted());
        assert_eq!((places.open(), places.evicted()), (4, 1), "until it closes");
        places.leave(never);
        assert_eq!(places.open(), 3);
        // Then the oldest unserved (newest), then the served one.
        let fifth = places.enter(3, at(11), task()).unwrap();
        assert!(newest.evicted());
        places.leave(newest);
        assert!(fifth.busy());
        let sixth = places.enter(3, at(12), task()).unwrap();
        assert!(fourth.evicted(), "fourth (unserved) before the served one");
        places.leave(fourth);
        assert!(sixth.busy());
        let seventh = places.enter(3, at(13), task()).unwrap();
        assert!(served_long_ago.evicted());
        assert!(
            !served_long_ago.busy(),
            "an evicted connection cannot turn busy"
        );
        places.leave(served_long_ago);
        assert_eq!(places.evicted(), 4);
        // Busy fifth and sixth, idle seventh: seventh goes, the busy ones never do.
        let eighth = places.enter(3, at(14), task()).unwrap();
        assert!(seventh.evicted() && !fifth.evicted() && !sixth.evicted());
        assert!(eighth.busy());
        assert!(places.enter(3, at(15), task()).is_none(), "all busy");
    }

    #[test]
    fn handovers_still_closing_are_bounded() {
        let places = Places::default();
        let now = Instant::now();
        let mut held: Vec<Place> = (0..MAX_HANDOVERS * 2)
            .filter_map(|_| places.enter(1, now, task()))
            .collect();
        // One real place, then MAX_HANDOVERS handed over from connections that never close.
        assert_eq!(held.len(), MAX_HANDOVERS + 1);
        assert_eq!(places.totals().1, MAX_HANDOVERS as u64 - 1);
        places.leave(held.remove(0));
        assert!(
            places.enter(1, now, task()).is_some(),
            "one closed, one more"
        );
    }
}
