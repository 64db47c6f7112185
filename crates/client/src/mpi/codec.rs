//! The bytes ranks exchange after each window: a rank's vote, its window statistics and (with
//! the profile export) its records. Little-endian, length-prefixed; decoding checks every
//! length against what is left, so a torn or hostile message is an error, never a panic.

use crate::error::{Error, Result};
use crate::measure::{Dist, FailKind, RequestRecord, RxTime, WindowRecords, WindowStats};

/// Appends fixed-width integers and length-prefixed runs to a byte buffer.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64s(&mut self, v: &[u64]) {
        self.u64(v.len() as u64);
        self.buf.reserve(v.len() * 8);
        v.iter().for_each(|x| self.u64(*x));
    }
    pub fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.buf.extend_from_slice(v);
    }
}

/// Reads what [`Writer`] wrote; every read fails cleanly past the end.
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.rest.len() < n {
            return Err(Error::generic(format!(
                "MPI message from another rank is truncated: {n} bytes wanted, {} left",
                self.rest.len()
            )));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// A count of `unit`-byte items, checked against the bytes left before anything is
    /// allocated.
    fn count(&mut self, unit: usize) -> Result<usize> {
        let n = self.u64()?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .is_some_and(|bytes| bytes <= self.rest.len());
        if !fits {
            return Err(Error::generic(format!(
                "MPI message from another rank is corrupt: {n} items of {unit} bytes announced, \
                 {} bytes left",
                self.rest.len()
            )));
        }
        Ok(n as usize)
    }
    pub fn u64s(&mut self) -> Result<Vec<u64>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.u64()).collect()
    }
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.count(1)?;
        self.take(n)
    }
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

/// A window's statistics, without the server delta (rank 0 keeps its own: every rank's
/// server sees the same model, so adding them would count each request several times).
pub fn put_window_stats(w: &mut Writer, s: &WindowStats) {
    for v in [
        s.start_ns,
        s.end_ns,
        s.duration_ns,
        s.request_count,
        s.error_count,
        s.sent,
        s.send_ns_sum,
        s.recv_ns_sum,
        s.request_ns_sum,
        s.response_count,
        s.first_response_ns_sum,
        s.response_gap_ns_sum,
        s.multi_response_count,
        s.sequence_count,
        s.client_cpu_ns,
        s.late_count,
        s.rx_kernel,
        s.rx_clock,
    ] {
        w.u64(v);
    }
    w.u32(s.workers);
    for d in [&s.latency, &s.lag, &s.corrected, &s.rx_delay] {
        put_dist(w, d);
    }
}

/// A latency summary: its totals, then its non-empty buckets as (index, count) pairs.
fn put_dist(w: &mut Writer, d: &Dist) {
    let (count, sum, sum_sq, min, max) = d.totals();
    w.u64(count);
    for v in [sum, sum_sq] {
        w.u64(v as u64);
        w.u64((v >> 64) as u64);
    }
    w.u64(min);
    w.u64(max);
    let pairs: Vec<u64> = d.buckets().flat_map(|(i, n)| [i, n]).collect();
    w.u64s(&pairs);
}

fn get_dist(r: &mut Reader) -> Result<Dist> {
    let count = r.u64()?;
    let mut wide = [0u128; 2];
    for v in &mut wide {
        *v = u128::from(r.u64()?) | (u128::from(r.u64()?) << 64);
    }
    let (min, max) = (r.u64()?, r.u64()?);
    let flat = r.u64s()?;
    let pairs: Vec<(u64, u64)> = flat.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    (flat.len() % 2 == 0)
        .then(|| Dist::from_parts((count, wide[0], wide[1], min, max), &pairs))
        .flatten()
        .ok_or_else(|| {
            Error::generic("MPI message from another rank is corrupt: a bad latency histogram")
        })
}

pub fn get_window_stats(r: &mut Reader) -> Result<WindowStats> {
    let mut v = [0u64; 18];
    for x in &mut v {
        *x = r.u64()?;
    }
    Ok(WindowStats {
        start_ns: v[0],
        end_ns: v[1],
        duration_ns: v[2],
        request_count: v[3],
        error_count: v[4],
        sent: v[5],
        send_ns_sum: v[6],
        recv_ns_sum: v[7],
        request_ns_sum: v[8],
        response_count: v[9],
        first_response_ns_sum: v[10],
        response_gap_ns_sum: v[11],
        multi_response_count: v[12],
        sequence_count: v[13],
        client_cpu_ns: v[14],
        late_count: v[15],
        rx_kernel: v[16],
        rx_clock: v[17],
        workers: r.u32()?,
        latency: get_dist(r)?,
        lag: get_dist(r)?,
        corrected: get_dist(r)?,
        rx_delay: get_dist(r)?,
        server: None,
    })
}

/// Bytes of one encoded record.
const RECORD_BYTES: usize = 8 * 7 + 4 * 5 + 5 + 2;

fn put_record(w: &mut Writer, rec: &RequestRecord) {
    for v in [
        rec.start_ns,
        rec.send_end_ns,
        rec.recv_start_ns,
        rec.end_ns,
        rec.intended_ns,
        rec.seq_id,
        u64::from(rec.rx_delay_us),
    ] {
        w.u64(v);
    }
    for v in [
        rec.step,
        rec.body_off,
        rec.body_len,
        rec.responses,
        rec.seq_slot,
    ] {
        w.u32(v);
    }
    for v in [rec.ok, rec.seq_end, rec.sse] {
        w.u8(u8::from(v));
    }
    w.u8(rec.fail as u8);
    w.u8(match rec.rx {
        RxTime::NotStamped => 0,
        RxTime::Kernel => 1,
        RxTime::Clock => 2,
    });
    w.u16(rec.status);
}

fn get_record(r: &mut Reader) -> Result<RequestRecord> {
    Ok(RequestRecord {
        start_ns: r.u64()?,
        send_end_ns: r.u64()?,
        recv_start_ns: r.u64()?,
        end_ns: r.u64()?,
        intended_ns: r.u64()?,
        seq_id: r.u64()?,
        rx_delay_us: r.u64()?.min(u64::from(u32::MAX)) as u32,
        step: r.u32()?,
        body_off: r.u32()?,
        body_len: r.u32()?,
        responses: r.u32()?,
        seq_slot: r.u32()?,
        ok: r.u8()? != 0,
        seq_end: r.u8()? != 0,
        sse: r.u8()? != 0,
        fail: FailKind::from_u8(r.u8()?),
        rx: match r.u8()? {
            1 => RxTime::Kernel,
            2 => RxTime::Clock,
            _ => RxTime::NotStamped,
        },
        status: r.u16()?,
        // HTTP traces are `profile`'s, which runs in one process: none crosses hosts.
        traced: false,
    })
}

/// A window's records and response bodies (for the profile export).
pub fn put_window_records(w: &mut Writer, recs: &WindowRecords) {
    for v in [recs.start_ns, recs.end_ns, recs.sent, recs.client_cpu_ns] {
        w.u64(v);
    }
    w.u32(recs.workers);
    w.u64(recs.records.len() as u64);
    recs.records.iter().for_each(|rec| put_record(w, rec));
    w.bytes(&recs.bodies);
}

pub fn get_window_records(r: &mut Reader) -> Result<WindowRecords> {
    let (start_ns, end_ns, sent, client_cpu_ns) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
    let workers = r.u32()?;
    let n = r.count(RECORD_BYTES)?;
    let records = (0..n).map(|_| get_record(r)).collect::<Result<Vec<_>>>()?;
    let bodies = r.bytes()?.to_vec();
    // A body region outside the bodies would make the export read out of bounds.
    let bad = records.iter().any(|rec| {
        (rec.body_off as usize)
            .checked_add(rec.body_len as usize)
            .map_or(true, |end| end > bodies.len())
    });
    if bad {
        return Err(Error::generic(
            "MPI message from another rank is corrupt: a response body lies outside the bodies",
        ));
    }
    Ok(WindowRecords {
        start_ns,
        end_ns,
        records,
        sent,
        bodies,
        client_cpu_ns,
        workers,
    })
}

/// Decodes one rank's per-window message: statistics, then its records when it sent any.
pub fn decode_report(bytes: &[u8]) -> Result<(WindowStats, Option<WindowRecords>)> {
    let mut r = Reader::new(bytes);
    let stats = get_window_stats(&mut r)?;
    let records = match r.u8()? {
        0 => None,
        _ => Some(get_window_records(&mut r)?),
    };
    Ok((stats, records))
}

/// Decodes a whole per-window message as rank 0 does (fuzz target and corpus replay): never
/// panics, whatever the bytes, and what decodes encodes back to the same values.
pub fn fuzz_window_message(bytes: &[u8]) {
    let Ok((stats, records)) = decode_report(bytes) else {
        return;
    };
    let mut w = Writer::default();
    put_window_stats(&mut w, &stats);
    w.u8(u8::from(records.is_some()));
    if let Some(r) = &records {
        put_window_records(&mut w, r);
    }
    let (stats2, records2) = decode_report(&w.buf).expect("re-encoded message");
    assert_eq!(stats, stats2);
    assert_eq!(records.map(|r| r.records), records2.map(|r| r.records));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_stats() -> WindowStats {
        WindowStats {
            start_ns: 1,
            end_ns: 2_000_000_001,
            duration_ns: 2_000_000_000,
            request_count: 3,
            error_count: 1,
            sent: 4,
            latency: Dist::of([5, 6_000, 7_000_000_000]),
            send_ns_sum: 8,
            recv_ns_sum: 9,
            request_ns_sum: 10,
            response_count: 11,
            first_response_ns_sum: 12,
            response_gap_ns_sum: 13,
            multi_response_count: 14,
            sequence_count: 15,
            lag: Dist::of([16]),
            corrected: Dist::of([17, 18]),
            late_count: 21,
            rx_delay: Dist::of([22, 23_000]),
            rx_kernel: 24,
            rx_clock: 25,
            client_cpu_ns: 19,
            workers: 20,
            server: None,
        }
    }

    fn sample_records() -> WindowRecords {
        let rec = RequestRecord {
            start_ns: 1,
            send_end_ns: 2,
            recv_start_ns: 3,
            end_ns: 4,
            step: 5,
            ok: true,
            body_off: 1,
            body_len: 2,
            responses: 6,
            intended_ns: 7,
            seq_slot: 8,
            seq_id: 9,
            seq_end: true,
            sse: false,
            fail: FailKind::Timeout,
            status: 504,
            traced: false,
            rx: RxTime::Kernel,
            rx_delay_us: 26,
        };
        WindowRecords {
            start_ns: 10,
            end_ns: 20,
            records: vec![rec, RequestRecord::default()],
            sent: 2,
            bodies: b"abc".to_vec(),
            client_cpu_ns: 30,
            workers: 2,
        }
    }

    #[test]
    fn stats_and_records_round_trip() {
        let mut w = Writer::default();
        put_window_stats(&mut w, &sample_stats());
        put_window_records(&mut w, &sample_records());
        let mut r = Reader::new(&w.buf);
        assert_eq!(get_window_stats(&mut r).unwrap(), sample_stats());
        let recs = get_window_records(&mut r).unwrap();
        assert_eq!(recs.records, sample_records().records);
        assert_eq!(recs.bodies, b"abc");
        assert_eq!((recs.start_ns, recs.sent, recs.workers), (10, 2, 2));
        assert!(r.is_empty());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let mut w = Writer::default();
        put_window_stats(&mut w, &sample_stats());
        put_window_records(&mut w, &sample_records());
        for cut in 0..w.buf.len() {
            let mut r = Reader::new(&w.buf[..cut]);
            let whole = get_window_stats(&mut r).and_then(|_| get_window_records(&mut r));
            assert!(whole.is_err(), "cut at {cut} decoded");
        }
    }

    #[test]
    fn huge_counts_and_bodies_out_of_range_are_refused() {
        let mut w = Writer::default();
        w.u64(u64::MAX);
        assert!(Reader::new(&w.buf).u64s().is_err());
        let mut recs = sample_records();
        recs.records[0].body_len = 3; // offset 1 + 3 > 3 bytes
        let mut w = Writer::default();
        put_window_records(&mut w, &recs);
        let err = get_window_records(&mut Reader::new(&w.buf)).unwrap_err();
        assert!(err.to_string().contains("outside the bodies"), "{err}");
    }

    #[test]
    fn a_bad_histogram_is_refused_and_the_corpus_seeds_decode() {
        let mut stats = sample_stats();
        stats.latency = Dist::of([5_000, 5_000]);
        let mut w = Writer::default();
        put_window_stats(&mut w, &stats);
        // The latency summary's one bucket, (index 5, count 2), now claims 3 of 2 times.
        let pair = [5u64.to_le_bytes(), 2u64.to_le_bytes()].concat();
        let at = w
            .buf
            .windows(16)
            .position(|x| x == pair)
            .expect("bucket pair");
        w.buf[at + 8] = 3;
        let err = get_window_stats(&mut Reader::new(&w.buf)).unwrap_err();
        assert!(err.to_string().contains("latency histogram"), "{err}");
        let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/mpi_window");
        for (seed, records) in [("stats_only", false), ("with_records", true)] {
            let bytes = std::fs::read(format!("{seeds}/{seed}")).expect("seed");
            let (stats, recs) = decode_report(&bytes).unwrap_or_else(|e| panic!("{seed}: {e}"));
            assert_eq!(stats.latency.count(), 4, "{seed}");
            assert_eq!(stats.latency.max_ns(), 70_000_000, "{seed}");
            assert_eq!(recs.is_some(), records, "{seed}");
        }
    }
}
