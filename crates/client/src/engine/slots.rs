//! In-flight request slots (`--shared-memory system`): each request in flight owns one slot
//! index, and the plan pre-encodes one variant of every input entry per slot, variant `k`
//! naming slot `k`'s output regions. Two requests in flight never share an output region, so
//! the outputs can be read back and validated after each response.
//!
//! Slot indices are global over the workers: worker `w` owns the range
//! `[base_w, base_w + max_w)` where `max_w` is the most requests it may have in flight and
//! `base_w` the sum of the earlier workers' `max`. A pool's own slot index (HTTP: the
//! connection, gRPC: the stream slot) is below its worker's `max` and busy from send to
//! completion, so `base_w + pool_slot` is exclusive while the request is in flight.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::measure::record::push_framed_response;

/// Read access to an output region's bytes (a read-only mapping of a shared memory region;
/// any byte buffer in tests).
pub type OutputView = Box<dyn AsRef<[u8]> + Send + Sync>;

/// The slots of a run: how many there are, and (to validate outputs) each slot's output
/// regions, in the plan's output order.
pub struct OutputSlots {
    /// Request variants per input entry, which is the number of slots (K).
    count: usize,
    /// `views[slot]`: the slot's output regions; empty when the outputs are not captured.
    views: Vec<Vec<OutputView>>,
}

impl OutputSlots {
    /// `count` slots; `views` is empty (no capture) or holds one list per slot.
    pub fn new(count: usize, views: Vec<Vec<OutputView>>) -> Result<OutputSlots> {
        if count == 0 {
            return Err(Error::generic("output slots: at least one slot is needed"));
        }
        if !views.is_empty() && views.len() != count {
            return Err(Error::generic(format!(
                "output slots: {} region lists for {count} slots",
                views.len()
            )));
        }
        Ok(OutputSlots { count, views })
    }

    /// Request variants per input entry (K).
    pub fn count(&self) -> usize {
        self.count
    }

    /// The output regions are copied into the kept body at completion.
    pub fn captures(&self) -> bool {
        !self.views.is_empty()
    }

    /// The global slot of a worker's pool slot. The engine sizes the ranges so the modulo
    /// never wraps; it is there so a pool that grew past its share aliases instead of
    /// indexing out of range.
    #[inline]
    pub fn global(&self, base: usize, pool_slot: usize) -> usize {
        (base + pool_slot) % self.count
    }

    /// Index of the pre-encoded request for input entry `entry` sent on `slot`.
    #[inline]
    pub fn request_index(&self, entry: usize, slot: usize) -> usize {
        entry * self.count + slot
    }

    /// Appends the captured body of a request that completed on `slot`: the response as
    /// the first frame, then one frame per output region (whole region), in the format of
    /// [`push_framed_response`] with arrival 0. Returns the bytes appended.
    #[inline]
    pub fn capture(&self, slot: usize, response: &[u8], bodies: &mut Vec<u8>) -> usize {
        let before = bodies.len();
        push_framed_response(bodies, 0, response);
        if let Some(regions) = self.views.get(slot) {
            for view in regions {
                push_framed_response(bodies, 0, view.as_ref().as_ref());
            }
        }
        bodies.len() - before
    }
}

impl std::fmt::Debug for OutputSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSlots")
            .field("count", &self.count)
            .field("captures", &self.captures())
            .finish()
    }
}

/// A worker's share of the slots: the slot set and the first global index it owns.
#[derive(Debug, Clone)]
pub struct SlotShare {
    pub slots: Arc<OutputSlots>,
    pub base: usize,
}

/// Each worker's first slot, given the most requests each may have in flight; an error when
/// the workers together could hold more requests than the plan has slots for.
pub fn bases(max_in_flight: &[usize], count: usize) -> Result<Vec<usize>> {
    let mut next = 0usize;
    let mut out = Vec::with_capacity(max_in_flight.len());
    for &m in max_in_flight {
        out.push(next);
        next = next.saturating_add(m);
    }
    if next > count {
        return Err(Error::generic(format!(
            "shared memory output slots: the load may hold {next} requests in flight but the \
             plan has {count} slots"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::framed_responses;

    fn view(bytes: &[u8]) -> OutputView {
        Box::new(bytes.to_vec())
    }

    #[test]
    fn bases_are_prefix_sums_within_the_slot_count() {
        // (max in flight per worker, slots, expected bases or None for an error)
        type Row<'a> = (&'a [usize], usize, Option<&'a [usize]>);
        let rows: &[Row] = &[
            (&[2, 2], 4, Some(&[0, 2])),
            (&[3, 2, 2], 7, Some(&[0, 3, 5])),
            (&[1], 8, Some(&[0])),
            (&[3, 3], 5, None),
            (&[usize::MAX, 1], 4, None),
        ];
        for &(max, count, want) in rows {
            let got = bases(max, count).ok();
            assert_eq!(got.as_deref(), want, "{max:?} {count}");
        }
    }

    #[test]
    fn request_index_and_global_slot() {
        let slots = OutputSlots::new(4, Vec::new()).unwrap();
        assert_eq!(slots.request_index(0, 3), 3);
        assert_eq!(slots.request_index(2, 1), 9);
        assert_eq!(slots.global(2, 1), 3);
        assert_eq!(slots.global(2, 2), 0, "wraps instead of overflowing");
        assert!(!slots.captures());
        assert!(OutputSlots::new(0, Vec::new()).is_err());
        assert!(OutputSlots::new(2, vec![Vec::new()]).is_err());
    }

    #[test]
    fn capture_frames_the_response_then_each_region_of_the_slot() {
        let views = vec![
            vec![view(b"s0-a"), view(b"s0-b")],
            vec![view(b"s1-a"), view(b"s1-bb")],
        ];
        let slots = OutputSlots::new(2, views).unwrap();
        let mut bodies = b"earlier".to_vec();
        let n = slots.capture(1, b"{json}", &mut bodies);
        assert_eq!(n, bodies.len() - 7);
        let frames: Vec<&[u8]> = framed_responses(&bodies[7..]).map(|(_, p)| p).collect();
        assert_eq!(frames, vec![&b"{json}"[..], b"s1-a", b"s1-bb"]);
    }
}
