//! Sequence (stateful) models on the client side: which sequence id,
//! start/end flags, data stream and input step each request of a sequence slot carries.
//!
//! Pure and seedable: no clock, no I/O, no allocation after construction. A slot is one
//! concurrent sequence (a concurrency slot in concurrency mode, one of `--num-of-sequences`
//! in rate modes). Each worker thread owns one `Sequences` for its slots; `split` gives the
//! workers disjoint blocks of the id range so they never need to share state.

use crate::error::{Error, Result};
use crate::service::seq_patch::SeqFields;

/// The id range when `--sequence-id-range` has no end (perf_analyzer uses UINT32_MAX).
pub const UNBOUNDED_ID_RANGE: u64 = u32::MAX as u64;

/// The sequence flags of a run, as the CLI validated them.
#[derive(Clone, Debug, PartialEq)]
pub struct SeqConfig {
    /// First sequence id (`--sequence-id-range start[:end]`); 0 is coerced to 1.
    pub id_start: u64,
    /// Number of ids: `end - start`, or `UNBOUNDED_ID_RANGE` without an end.
    pub id_range: u64,
    /// `--sequence-length`: base number of requests per sequence.
    pub length: u64,
    /// `--sequence-length` was given: JSON data then does not set the length.
    pub length_given: bool,
    /// `--sequence-length-variation`, in percent of `length` (±).
    pub variation_pct: f64,
    /// Seed of the length, stream and slot draws; the same seed replays the same run.
    pub seed: u64,
}

impl Default for SeqConfig {
    fn default() -> Self {
        SeqConfig {
            id_start: 1,
            id_range: UNBOUNDED_ID_RANGE,
            length: 20,
            length_given: false,
            variation_pct: 20.0,
            seed: 0,
        }
    }
}

/// One concurrent sequence. `id` 0 means the slot never started a sequence (ids are ≥ 1).
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    id: u64,
    /// Requests still to send in the current sequence; 0: none live.
    remaining: u64,
    /// Requests in the current sequence.
    length: u64,
    stream: usize,
}

/// The sequence state of one worker's slots.
#[derive(Debug)]
pub struct Sequences {
    slots: Vec<Slot>,
    /// First id of this instance's block of the id range.
    id_start: u64,
    /// Ids in this instance's block (≥ the number of slots).
    id_range: u64,
    /// Sequences started so far; the next id is `id_start + counter % id_range`.
    counter: u64,
    /// Rate modes: sends dealt so far; the next goes to slot `dealt % slots`.
    dealt: u64,
    base_length: u64,
    length_given: bool,
    variation_pct: f64,
    /// Steps of each JSON data stream; empty without JSON data.
    stream_steps: Vec<usize>,
    rng: SplitMix64,
    warning: Option<String>,
}

/// `--sequence-id-range` start 0 is coerced to 1 (0 means "no sequence" to Triton); the
/// second value is the warning to print when that happened.
pub fn coerce_id_start(start: u64) -> (u64, Option<String>) {
    if start == 0 {
        let msg = "WARNING: sequence id 0 is reserved; --sequence-id-range starts at 1 instead";
        (1, Some(msg.to_string()))
    } else {
        (start, None)
    }
}

impl Sequences {
    /// `slots` concurrent sequences using the whole id range. `stream_steps`: step count of
    /// each input-data stream from JSON data, or empty for random/zero data. Fails when the id
    /// range is smaller than `slots` (ids would collide) or a stream has no steps.
    pub fn new(cfg: &SeqConfig, slots: usize, stream_steps: &[usize]) -> Result<Sequences> {
        let mut all = Self::split(cfg, &[slots], stream_steps)?;
        all.pop()
            .ok_or_else(|| Error::generic("sequence state: no worker"))
    }

    /// One `Sequences` per worker, worker `w` owning `slots_per_worker[w]` slots and a
    /// disjoint block of the id range of at least that many ids (blocks are proportional to
    /// the slot counts). Worker seeds differ, derived from `cfg.seed`.
    pub fn split(
        cfg: &SeqConfig,
        slots_per_worker: &[usize],
        stream_steps: &[usize],
    ) -> Result<Vec<Sequences>> {
        let (id_start, warning) = coerce_id_start(cfg.id_start);
        // Ids must stay representable: an unbounded range near u64::MAX is cut short.
        let range = cfg.id_range.min(u64::MAX - id_start + 1);
        let total: usize = slots_per_worker.iter().sum();
        if range == 0 || (range as u128) < total as u128 {
            return Err(Error::usage(format!(
                "--sequence-id-range: the range holds {range} sequence ids but {total} \
                 sequences run at once, so ids would collide; use a range of at least {total} ids"
            )));
        }
        check_variation(cfg.variation_pct)?;
        if let Some(i) = stream_steps.iter().position(|&s| s == 0) {
            return Err(Error::usage(format!(
                "input data stream {i} has no steps; a sequence needs at least one"
            )));
        }
        let mut workers = Vec::with_capacity(slots_per_worker.len());
        let mut before = 0usize;
        for (w, &slots) in slots_per_worker.iter().enumerate() {
            let (offset, ids) = id_block(range, before, slots, total);
            before += slots;
            workers.push(Sequences {
                slots: vec![Slot::default(); slots],
                id_start: id_start + offset,
                id_range: ids,
                counter: 0,
                dealt: 0,
                base_length: cfg.length.max(1),
                length_given: cfg.length_given,
                variation_pct: cfg.variation_pct,
                stream_steps: stream_steps.to_vec(),
                rng: SplitMix64::new(cfg.seed ^ (w as u64).wrapping_mul(0xA076_1D64_78BD_642F)),
                warning: warning.clone(),
            });
        }
        Ok(workers)
    }

    /// The warning to print once (start id 0 coerced to 1), if any.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The fields of the next request on `slot`, starting a new sequence when the last one
    /// ended. Panics if `slot >= self.slots()` (a caller bug, not input).
    pub fn next(&mut self, slot: usize) -> SeqFields {
        let start = self.slots[slot].remaining == 0;
        if start {
            self.begin(slot);
        }
        self.emit(slot, start)
    }

    /// Slots with a live sequence (sent START, not END): what completing a level must close.
    pub fn live(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.remaining > 0)
            .map(|(i, _)| i)
    }

    /// The closing request of a live slot: same id, `end` set, the step of the sequence's
    /// last request (as perf_analyzer does). `None` if the slot has no live sequence.
    pub fn finish(&mut self, slot: usize) -> Option<SeqFields> {
        if self.slots.get(slot)?.remaining == 0 {
            return None;
        }
        self.slots[slot].remaining = 1;
        Some(self.emit(slot, false))
    }

    /// Rate modes: the slot the next scheduled request goes to. Sends are dealt to the
    /// slots round robin (as perf_analyzer deals them when each thread holds one sequence),
    /// and a slot with a request in flight (`busy[i]`; missing entries count as free) holds
    /// the deal: `None` until its response is back, so a sequence's steps can never overtake
    /// each other on the way to the server. `None` too with no slot at all.
    pub fn pick_slot(&self, busy: &[bool]) -> Option<usize> {
        let n = self.slots.len();
        if n == 0 {
            return None;
        }
        let slot = (self.dealt % n as u64) as usize;
        (!busy.get(slot).copied().unwrap_or(false)).then_some(slot)
    }

    /// Rate modes: the slot `pick_slot` gave was sent to; the deal moves on.
    pub fn advance_deal(&mut self) {
        self.dealt = self.dealt.wrapping_add(1);
    }

    fn emit(&mut self, slot: usize, start: bool) -> SeqFields {
        let steps = self.stream_steps.get(self.slots[slot].stream).copied();
        let s = &mut self.slots[slot];
        let done = s.length - s.remaining;
        let step = steps.map_or(0, |n| (done % n as u64) as usize);
        let end = s.remaining == 1;
        s.remaining -= 1;
        SeqFields {
            id: s.id,
            start,
            end,
            stream: s.stream,
            step,
        }
    }

    /// Starts a new sequence on `slot`: id, data stream, length.
    fn begin(&mut self, slot: usize) {
        let id = self.next_id(slot);
        let streams = self.stream_steps.len();
        let stream = if streams > 1 {
            self.rng.below(streams)
        } else {
            0
        };
        let length = match self.stream_steps.get(stream) {
            Some(&steps) if !self.length_given => steps as u64,
            _ => self.random_length(),
        };
        self.slots[slot] = Slot {
            id,
            remaining: length,
            length,
            stream,
        };
    }

    /// `start + counter % range`; a candidate another slot holds (live or not) is skipped by
    /// reusing this slot's previous id, so every slot always holds a distinct id. A slot that
    /// never had an id draws again instead (at most `slots - 1` ids are held by others and
    /// the range has at least `slots` ids, so the loop ends).
    fn next_id(&mut self, slot: usize) -> u64 {
        let old = self.slots[slot].id;
        loop {
            let candidate = self.id_start + self.counter % self.id_range;
            self.counter = self.counter.wrapping_add(1);
            if !self.slots.iter().any(|s| s.id == candidate) {
                return candidate;
            }
            if old != 0 {
                return old;
            }
        }
    }

    /// `base + trunc(U(-1,1) × var% × base)`, at least 1.
    fn random_length(&mut self) -> u64 {
        let u = self.rng.signed_unit();
        let delta = (u * self.variation_pct / 100.0 * self.base_length as f64).trunc();
        // `as` saturates; the variation is checked finite and non-negative.
        let length = self.base_length.saturating_add_signed(delta as i64);
        length.max(1)
    }
}

fn check_variation(pct: f64) -> Result<()> {
    if pct.is_finite() && pct >= 0.0 {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "--sequence-length-variation must be a non-negative percentage, got {pct}"
        )))
    }
}

/// Offset and size of the id block of a worker whose slots come after `before` others:
/// `floor(range × cumulative slots / total)`, so a block holds at least its slot count when
/// `range ≥ total`. With no slots at all every worker gets the whole range (it draws none).
fn id_block(range: u64, before: usize, slots: usize, total: usize) -> (u64, u64) {
    if total == 0 {
        return (0, range);
    }
    let edge = |cum: usize| (range as u128 * cum as u128 / total as u128) as u64;
    let from = edge(before);
    (from, edge(before + slots) - from)
}

/// SplitMix64: a small, fast, seedable generator; statistical quality is ample for picking
/// lengths, streams and slots.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1), 53 bits of precision.
    fn signed_unit(&mut self) -> f64 {
        let unit = crate::random::unit(self.next_u64());
        2.0 * unit - 1.0
    }

    /// Uniform in [0, n) by multiply-shift (bias below 2^-32 for the n used here).
    fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
#[path = "sequence_tests.rs"]
mod tests;
