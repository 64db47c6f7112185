//! Datasets from local files and trace replay for `profile` (AIPerf's `--custom-dataset-type`,
//! `--dataset-sampling-strategy` and fixed-schedule flags, vllm bench's `--dataset-name
//! sharegpt --dataset-path FILE`). Nothing is ever downloaded: the user names the file.
//!
//! [`prepare`] turns the file (or the synthetic prompts) into the run's request entries in
//! send order, and returns the run's settings with what the engine needs to replay a trace
//! on its timestamps ([`DatasetArgs::engine_load`]); the runner sends entry i as step i.

pub mod blocks;
pub mod conversation_timing;
pub mod conversations;
pub mod formats;
pub mod replay;
pub mod synthetic_conversations;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::cli::{LoadPoint, ProfileConfig};
use super::payload::{splitmix, Entry};
use crate::engine::pace::Schedule;
use crate::engine::Load;
use crate::error::{Error, Result};
use crate::inputs::prompts::PromptGen;
use crate::inputs::tokenizer::Tokenizer;
pub use conversations::count_history;
use conversations::{conversation_plan, conversations_of, ConversationPlan, Timing};

/// Conversations under way at once at most, at a rate without `--concurrency`.
pub const MAX_RATE_SLOTS: u64 = 256;
use formats::{Format, Prompt, Record};
use replay::ReplayOptions;

/// How entries are drawn from the dataset for the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sampling {
    /// In file order, wrapping at the end.
    Sequential,
    /// File order (the same as `sequential`; GenAI-Perf's name).
    #[value(name = "round-robin", alias = "round_robin")]
    RoundRobin,
    /// Seeded draws with replacement.
    Random,
    /// A seeded permutation, reshuffled after each pass.
    Shuffle,
}

/// Dataset and trace-replay flags of `profile`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DatasetArgs {
    /// Format of `--input-file`: single_turn, multi_turn, random_pool (a file or a directory
    /// of files, one pool each), mooncake_trace, or sharegpt (a local ShareGPT JSON file).
    #[arg(long, value_enum, value_name = "TYPE")]
    pub custom_dataset_type: Option<Format>,
    /// vllm bench's spelling: the dataset format (with --dataset-path).
    #[arg(long, value_enum, value_name = "NAME")]
    pub dataset_name: Option<Format>,
    /// vllm bench's spelling: the dataset file (with --dataset-name).
    #[arg(long, value_name = "FILE")]
    pub dataset_path: Option<PathBuf>,
    /// How requests draw dataset entries: sequential (default), round-robin, random,
    /// shuffle; seeded by --random-seed.
    #[arg(long, value_enum, value_name = "STRATEGY")]
    pub dataset_sampling_strategy: Option<Sampling>,
    /// Send each entry at its `timestamp` (open loop). On by default for a mooncake trace
    /// with timestamps when no --concurrency or --request-rate is given.
    #[arg(long)]
    pub fixed_schedule: bool,
    /// Do not replay a trace's timestamps (closed loop at --concurrency, or --request-rate).
    #[arg(long, conflicts_with = "fixed_schedule")]
    pub no_fixed_schedule: bool,
    /// Shift the schedule so that the first kept timestamp is sent at once.
    #[arg(long, conflicts_with = "fixed_schedule_start_offset")]
    pub fixed_schedule_auto_offset: bool,
    /// Skip entries before this trace time (ms, inclusive); it becomes the schedule's zero.
    #[arg(long, value_name = "MS")]
    pub fixed_schedule_start_offset: Option<u64>,
    /// Skip entries after this trace time (ms, inclusive).
    #[arg(long, value_name = "MS")]
    pub fixed_schedule_end_offset: Option<u64>,
    /// Replay this many times faster than the trace (2: twice as fast).
    #[arg(long, visible_alias = "replay-speedup", value_name = "FACTOR")]
    pub fixed_schedule_speedup: Option<f64>,
    /// Tokens per mooncake `hash_ids` block.
    #[arg(long, aliases = ["prompt-input-tokens-block-size", "synthetic-input-tokens-block-size"], default_value_t = 512, value_name = "TOKENS")]
    pub isl_block_size: u64,
    /// GenAI-Perf's: multiplies the `delay` of every session turn of `--input-file
    /// payload:FILE` (0.5: half the pauses).
    #[arg(long, value_name = "RATIO")]
    pub session_delay_ratio: Option<f64>,
    /// GenAI-Perf's `--input-file synthetic:NAMES`: the names of the synthetic files
    /// (set from `--input-file`, not a flag).
    #[arg(skip)]
    pub synthetic_files: Vec<String>,
    #[command(flatten)]
    pub turns: synthetic_conversations::TurnArgs,
    /// The prepared replay (set by [`prepare`], not a flag).
    #[arg(skip)]
    pub plan: Option<Arc<Plan>>,
}

/// What a prepared dataset asks of the engine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Send offsets (ns) of entry i, ascending: a fixed-schedule replay.
    pub fixed_ns: Option<Vec<u64>>,
    /// Multi-turn conversations, run on the engine's session turns.
    pub conversations: Option<Arc<ConversationPlan>>,
}

impl DatasetArgs {
    /// The engine load of a trace replay or of conversations at `point`; `None`: the
    /// runner's own mapping of the point. `rate` is a rate point's arrival schedule.
    /// Conversations at a rate run on `max_inflight` slots (`--concurrency` beside the rate),
    /// else on one slot per conversation up to [`MAX_RATE_SLOTS`]; user-centric ones on two
    /// per user, at most the users or [`MAX_RATE_SLOTS`], whichever is more.
    pub fn engine_load(
        &self,
        point: LoadPoint,
        max_inflight: Option<u64>,
        rate: Option<&Schedule>,
    ) -> Option<Load> {
        let plan = self.plan.as_ref()?;
        if let Some(conv) = &plan.conversations {
            let (slots, timing) = match (point, conv.user_centric, rate) {
                (LoadPoint::Concurrency(slots), ..) => (slots, Timing::Closed),
                (LoadPoint::RequestRate(_), Some(u), _) => {
                    let slots = (u.users * 2).min(u.users.max(MAX_RATE_SLOTS));
                    (slots, Timing::Users(u))
                }
                (LoadPoint::RequestRate(_), None, Some(schedule)) => (
                    conv.conversations.len() as u64,
                    Timing::Rate(schedule.clone()),
                ),
                (LoadPoint::RequestRate(_), None, None) => return None,
            };
            let slots = match (&timing, max_inflight) {
                (Timing::Closed | Timing::Users(_), None) => slots,
                (_, Some(cap)) => cap,
                (Timing::Rate(_), None) => slots.clamp(1, MAX_RATE_SLOTS),
            };
            return Some(Load::Sessions {
                slots,
                turns: conv.timed(timing),
            });
        }
        Some(Load::Paced {
            schedule: Schedule::Fixed(plan.fixed_ns.clone()?),
            max_inflight,
        })
    }

    /// A replay is running: the schedule lag is reported.
    pub fn replaying(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| p.fixed_ns.is_some())
    }

    /// The dataset file, its format and the flag that named it.
    fn source<'a>(
        &'a self,
        input_file: &'a Option<PathBuf>,
    ) -> Result<Option<(Format, &'a Path, &'static str)>> {
        match (
            self.custom_dataset_type,
            self.dataset_name,
            input_file,
            &self.dataset_path,
        ) {
            (Some(_), Some(_), _, _) => Err(Error::usage(
                "profile: give --custom-dataset-type or --dataset-name, not both",
            )),
            (Some(f), None, Some(p), None) => Ok(Some((f, p.as_path(), "--input-file"))),
            (Some(_), None, _, _) => Err(Error::usage(
                "profile: --custom-dataset-type needs --input-file FILE (and no --dataset-path)",
            )),
            (None, Some(f), None, Some(p)) => Ok(Some((f, p.as_path(), "--dataset-path"))),
            (None, Some(_), _, _) => Err(Error::usage(
                "profile: --dataset-name needs --dataset-path FILE (and no --input-file)",
            )),
            (None, None, _, Some(_)) => Err(Error::usage(
                "profile: --dataset-path needs --dataset-name (e.g. sharegpt)",
            )),
            (None, None, _, None) => Ok(None),
        }
    }

    fn replay_options(&self) -> Result<ReplayOptions> {
        let speedup = self.fixed_schedule_speedup.unwrap_or(1.0);
        if !(speedup.is_finite() && speedup > 0.0 && speedup <= 1e6) {
            return Err(Error::usage(format!(
                "profile: --fixed-schedule-speedup must be a number above 0 (got {speedup})"
            )));
        }
        if let (Some(s), Some(e)) = (
            self.fixed_schedule_start_offset,
            self.fixed_schedule_end_offset,
        ) {
            if s > e {
                return Err(Error::usage(format!(
                    "profile: --fixed-schedule-start-offset ({s}) is after \
                     --fixed-schedule-end-offset ({e})"
                )));
            }
        }
        Ok(ReplayOptions {
            auto_offset: self.fixed_schedule_auto_offset,
            start_ms: self.fixed_schedule_start_offset,
            end_ms: self.fixed_schedule_end_offset,
            speedup,
        })
    }

    /// Replay flags given without a replay.
    fn replay_flag(&self) -> Option<&'static str> {
        [
            (
                self.fixed_schedule_auto_offset,
                "--fixed-schedule-auto-offset",
            ),
            (
                self.fixed_schedule_start_offset.is_some(),
                "--fixed-schedule-start-offset",
            ),
            (
                self.fixed_schedule_end_offset.is_some(),
                "--fixed-schedule-end-offset",
            ),
            (
                self.fixed_schedule_speedup.is_some(),
                "--fixed-schedule-speedup",
            ),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }
}

/// Reads `path` in `format`; a `random_pool` directory is read file by file (sorted), one
/// pool per file. Errors name the flag, the file, the line and the field.
pub fn read(format: Format, path: &Path, flag: &str) -> Result<Vec<Vec<Record>>> {
    if format == Format::RandomPool && path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| Error::usage(format!("{flag} {}: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(Error::usage(format!(
                "{flag} {}: the directory holds no files",
                path.display()
            )));
        }
        return files.iter().map(|f| read_file(format, f, flag)).collect();
    }
    Ok(vec![read_file(format, path, flag)?])
}

fn read_file(format: Format, path: &Path, flag: &str) -> Result<Vec<Record>> {
    formats::read(format, path).map_err(|(line, msg)| {
        let at = if line > 0 {
            format!(" line {line}")
        } else {
            String::new()
        };
        Error::usage(format!("{flag} {}{at}: {msg}", path.display()))
    })
}

/// The run's entries, in the order the requests send them, and the run's settings with the
/// replay plan. `synthetic` makes the entries when no dataset file is given.
pub fn prepare(
    cfg: &ProfileConfig,
    tok: &Tokenizer,
    synthetic: fn(&ProfileConfig, &Tokenizer) -> Result<Vec<Entry>>,
) -> Result<(Vec<Entry>, ProfileConfig)> {
    let (entries, out) = prepare_entries(cfg, tok, synthetic)?;
    let conversations = out
        .args
        .dataset
        .plan
        .as_ref()
        .and_then(|p| p.conversations.as_ref());
    if cfg.args.user_centric_rate.is_some() && conversations.is_none() {
        return Err(Error::usage(
            "profile: --user-centric-rate runs multi-turn conversations: give \
             --session-turns-mean 2 or more, or a multi_turn dataset",
        ));
    }
    Ok((entries, out))
}

fn prepare_entries(
    cfg: &ProfileConfig,
    tok: &Tokenizer,
    synthetic: fn(&ProfileConfig, &Tokenizer) -> Result<Vec<Entry>>,
) -> Result<(Vec<Entry>, ProfileConfig)> {
    let d = &cfg.args.dataset;
    let mut out = cfg.clone();
    let payload_file = d.custom_dataset_type == Some(Format::Payload);
    if d.session_delay_ratio.is_some() && !payload_file {
        return Err(Error::usage(
            "profile: --session-delay-ratio scales the delays of --input-file payload:FILE",
        ));
    }
    let Some((format, path, flag)) = d.source(&cfg.args.input_file)? else {
        if d.fixed_schedule {
            return Err(Error::usage(
                "profile: --fixed-schedule needs a trace: --input-file FILE with \
                 --custom-dataset-type mooncake_trace or single_turn (entries with 'timestamp')",
            ));
        }
        if let Some(f) = d.replay_flag() {
            return Err(Error::usage(format!(
                "profile: {f} applies to --fixed-schedule"
            )));
        }
        if let (Some(f), false) = (d.turns.first_given(), d.synthetic_files.is_empty()) {
            return Err(Error::usage(format!(
                "profile: {f} shapes synthetic conversations; GenAI-Perf's --input-file \
                 synthetic:NAMES makes single requests here"
            )));
        }
        if let Some((entries, convs)) = synthetic_conversations::build(cfg, tok, synthetic)? {
            return with_conversations(cfg, entries, convs, out);
        }
        let entries = sample(synthetic(cfg, tok)?, cfg);
        return Ok((entries, out));
    };
    if let Some(turn_flag) = d.turns.first_given() {
        return Err(Error::usage(format!(
            "profile: {turn_flag} shapes synthetic conversations; with {flag} the turns and \
             their pauses come from the file"
        )));
    }
    if matches!(format, Format::RandomPool | Format::ShareGpt) {
        if let Some(f) = d
            .fixed_schedule
            .then_some("--fixed-schedule")
            .or(d.replay_flag())
        {
            return Err(Error::usage(format!(
                "profile: {f} needs entries with timestamps, which {} datasets do not have",
                name_of(format)
            )));
        }
    }
    let pools = read(format, path, flag)?;
    let mut gen = PromptGen::new(tok.clone(), cfg.args.random_seed);
    if format == Format::RandomPool {
        let records = pool_draws(&pools, cfg);
        let entries = entries_of(&records, cfg, tok, &mut gen)?;
        return Ok((sample(entries, cfg), out));
    }
    let mut records = pools.into_iter().next().unwrap_or_default();
    if let Some(ratio) = d.session_delay_ratio {
        if !(ratio.is_finite() && (0.0..=1e6).contains(&ratio)) {
            return Err(Error::usage(format!(
                "profile: --session-delay-ratio must be a number from 0 to 1000000 (got {ratio})"
            )));
        }
        for r in &mut records {
            // Whole milliseconds, as GenAI-Perf truncates the scaled delay.
            r.delay_ms = r.delay_ms.map(|d| (d * ratio).floor());
        }
    }
    if let Some(convs) = conversations_of(&records, format) {
        let mut entries = entries_of(&records, cfg, tok, &mut gen)?;
        with_extras(cfg, &records, &mut entries, (path, flag))?;
        return with_conversations(cfg, entries, convs, out);
    }
    if !replays(cfg, format, &records) {
        if let Some(f) = d.replay_flag() {
            return Err(Error::usage(format!(
                "profile: {f} applies to --fixed-schedule"
            )));
        }
        let mut entries = entries_of(&records, cfg, tok, &mut gen)?;
        with_extras(cfg, &records, &mut entries, (path, flag))?;
        if matches!(format, Format::MooncakeTrace | Format::Payload)
            && cfg.args.request_count.is_none()
            && cfg.args.benchmark_duration.is_none()
        {
            // A trace sends each of its entries once, in order (as AIPerf does).
            out.args.request_count = Some(entries.len() as u64);
        }
        return Ok((sample(entries, cfg), out));
    }
    let source = (path, flag);
    fixed_schedule(cfg, &records, source, tok, &mut gen, out)
}

/// The entries of `conversations` and the settings that run them (the request count is
/// their turns).
fn with_conversations(
    cfg: &ProfileConfig,
    entries: Vec<Entry>,
    conversations: Vec<conversations::Conversation>,
    mut out: ProfileConfig,
) -> Result<(Vec<Entry>, ProfileConfig)> {
    let plan = conversation_plan(cfg, &entries, conversations)?;
    out.args.request_count = Some(plan.turns);
    out.args.dataset.plan = Some(Arc::new(Plan {
        conversations: Some(Arc::new(plan)),
        ..Plan::default()
    }));
    Ok((entries, out))
}

/// A trace replayed on its timestamps: the entries in send order, and the settings with the
/// schedule (one open-loop level, the request count, the offsets).
fn fixed_schedule(
    cfg: &ProfileConfig,
    records: &[Record],
    (path, flag): (&Path, &str),
    tok: &Tokenizer,
    gen: &mut PromptGen,
    mut out: ProfileConfig,
) -> Result<(Vec<Entry>, ProfileConfig)> {
    let d = &cfg.args.dataset;
    let a = &cfg.args;
    if !a.concurrency.is_empty() || !a.request_rate.is_empty() {
        return Err(Error::usage(
            "profile: --fixed-schedule sends on the trace's timestamps; drop --concurrency / \
             --request-rate (or give --no-fixed-schedule for a closed or open loop)",
        ));
    }
    if a.warmup_request_count > 0 {
        return Err(Error::usage(
            "profile: --warmup-request-count is not supported with --fixed-schedule",
        ));
    }
    let mut stamps = Vec::with_capacity(records.len());
    for r in records {
        stamps.push(r.timestamp_ms.ok_or_else(|| {
            Error::usage(format!(
                "{flag} {} line {}: --fixed-schedule needs field 'timestamp' on every entry",
                path.display(),
                r.line
            ))
        })?);
    }
    let (order, mut offsets) = replay::schedule(&stamps, &d.replay_options()?);
    for o in &mut offsets {
        *o += replay::LEAD_NS;
    }
    if order.is_empty() {
        return Err(Error::usage(format!(
            "{flag} {}: no entry lies between the fixed-schedule offsets",
            path.display()
        )));
    }
    let kept: Vec<Record> = order.iter().map(|&i| records[i].clone()).collect();
    let mut entries = entries_of(&kept, cfg, tok, gen)?;
    with_extras(cfg, &kept, &mut entries, (path, flag))?;
    let span_s = (offsets.last().copied().unwrap_or(0) - offsets[0]) as f64 / 1e9;
    let rate = if span_s > 0.0 {
        entries.len() as f64 / span_s
    } else {
        0.0
    };
    out.points = vec![LoadPoint::RequestRate((rate * 1000.0).round() / 1000.0)];
    let n = entries.len() as u64;
    out.args.request_count = Some(a.request_count.map_or(n, |c| c.min(n)));
    out.args.dataset.plan = Some(Arc::new(Plan {
        fixed_ns: Some(offsets),
        ..Plan::default()
    }));
    Ok((entries, out))
}

/// Whether the trace is replayed on its timestamps: `--fixed-schedule`, or a mooncake trace
/// or payload file with timestamps and no load flag (AIPerf turns the mode on for such
/// traces; GenAI-Perf sends a payload file on its timestamps when no load flag is given).
fn replays(cfg: &ProfileConfig, format: Format, records: &[Record]) -> bool {
    let d = &cfg.args.dataset;
    if d.fixed_schedule {
        return true;
    }
    let a = &cfg.args;
    !d.no_fixed_schedule
        && matches!(format, Format::MooncakeTrace | Format::Payload)
        && a.concurrency.is_empty()
        && a.request_rate.is_empty()
        && records.first().is_some_and(|r| r.timestamp_ms.is_some())
}

/// `random_pool`: `--num-prompts` entries, each one seeded draw from every pool (file),
/// their texts joined with spaces in file-name order.
fn pool_draws(pools: &[Vec<Record>], cfg: &ProfileConfig) -> Vec<Record> {
    let mut state = cfg.args.random_seed ^ 0x706f_6f6c;
    (0..cfg.args.num_prompts)
        .map(|i| {
            let texts: Vec<String> = pools
                .iter()
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let r = &p[(splitmix(&mut state) % p.len() as u64) as usize];
                    match &r.prompt {
                        Prompt::Text(t) => t.clone(),
                        _ => String::new(),
                    }
                })
                .collect();
            let mut r = pools[0][0].clone();
            r.prompt = Prompt::Text(texts.join(" "));
            r.line = i as usize;
            r
        })
        .collect()
}

/// Request entries of `records`: texts counted by the client tokenizer, synthetic trace
/// prompts built from their hash-id blocks, and the OSL from the record, the ShareGPT
/// reference reply (unless --output-tokens-mean is given) or --output-tokens-mean.
fn entries_of(
    records: &[Record],
    cfg: &ProfileConfig,
    tok: &Tokenizer,
    gen: &mut PromptGen,
) -> Result<Vec<Entry>> {
    let block = usize::try_from(cfg.args.dataset.isl_block_size)
        .ok()
        .filter(|b| (1..=1_000_000).contains(b))
        .ok_or_else(|| Error::usage("profile: --isl-block-size must be from 1 to 1000000"))?;
    let mut blocks: Option<blocks::Blocks> = None;
    let mut mismatches = 0usize;
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let osl = match (&r.reference, r.osl) {
            (_, Some(n)) => Some(n),
            (Some(reply), None) if cfg.args.output_tokens_mean.is_none() => {
                Some((tok.count(reply) as u64).max(1))
            }
            _ => super::requested_osl(cfg, gen),
        };
        let entry = match &r.prompt {
            Prompt::Text(t) => Entry {
                text: t.clone(),
                isl: tok.count(t) as u64,
                osl,
                payload: None,
            },
            Prompt::Payload(p) => Entry {
                text: String::new(),
                isl: 0,
                osl,
                payload: Some(p.clone()),
            },
            Prompt::Synthetic {
                input_length,
                hash_ids,
            } => {
                let b = blocks.get_or_insert_with(|| {
                    blocks::Blocks::new(tok.clone(), block, cfg.args.random_seed)
                });
                let p = b.prompt(*input_length as usize, hash_ids, r.line as u64);
                mismatches += usize::from(p.mismatch);
                Entry {
                    text: p.text,
                    isl: p.tokens as u64,
                    osl,
                    payload: None,
                }
            }
            Prompt::Sampled { hash_ids } => {
                let a = &cfg.args;
                let p = if hash_ids.is_empty() {
                    let len = gen.sample_len(
                        a.synthetic_input_tokens_mean as f64,
                        a.synthetic_input_tokens_stddev,
                    );
                    let p = gen.prompt(len);
                    blocks::BlockPrompt {
                        text: p.text,
                        tokens: p.tokens,
                        mismatch: p.mismatch,
                    }
                } else {
                    let b = blocks.get_or_insert_with(|| {
                        blocks::Blocks::new(tok.clone(), block, a.random_seed)
                    });
                    let len = a.synthetic_input_tokens_mean.max(1) as usize;
                    b.prompt(len, hash_ids, r.line as u64)
                };
                mismatches += usize::from(p.mismatch);
                Entry {
                    text: p.text,
                    isl: p.tokens as u64,
                    osl,
                    payload: None,
                }
            }
        };
        out.push(entry);
    }
    if mismatches > 0 {
        eprintln!(
            "warning: {mismatches} of {} trace prompts could not be made exactly their \
             input_length; their true length is used as ISL",
            records.len()
        );
    }
    Ok(out)
}

/// Payload-file lines with fields GenAI-Perf puts into the body as they are: their entries
/// carry the whole body, built as for any entry (to the model the request order gives it)
/// with those fields added last, so they override `--extra-inputs` as in GenAI-Perf.
fn with_extras(
    cfg: &ProfileConfig,
    records: &[Record],
    entries: &mut [Entry],
    (path, flag): (&Path, &str),
) -> Result<()> {
    let Some(first) = records.iter().find(|r| !r.extra.is_empty()) else {
        return Ok(());
    };
    if !cfg.endpoint_type.service().sends_json() {
        let field = first.extra.keys().next().map_or("", String::as_str);
        return Err(Error::usage(format!(
            "{flag} {} line {}: field '{field}' would go into a JSON request body, which \
             --endpoint-type {} does not send",
            path.display(),
            first.line,
            cfg.endpoint_type.name()
        )));
    }
    let models = super::payload::pick_models(cfg, entries.len());
    for (i, (r, e)) in records.iter().zip(entries.iter_mut()).enumerate() {
        if r.extra.is_empty() {
            continue;
        }
        let model = &cfg.models[models[i] as usize];
        let mut body = super::payload::body(cfg, model, e);
        if let Some(obj) = body.as_object_mut() {
            for (k, v) in &r.extra {
                obj.insert(k.clone(), v.clone());
            }
        }
        e.payload = Some(body);
    }
    Ok(())
}

/// Most entries a sampled order holds (each is a pre-encoded request).
const MAX_SAMPLED: usize = 1 << 20;

/// The entries in `--dataset-sampling-strategy` order, long enough for the requests the run
/// sends (the engine wraps around it).
fn sample(entries: Vec<Entry>, cfg: &ProfileConfig) -> Vec<Entry> {
    let strategy = cfg.args.dataset.dataset_sampling_strategy;
    let n = entries.len();
    if n == 0 {
        return entries;
    }
    let wanted = cfg
        .args
        .request_count
        .unwrap_or(super::runner::DEFAULT_REQUEST_COUNT)
        .saturating_add(cfg.args.warmup_request_count)
        .min(MAX_SAMPLED as u64) as usize;
    let order = order(strategy, n, wanted.max(n), cfg.args.random_seed);
    match order {
        None => entries,
        Some(order) => order.into_iter().map(|i| entries[i].clone()).collect(),
    }
}

/// Indices for `len` requests over `n` entries; `None`: file order.
fn order(strategy: Option<Sampling>, n: usize, len: usize, seed: u64) -> Option<Vec<usize>> {
    let mut state = seed ^ 0x7361_6d70_6c65;
    match strategy {
        None | Some(Sampling::Sequential) | Some(Sampling::RoundRobin) => None,
        Some(Sampling::Random) => Some(
            (0..len)
                .map(|_| (splitmix(&mut state) % n as u64) as usize)
                .collect(),
        ),
        Some(Sampling::Shuffle) => {
            let mut out = Vec::with_capacity(len);
            let mut perm: Vec<usize> = (0..n).collect();
            while out.len() < len {
                for i in (1..n).rev() {
                    let j = (splitmix(&mut state) % (i as u64 + 1)) as usize;
                    perm.swap(i, j);
                }
                out.extend_from_slice(&perm);
            }
            out.truncate(len.div_ceil(n) * n);
            Some(out)
        }
    }
}

/// The format's flag value (`mooncake_trace`).
fn name_of(format: Format) -> String {
    use clap::ValueEnum;
    if format == Format::Payload {
        return "payload".into();
    }
    format
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

/// The dataset settings for the summary JSON's `input_config`.
pub fn config_json(d: &DatasetArgs) -> serde_json::Value {
    use clap::ValueEnum;
    let name = |v: Option<clap::builder::PossibleValue>| v.map(|v| v.get_name().to_string());
    serde_json::json!({
        "custom_dataset_type": d.custom_dataset_type.or(d.dataset_name).map(name_of),
        "dataset_path": d.dataset_path,
        "dataset_sampling_strategy": name(d.dataset_sampling_strategy.and_then(|s| s.to_possible_value())),
        "fixed_schedule": d.replaying(),
        "fixed_schedule_auto_offset": d.fixed_schedule_auto_offset,
        "fixed_schedule_start_offset": d.fixed_schedule_start_offset,
        "fixed_schedule_end_offset": d.fixed_schedule_end_offset,
        "fixed_schedule_speedup": d.fixed_schedule_speedup.unwrap_or(1.0),
        "isl_block_size": d.isl_block_size,
        "conversations": d.plan.as_ref().and_then(|p| p.conversations.as_ref()).map(|c| c.conversations.len()),
    })
}

/// The console line of a replay's schedule lag ("" when the run is no replay).
pub fn lag_line(cfg: &ProfileConfig, records: &[crate::measure::RequestRecord]) -> String {
    match replay::lag(records) {
        Some(lag) if cfg.args.dataset.replaying() => lag.line(),
        _ => String::new(),
    }
}

/// The summary JSON with a replay's `replay_sched_lag_*` metrics.
pub fn with_lag(
    cfg: &ProfileConfig,
    records: &[crate::measure::RequestRecord],
    json: String,
) -> String {
    match replay::lag(records) {
        Some(lag) if cfg.args.dataset.replaying() => lag.add_to_json(&json),
        _ => json,
    }
}

/// Fuzz entry for the dataset readers: any bytes, in every format, give records or an
/// error, never a panic.
pub fn fuzz_datasets(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for format in [
        Format::ShareGpt,
        Format::SingleTurn,
        Format::MultiTurn,
        Format::RandomPool,
        Format::MooncakeTrace,
        Format::Payload,
    ] {
        if let Ok(records) = formats::parse(format, &text) {
            let stamps: Vec<f64> = records.iter().filter_map(|r| r.timestamp_ms).collect();
            let opts = ReplayOptions {
                auto_offset: true,
                start_ms: None,
                end_ms: None,
                speedup: 3.0,
            };
            let _ = replay::schedule(&stamps, &opts);
        }
    }
}

#[cfg(test)]
#[path = "dataset_tests.rs"]
mod tests;
