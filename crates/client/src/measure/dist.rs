//! A fixed-size summary of a distribution of times (ns): exact count, sum, sum of squares,
//! minimum and maximum, and a histogram for percentiles.
//!
//! Reports print times as whole microseconds (truncated), so the histogram's buckets are
//! whole microseconds below [`LINEAR_US`] (65.536 ms): a percentile there falls in the
//! bucket of the exact nearest-rank sample and prints the same number as the sorted samples
//! would. Above it, each power of two of microseconds is split into 1,024 equal buckets and
//! a percentile is reported at its bucket's middle, within 1/2048 (0.05 %) of the exact
//! sample's microseconds. Means and counts are exact; the standard deviation comes from the
//! exact sums. Buckets live in chunks of 1,024 allocated when a value first lands in them,
//! so a summary never holds more than [`MAX_HEAP_BYTES`], whatever its count.

use std::fmt;

/// Buckets per chunk and per power of two above the linear range.
const SUB_BITS: u32 = 10;
const SUB: usize = 1 << SUB_BITS;
const LINEAR_BITS: u32 = 16;
/// Times below this many microseconds have a bucket of their own microsecond.
pub const LINEAR_US: u64 = 1 << LINEAR_BITS;
/// The largest power of two a time in microseconds reaches: log2(u64::MAX / 1000).
const MAX_EXP: u32 = 54;
const BUCKETS: usize = LINEAR_US as usize + (MAX_EXP - LINEAR_BITS + 1) as usize * SUB;
const CHUNKS: usize = BUCKETS / SUB;
/// The most heap one summary holds: every chunk and the chunk table.
pub const MAX_HEAP_BYTES: usize =
    CHUNKS * SUB * std::mem::size_of::<u64>() + CHUNKS * std::mem::size_of::<Option<Chunk>>();

type Chunk = Box<[u64; SUB]>;

/// Count, exact sums, extremes and a histogram of times in ns.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Dist {
    count: u64,
    sum: u128,
    /// Sum of squares, saturating (only a sum past 2^128 ns^2 saturates).
    sum_sq: u128,
    min: u64,
    max: u64,
    /// `CHUNKS` entries once a value was added; empty before.
    chunks: Vec<Option<Chunk>>,
}

/// The scalar part of a [`Dist`]: count, sum, sum of squares, min, max.
pub type DistTotals = (u64, u128, u128, u64, u64);

/// The bucket of a time in ns.
fn bucket_of(ns: u64) -> usize {
    let us = ns / 1000;
    if us < LINEAR_US {
        return us as usize;
    }
    let e = 63 - us.leading_zeros();
    let sub = (us >> (e - SUB_BITS)) as usize - SUB;
    LINEAR_US as usize + (e - LINEAR_BITS) as usize * SUB + sub
}

/// Lower bound and width of bucket `i`, in µs.
fn bucket_range(i: usize) -> (u64, u64) {
    if i < LINEAR_US as usize {
        return (i as u64, 1);
    }
    let j = i - LINEAR_US as usize;
    let shift = LINEAR_BITS + (j / SUB) as u32 - SUB_BITS;
    (((SUB + j % SUB) as u64) << shift, 1 << shift)
}

impl Dist {
    /// A summary of `samples` (ns).
    pub fn of(samples: impl IntoIterator<Item = u64>) -> Dist {
        let mut d = Dist::default();
        samples.into_iter().for_each(|v| d.add(v));
        d
    }

    /// Adds one time (ns).
    #[inline]
    pub fn add(&mut self, ns: u64) {
        if self.count == 0 {
            self.min = ns;
            self.max = ns;
        } else {
            self.min = self.min.min(ns);
            self.max = self.max.max(ns);
        }
        self.count += 1;
        let v = u128::from(ns);
        self.sum += v;
        self.sum_sq = self.sum_sq.saturating_add(v * v);
        let i = bucket_of(ns);
        self.chunk(i / SUB)[i % SUB] += 1;
    }

    /// The chunk `c`, allocated (zeroed) on first use.
    fn chunk(&mut self, c: usize) -> &mut [u64; SUB] {
        if self.chunks.is_empty() {
            self.chunks.resize_with(CHUNKS, || None);
        }
        self.chunks[c].get_or_insert_with(|| Box::new([0; SUB]))
    }

    /// Adds every time of `other`.
    pub fn merge(&mut self, other: &Dist) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            self.min = other.min;
            self.max = other.max;
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq = self.sum_sq.saturating_add(other.sum_sq);
        for (c, chunk) in other.chunks.iter().enumerate() {
            if let Some(src) = chunk {
                let dst = self.chunk(c);
                dst.iter_mut().zip(src.iter()).for_each(|(d, s)| *d += s);
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Sum of the times (ns), exact.
    pub fn sum_ns(&self) -> u128 {
        self.sum
    }
    /// Smallest and largest time (ns); 0 when empty.
    pub fn min_ns(&self) -> u64 {
        self.min
    }
    pub fn max_ns(&self) -> u64 {
        self.max
    }

    /// Integer mean (ns, truncated); 0 when empty.
    pub fn mean_ns(&self) -> u64 {
        self.sum.checked_div(u128::from(self.count)).unwrap_or(0) as u64
    }

    /// Sample standard deviation (n-1), truncated to µs; 0 with fewer than two times.
    pub fn std_dev_us(&self) -> u64 {
        if self.count < 2 {
            return 0;
        }
        let n = u128::from(self.count);
        // n * sum_sq - sum^2 = n * sum((x - mean)^2), exact while it fits in 128 bits.
        let exact = (self.sum_sq < u128::MAX)
            .then(|| {
                n.checked_mul(self.sum_sq)?
                    .checked_sub(self.sum.checked_mul(self.sum)?)
            })
            .flatten();
        let var = match exact {
            Some(num) => num as f64 / (n * (n - 1)) as f64,
            None => {
                let (nf, s) = (n as f64, self.sum as f64);
                ((self.sum_sq as f64 - s * s / nf) / (nf - 1.0)).max(0.0)
            }
        };
        (var.sqrt() / 1000.0) as u64
    }

    /// The p-th percentile (ns) by perf_analyzer's nearest rank,
    /// `idx = floor(p/100 * (n-1) + 0.5)`: below [`LINEAR_US`] the exact sample's whole
    /// microseconds (its printed value), above them within 0.05 %; always within [min, max].
    /// 0 when empty.
    pub fn percentile_ns(&self, p: u32) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let last = self.count - 1;
        let idx = ((f64::from(p) / 100.0 * last as f64 + 0.5) as u64).min(last);
        let mut seen = 0u64;
        for (c, chunk) in self.chunks.iter().enumerate() {
            let Some(chunk) = chunk else { continue };
            let total: u64 = chunk.iter().sum();
            if seen + total <= idx {
                seen += total;
                continue;
            }
            for (k, &n) in chunk.iter().enumerate() {
                seen += n;
                if seen > idx {
                    return self.value_of(c * SUB + k);
                }
            }
        }
        self.max
    }

    /// The time reported for bucket `i` (ns): its microsecond in the linear range, else its
    /// middle; clamped to [min, max].
    fn value_of(&self, i: usize) -> u64 {
        let (lo, width) = bucket_range(i);
        let us = lo + width / 2;
        us.saturating_mul(1000).clamp(self.min, self.max)
    }

    /// Heap bytes held (chunk table and chunks); at most [`MAX_HEAP_BYTES`].
    pub fn heap_bytes(&self) -> usize {
        let chunks = self.chunks.iter().flatten().count();
        self.chunks.capacity() * std::mem::size_of::<Option<Chunk>>()
            + chunks * SUB * std::mem::size_of::<u64>()
    }

    /// Count, sum, sum of squares, min and max (for sending a summary elsewhere).
    pub fn totals(&self) -> DistTotals {
        (self.count, self.sum, self.sum_sq, self.min, self.max)
    }

    /// The non-empty buckets as (index, count), ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk.iter().flat_map(move |ch| {
                ch.iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(move |(k, &n)| ((c * SUB + k) as u64, n))
            })
        })
    }

    /// Rebuilds a summary from [`Dist::totals`] and [`Dist::buckets`]; `None` when a bucket
    /// index is out of range or the bucket counts do not add up to the count.
    pub fn from_parts(totals: DistTotals, buckets: &[(u64, u64)]) -> Option<Dist> {
        let (count, sum, sum_sq, min, max) = totals;
        let mut d = Dist {
            count,
            sum,
            sum_sq,
            min,
            max,
            chunks: Vec::new(),
        };
        let mut total = 0u64;
        for &(i, n) in buckets.iter().filter(|b| b.1 > 0) {
            let i = usize::try_from(i).ok().filter(|&i| i < BUCKETS)?;
            total = total.checked_add(n)?;
            let slot = &mut d.chunk(i / SUB)[i % SUB];
            *slot = slot.checked_add(n)?;
        }
        (total == count && (count > 0 || (min == 0 && max == 0)) && min <= max).then_some(d)
    }
}

impl fmt::Debug for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dist")
            .field("count", &self.count)
            .field("mean_ns", &self.mean_ns())
            .field("min_ns", &self.min)
            .field("max_ns", &self.max)
            .finish()
    }
}

#[cfg(test)]
#[path = "dist_tests.rs"]
mod tests;
