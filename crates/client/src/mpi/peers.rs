//! The MPI job as the level coordinator's [`Peers`]: each agreement is a collective, and the
//! time spent in a window's agreements is added to that window's coordination overhead.

use std::time::Instant;

use super::coord::MpiCoord;
use crate::config::Config;
use crate::error::Result;
use crate::measure::{WindowRecords, WindowStats};
use crate::run::coordinator::PointStatus;
use crate::run::peers::Peers;

impl Peers for MpiCoord {
    fn share(&self, total: u64) -> u64 {
        MpiCoord::share(self, total)
    }
    fn share_rate(&self, total: f64) -> f64 {
        MpiCoord::share_rate(self, total)
    }
    fn scale_out(&self) -> bool {
        MpiCoord::scale_out(self)
    }
    fn reports(&self) -> bool {
        MpiCoord::reports(self)
    }
    fn local_config(&self, cfg: &Config) -> Option<Config> {
        self.scale_out().then(|| super::rank_config(cfg, self))
    }
    fn start_level(&mut self) -> Result<()> {
        self.barrier("barrier before the level")
    }
    fn end_window(&mut self) -> Result<()> {
        let since = Instant::now();
        let res = self.barrier("barrier at the window's end");
        self.add_overhead(since);
        res
    }
    fn merge_window(
        &mut self,
        stats: &mut WindowStats,
        records: &mut Option<WindowRecords>,
    ) -> Result<()> {
        let since = Instant::now();
        let res = MpiCoord::merge_window(self, stats, records);
        self.add_overhead(since);
        res
    }
    fn agree(&mut self, local: Option<PointStatus>) -> Option<PointStatus> {
        let since = Instant::now();
        let status = self.decide(local);
        self.note_overhead(since);
        status
    }
}
