//! Turning request records into perf_analyzer's statistics: per-window numbers, the stability
//! rule, merging the last windows of a point, and server-side statistics deltas.

pub mod dist;
pub use inferperf_wire::fail;
pub mod http_trace;
pub mod llm;
pub mod metrics;
pub mod record;
pub mod schedule;
pub mod server_stats;
pub mod stability;
pub mod stats;

pub use dist::Dist;
pub use fail::{FailKind, FailTally};
pub use http_trace::HttpTrace;
pub use record::{RequestRecord, RxTime, WindowRecords};
pub use server_stats::{ModelStats, ServerStats, StatDuration};
pub use stability::Trial;
pub use stats::{ClientStats, WindowStats};
