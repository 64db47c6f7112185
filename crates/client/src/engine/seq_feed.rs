//! A worker's sequence requests: which sequence slot sends next, and its bytes (a copy of the
//! pre-encoded template of the slot's stream and step, patched with the id and flags). No
//! allocation per request: the scratch buffer is reused.

use std::sync::Arc;

use super::sequence::{SeqConfig, Sequences};
use crate::error::Result;
use crate::service::seq_patch::{SeqFields, SeqTemplate};

/// The sequence requests of a run (shared by the workers).
#[derive(Debug)]
pub struct SeqPlan {
    /// One template per input-data stream and step.
    pub templates: Vec<Vec<SeqTemplate>>,
    /// The export's step index (`RequestRecord::step`) of each stream and step.
    pub flat_steps: Vec<Vec<u32>>,
    pub cfg: SeqConfig,
    /// Steps of each stream when they come from JSON data (empty for random/zero data).
    pub stream_steps: Vec<usize>,
    /// Concurrent sequences in open-loop modes (`--num-of-sequences`).
    pub open_loop_slots: usize,
}

/// A sequence request ready to send: which sequence slot, the fields, the export step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqSend {
    pub slot: usize,
    pub fields: SeqFields,
    pub flat_step: u32,
}

pub struct SeqFeed {
    plan: Arc<SeqPlan>,
    seqs: Sequences,
    /// Open loop: sends are dealt to the sequences round robin, each waiting for its
    /// sequence's previous response; closed loop: each pool slot owns the sequence slot of
    /// the same index.
    open_loop: bool,
    /// The last prepared request's bytes.
    pub scratch: Vec<u8>,
}

impl SeqFeed {
    /// One feed per worker, with `slots[w]` sequence slots for worker `w`.
    pub fn split(plan: &Arc<SeqPlan>, slots: &[usize], open_loop: bool) -> Result<Vec<SeqFeed>> {
        let all = Sequences::split(&plan.cfg, slots, &plan.stream_steps)?;
        if let Some(w) = all.first().and_then(Sequences::warning) {
            eprintln!("{w}");
        }
        Ok(all
            .into_iter()
            .map(|seqs| SeqFeed {
                plan: plan.clone(),
                seqs,
                open_loop,
                scratch: Vec::new(),
            })
            .collect())
    }

    pub fn slots(&self) -> usize {
        self.seqs.slots()
    }

    /// The next request: on `pool_slot`'s sequence (closed loop) or a picked one (open loop);
    /// `None` when that sequence still has a request in flight.
    pub fn prepare(&mut self, pool_slot: usize, busy: &[bool]) -> Option<SeqSend> {
        let slot = if self.open_loop {
            let slot = self.seqs.pick_slot(busy)?;
            self.seqs.advance_deal();
            slot
        } else {
            let slot = pool_slot % self.seqs.slots().max(1);
            if busy.get(slot).copied().unwrap_or(false) {
                return None;
            }
            slot
        };
        let fields = self.seqs.next(slot);
        Some(self.write(slot, fields))
    }

    /// After a level: the END request of a live sequence with nothing in flight, if any.
    pub fn closing(&mut self, busy: &[bool]) -> Option<SeqSend> {
        let slot = self
            .seqs
            .live()
            .find(|&s| !busy.get(s).copied().unwrap_or(false))?;
        let fields = self.seqs.finish(slot)?;
        Some(self.write(slot, fields))
    }

    /// Open loop: the sequence the next send is dealt to has no request in flight (a due
    /// send waits for it otherwise). Always true in closed loop.
    pub fn ready(&self, busy: &[bool]) -> bool {
        !self.open_loop || self.seqs.pick_slot(busy).is_some()
    }

    /// Live sequences remain (the worker must not exit before closing them).
    pub fn has_live(&self) -> bool {
        self.seqs.live().next().is_some()
    }

    fn write(&mut self, slot: usize, fields: SeqFields) -> SeqSend {
        let t = &self.plan.templates[fields.stream][fields.step];
        self.scratch.clear();
        self.scratch.extend_from_slice(&t.bytes);
        t.patch(&mut self.scratch, &fields);
        SeqSend {
            slot,
            fields,
            flat_step: self.plan.flat_steps[fields.stream][fields.step],
        }
    }
}
