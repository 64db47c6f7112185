//! Before the load: find the server, wait until it is ready, read the model's metadata and
//! config, and decide whether server statistics are available.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::coordinator::StatsSnapshot;
use crate::config::{Config, Protocol};
use crate::error::{Error, Result};
use crate::measure::server_stats::{bls_composing_models, composing_tree, ComposingModel};
use crate::service::triton_http::{ModelConfig, ModelMetadata};
use crate::transport::tls::host_of as tls_host_of;
use crate::transport::{TlsClient, TlsOptions};
pub use client::SetupClient;

#[path = "setup_client.rs"]
mod client;

/// The server and model a run targets.
pub struct Target {
    pub addr: SocketAddr,
    /// `host:port` as given (sent as the Host header / `:authority`).
    pub host: String,
    pub meta: ModelMetadata,
    pub config: ModelConfig,
    /// The server lists the `statistics` extension.
    pub stats_available: bool,
    /// Blocking connection used for setup and statistics (never for load).
    pub client: SetupClient,
    /// TLS settings for every connection (`None`: plain TCP).
    pub tls: Option<TlsClient>,
    /// Ensemble steps or `--bls-composing-models` (empty otherwise).
    pub composing: Vec<ComposingModel>,
}

/// `-u` without a scheme.
pub fn host_of(url: &str) -> &str {
    let u = url.strip_prefix("http://").unwrap_or(url);
    u.trim_end_matches('/')
}

pub fn resolve(host: &str) -> Result<SocketAddr> {
    let with_port = if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| Error::generic(format!("-u {host}: cannot resolve address: {e}")))?
        .next()
        .ok_or_else(|| Error::generic(format!("-u {host}: address resolves to nothing")))
}

/// Connects, waits until the server is ready, and reads what the run needs from it.
pub fn prepare(cfg: &Config) -> Result<Target> {
    let host = host_of(&cfg.url).to_string();
    let addr = resolve(&host)?;
    let tls = tls_client(cfg, &host)?;
    let mut client = wait_ready(&host, cfg, tls.as_ref())?;
    if !cfg.trace_settings.is_empty() {
        client.trace_setting(&cfg.trace_settings)?;
    }
    let stats_available = client
        .server_extensions()
        .is_ok_and(|ext| ext.iter().any(|e| e == "statistics"));
    let meta = client.model_metadata(cfg)?;
    let config = client.model_config(cfg)?;
    check_supported(cfg, &config)?;
    let composing = composing_models(cfg, &config, &mut client)?;
    Ok(Target {
        addr,
        host,
        meta,
        config,
        stats_available,
        client,
        tls,
        composing,
    })
}

/// The composing models the Server section reports: an ensemble's steps (recursively), or
/// the `--bls-composing-models` list.
fn composing_models(
    cfg: &Config,
    config: &ModelConfig,
    client: &mut SetupClient,
) -> Result<Vec<ComposingModel>> {
    if let Some(spec) = &cfg.bls_composing_models {
        return bls_composing_models(spec);
    }
    if !config.is_ensemble {
        return Ok(Vec::new());
    }
    composing_tree(&cfg.model_name, &mut |name, version| {
        client.model_config_json(name, version)
    })
}

/// The TLS client for `--ssl-*` / `https://` settings: ALPN `h2` for gRPC, `http/1.1` for
/// HTTPS.
pub(super) fn tls_client(cfg: &Config, host: &str) -> Result<Option<TlsClient>> {
    let Some(settings) = &cfg.tls else {
        return Ok(None);
    };
    let alpn: &[&[u8]] = match cfg.protocol {
        Protocol::Grpc => &[b"h2"],
        Protocol::Http => &[b"http/1.1"],
    };
    let opts = TlsOptions::from_config(settings, alpn);
    Ok(Some(TlsClient::new(&opts, tls_host_of(host))?))
}

fn check_supported(cfg: &Config, config: &ModelConfig) -> Result<()> {
    if config.decoupled && !(cfg.protocol == Protocol::Grpc && cfg.streaming) {
        return Err(Error::usage(format!(
            "model '{}' is decoupled: it must be run with -i grpc --async --streaming",
            cfg.model_name
        )));
    }
    if config.sequence_batching && cfg.batch_size > 1 {
        return Err(Error::usage(format!(
            "-b {}: model '{}' is a sequence model, which takes batch size 1 only",
            cfg.batch_size, cfg.model_name
        )));
    }
    Ok(())
}

/// Polls the server's readiness until it says ready or `--ready-timeout` passes (one try
/// when 0).
fn wait_ready(host: &str, cfg: &Config, tls: Option<&TlsClient>) -> Result<SetupClient> {
    let timeout_s = cfg.ready_timeout_s;
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
        let last = match SetupClient::connect(host, cfg, tls) {
            Ok(mut c) => match c.ready() {
                Ok(()) => return Ok(c),
                Err(e) => e.msg,
            },
            Err(e) => e.msg,
        };
        if Instant::now() >= deadline {
            let waited = if timeout_s > 0 {
                format!(" (waited {timeout_s} s)")
            } else {
                String::new()
            };
            return Err(Error::generic(format!("{last}{waited}")));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reads the model's cumulative statistics (every model's too, when composing models are
/// reported); `None` when the server has no statistics.
pub fn fetch_stats(target: &mut Target, cfg: &Config) -> Result<Option<StatsSnapshot>> {
    if !target.stats_available {
        return Ok(None);
    }
    let all = if target.composing.is_empty() {
        target.client.model_stats(cfg)?
    } else {
        target.client.all_model_stats()?
    };
    // Without a version the server reports every loaded version: add them up.
    let v = &cfg.model_version;
    let mut mine = all
        .iter()
        .filter(|m| m.name == cfg.model_name && (v.is_empty() || &m.version == v));
    let Some(first) = mine.next() else {
        return Ok(None);
    };
    let mut model = first.clone();
    mine.for_each(|m| model.add(m));
    let all = if target.composing.is_empty() {
        Vec::new()
    } else {
        all
    };
    Ok(Some(StatsSnapshot { model, all }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_addresses() {
        assert_eq!(host_of("http://127.0.0.1:8000/"), "127.0.0.1:8000");
        assert_eq!(host_of("localhost:8000"), "localhost:8000");
        assert_eq!(resolve("127.0.0.1:9").unwrap().port(), 9);
        assert!(resolve("no-such-host.invalid:1").is_err());
    }
}
