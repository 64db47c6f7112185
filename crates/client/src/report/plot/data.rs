//! What the run charts show, computed from the requests: plain numbers, no drawing.
//! Times are in milliseconds, lengths in tokens.

use std::collections::BTreeMap;

use crate::measure::llm::record::LlmRequest;

/// Most points one scatter chart draws; beyond this the points are thinned evenly (every
/// n-th kept) so a long run still gives an SVG of a few MB at most.
pub(crate) const MAX_SCATTER_POINTS: usize = 10_000;

/// Most bins per axis of the ISL x OSL heat map (cells stay readable at 1000x600 px).
pub(crate) const MAX_HEAT_BINS: u64 = 20;

/// One box of a box plot: a label and its values, sorted ascending (ms).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Group {
    pub label: String,
    pub values: Vec<f64>,
}

/// 2-D histogram of (ISL, OSL): cell `counts[xi][yi]` covers ISL in
/// `[x_lo + xi*x_width, x_lo + (xi+1)*x_width)` and the same for OSL with `y_*`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HeatGrid {
    pub x_lo: u64,
    pub x_width: u64,
    pub y_lo: u64,
    pub y_width: u64,
    pub counts: Vec<Vec<u64>>,
}

impl HeatGrid {
    pub fn x_bins(&self) -> usize {
        self.counts.len()
    }
    pub fn y_bins(&self) -> usize {
        self.counts.first().map_or(0, Vec::len)
    }
    pub fn max_count(&self) -> u64 {
        self.counts.iter().flatten().copied().max().unwrap_or(0)
    }
}

pub(crate) fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Time to first token: first output chunk's arrival minus the request start; `None`
/// without output chunks (embeddings, rankings).
pub(crate) fn ttft_ms(r: &LlmRequest) -> Option<f64> {
    r.chunks
        .first()
        .map(|c| ns_to_ms(c.arrival_ns.saturating_sub(r.start_ns)))
}

/// End-to-end request latency.
pub(crate) fn latency_ms(r: &LlmRequest) -> f64 {
    ns_to_ms(r.end_ns.saturating_sub(r.start_ns))
}

/// Values per model (ascending model index), each sorted; models without values are left
/// out. The label is the model's name when `names` has it, else `model <index>`.
pub(crate) fn by_model(
    reqs: &[&LlmRequest],
    names: &[String],
    value: impl Fn(&LlmRequest) -> Option<f64>,
) -> Vec<Group> {
    let mut per_model: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for r in reqs {
        if let Some(v) = value(r) {
            per_model.entry(r.model).or_default().push(v);
        }
    }
    per_model
        .into_iter()
        .map(|(model, mut values)| {
            values.sort_by(f64::total_cmp);
            let label = names
                .get(model as usize)
                .cloned()
                .unwrap_or_else(|| format!("model {model}"));
            Group { label, values }
        })
        .collect()
}

/// Nearest-rank quantile `q` in [0, 1] of ascending `sorted` (not empty).
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// (ISL, TTFT ms) for every request with output chunks.
pub(crate) fn ttft_vs_isl(reqs: &[&LlmRequest]) -> Vec<(f64, f64)> {
    let points = reqs
        .iter()
        .filter_map(|r| ttft_ms(r).map(|t| (r.isl as f64, t)))
        .collect();
    thin(points, MAX_SCATTER_POINTS)
}

/// (output token position, token-to-token latency ms) for every token after the first
/// chunk: a chunk's gap since the previous chunk with tokens, divided by its own tokens,
/// placed at each of its tokens' positions (1-based). Chunks counted as 0 tokens carry no
/// point; their time stays in the next counted chunk's gap.
pub(crate) fn token_gaps(reqs: &[&LlmRequest]) -> Vec<(f64, f64)> {
    let mut points = Vec::new();
    for r in reqs {
        let mut position = 0u64;
        let mut last_arrival: Option<u64> = None;
        for c in r.chunks.iter().filter(|c| c.tokens > 0) {
            if let Some(prev) = last_arrival {
                let per_token = ns_to_ms(c.arrival_ns.saturating_sub(prev)) / c.tokens as f64;
                for k in 1..=c.tokens {
                    points.push(((position + k) as f64, per_token));
                }
            }
            position += c.tokens;
            last_arrival = Some(c.arrival_ns);
        }
    }
    thin(points, MAX_SCATTER_POINTS)
}

/// ISL x OSL counts; `None` when no request produced output tokens (nothing to show, e.g.
/// embeddings) or there are no requests.
pub(crate) fn isl_osl_grid(reqs: &[&LlmRequest]) -> Option<HeatGrid> {
    if !reqs.iter().any(|r| r.osl > 0) {
        return None;
    }
    let (x_lo, x_width, x_bins) = bin_layout(reqs.iter().map(|r| r.isl))?;
    let (y_lo, y_width, y_bins) = bin_layout(reqs.iter().map(|r| r.osl))?;
    let mut counts = vec![vec![0u64; y_bins]; x_bins];
    for r in reqs {
        let xi = ((r.isl - x_lo) / x_width) as usize;
        let yi = ((r.osl - y_lo) / y_width) as usize;
        counts[xi][yi] += 1;
    }
    Some(HeatGrid {
        x_lo,
        x_width,
        y_lo,
        y_width,
        counts,
    })
}

/// Integer bins covering every value: (lowest value, bin width >= 1, bin count <=
/// [`MAX_HEAT_BINS`]); `None` for no values.
fn bin_layout(values: impl Iterator<Item = u64> + Clone) -> Option<(u64, u64, usize)> {
    let lo = values.clone().min()?;
    let hi = values.max()?;
    let span = hi - lo + 1;
    let width = span.div_ceil(MAX_HEAT_BINS).max(1);
    Some((lo, width, span.div_ceil(width) as usize))
}

/// Keeps every n-th point so at most `cap` remain (n = ceil(len / cap)).
fn thin(points: Vec<(f64, f64)>, cap: usize) -> Vec<(f64, f64)> {
    if points.len() <= cap {
        return points;
    }
    let stride = points.len().div_ceil(cap);
    points.into_iter().step_by(stride).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::llm::record::Chunk;

    fn req(start_ms: u64, chunks: &[(u64, u64)], isl: u64, osl: u64, model: u32) -> LlmRequest {
        LlmRequest {
            start_ns: start_ms * 1_000_000,
            end_ns: (start_ms + 100) * 1_000_000,
            isl,
            osl,
            model,
            chunks: chunks
                .iter()
                .map(|&(at_ms, tokens)| Chunk {
                    arrival_ns: at_ms * 1_000_000,
                    tokens,
                })
                .collect(),
            ..LlmRequest::default()
        }
    }

    #[test]
    fn ttft_and_latency_in_ms() {
        let r = req(10, &[(35, 1), (40, 2)], 5, 3, 0);
        assert_eq!(ttft_ms(&r), Some(25.0));
        assert_eq!(latency_ms(&r), 100.0);
        assert_eq!(ttft_ms(&req(10, &[], 5, 0, 0)), None);
    }

    #[test]
    fn groups_per_model_sorted_and_named() {
        let a = req(0, &[(30, 1)], 1, 1, 1);
        let b = req(0, &[(10, 1)], 1, 1, 1);
        let c = req(0, &[(20, 1)], 1, 1, 0);
        let embed = req(0, &[], 1, 0, 2);
        let reqs = [&a, &b, &c, &embed];
        let groups = by_model(&reqs, &["llama".to_string()], ttft_ms);
        assert_eq!(
            groups,
            vec![
                Group {
                    label: "llama".into(),
                    values: vec![20.0]
                },
                Group {
                    label: "model 1".into(),
                    values: vec![10.0, 30.0]
                },
            ]
        );
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let cases = [
            (0.0, 1.0),
            (0.5, 50.0),
            (0.99, 99.0),
            (1.0, 100.0),
            (0.255, 26.0),
        ];
        for (q, want) in cases {
            assert_eq!(quantile(&v, q), want, "q={q}");
        }
        assert_eq!(quantile(&[7.0], 0.5), 7.0);
    }

    #[test]
    fn token_gaps_spread_a_chunk_over_its_tokens() {
        // Chunk 1: tokens 1-2 (no gap); chunk 2: 10 ms for tokens 3-4; a 0-token chunk at
        // 50 ms whose time moves into chunk 3's gap: 30 ms for token 5.
        let r = req(0, &[(20, 2), (30, 2), (50, 0), (60, 1)], 4, 5, 0);
        let got = token_gaps(&[&r]);
        assert_eq!(got, vec![(3.0, 5.0), (4.0, 5.0), (5.0, 30.0)]);
        assert!(token_gaps(&[&req(0, &[(20, 3)], 4, 3, 0)]).is_empty());
    }

    #[test]
    fn ttft_vs_isl_skips_requests_without_chunks() {
        let a = req(0, &[(12, 1)], 64, 1, 0);
        let b = req(0, &[], 32, 0, 0);
        assert_eq!(ttft_vs_isl(&[&a, &b]), vec![(64.0, 12.0)]);
    }

    #[test]
    fn heat_grid_bins_cover_every_request() {
        // ISL 100..=139 (span 40 -> width 2, 20 bins); OSL all 7 (one bin).
        let reqs: Vec<LlmRequest> = (0..40).map(|i| req(0, &[(1, 7)], 100 + i, 7, 0)).collect();
        let refs: Vec<&LlmRequest> = reqs.iter().collect();
        let grid = isl_osl_grid(&refs).expect("grid");
        assert_eq!((grid.x_lo, grid.x_width, grid.x_bins()), (100, 2, 20));
        assert_eq!((grid.y_lo, grid.y_width, grid.y_bins()), (7, 1, 1));
        assert!(grid.counts.iter().all(|col| col[0] == 2));
        assert_eq!(grid.max_count(), 2);
    }

    #[test]
    fn heat_grid_needs_output_tokens() {
        let embed = req(0, &[], 16, 0, 0);
        assert_eq!(isl_osl_grid(&[&embed]), None);
        assert_eq!(isl_osl_grid(&[]), None);
    }

    #[test]
    fn bin_layout_table() {
        type Layout = (u64, u64, usize);
        let cases: [(&[u64], Layout); 4] = [
            (&[5], (5, 1, 1)),
            (&[0, 19], (0, 1, 20)),
            (&[0, 20], (0, 2, 11)),
            (&[10, 1009], (10, 50, 20)),
        ];
        for (values, want) in cases {
            assert_eq!(bin_layout(values.iter().copied()), Some(want), "{values:?}");
        }
    }

    #[test]
    fn thinning_keeps_at_most_cap_points() {
        let points: Vec<(f64, f64)> = (0..25).map(|i| (f64::from(i), 0.0)).collect();
        let kept = thin(points, 10);
        assert_eq!(kept.len(), 9);
        assert_eq!(kept[1].0, 3.0);
        let unchanged = thin(vec![(1.0, 1.0)], 10);
        assert_eq!(unchanged.len(), 1);
    }
}
