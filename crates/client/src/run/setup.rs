//! Before the load: the server and model a run targets, as its service kind's setup found
//! them (`super::kinds`, through `super::prepare`), and the statistics read from it between windows.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::coordinator::StatsSnapshot;
use crate::config::{Config, Protocol};
use crate::error::{Error, Result};
use crate::measure::server_stats::ComposingModel;
use crate::service::triton_http::{ModelConfig, ModelMetadata};
use crate::transport::tls::host_of as tls_host_of;
use crate::transport::{TlsClient, TlsOptions};
pub use client::SetupClient;

mod client;

/// The server a run targets and, where its kind has one, the model as the server describes it.
pub struct Target {
    pub addr: SocketAddr,
    /// `host:port` as given (sent as the Host header / `:authority`).
    pub host: String,
    /// The model's description (`None`: the kind's server describes none).
    pub model: Option<Model>,
    /// Blocking connection used for setup and statistics (never for load).
    pub client: SetupClient,
    /// TLS settings for every connection (`None`: plain TCP).
    pub tls: Option<TlsClient>,
}

/// A model as a Triton-style server describes it (TF Serving's signature is mapped onto the
/// same shape).
pub struct Model {
    pub meta: ModelMetadata,
    pub config: ModelConfig,
    /// The server lists the `statistics` extension.
    pub stats_available: bool,
    /// Ensemble steps or `--bls-composing-models` (empty otherwise).
    pub composing: Vec<ComposingModel>,
}

impl Target {
    /// The model's description; an error for a kind without one.
    pub fn model(&self) -> Result<&Model> {
        self.model
            .as_ref()
            .ok_or_else(|| Error::generic("the service kind's server describes no model"))
    }

    /// The model's config, where the kind has one.
    pub fn config(&self) -> Option<&ModelConfig> {
        self.model.as_ref().map(|m| &m.config)
    }

    /// The model is decoupled (answers a request with any number of responses).
    pub fn decoupled(&self) -> bool {
        self.config().is_some_and(|c| c.decoupled)
    }

    /// The server has the statistics extension for the model.
    pub fn stats_available(&self) -> bool {
        self.model.as_ref().is_some_and(|m| m.stats_available)
    }

    /// The model's composing models (empty for other kinds).
    pub fn composing(&self) -> &[ComposingModel] {
        self.model.as_ref().map_or(&[], |m| &m.composing)
    }
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

/// The server, reachable over `protocol` (and TLS) within `--ready-timeout`; nothing is asked
/// of it.
pub(super) fn reach(cfg: &Config, protocol: Protocol) -> Result<Target> {
    let host = host_of(&cfg.url).to_string();
    let addr = resolve(&host)?;
    let tls = tls_client(cfg, &host, protocol)?;
    let deadline = Instant::now() + Duration::from_secs(cfg.ready_timeout_s);
    let client = loop {
        match SetupClient::connect(&host, protocol, tls.as_ref()) {
            Ok(c) => break c,
            Err(e) if Instant::now() >= deadline || crate::signal::interrupted() => {
                return Err(Error::generic(format!("server at {host}: {}", e.msg)))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    Ok(Target {
        addr,
        host,
        model: None,
        client,
        tls,
    })
}

/// The TLS client for `--ssl-*` / `https://` settings: ALPN `h2` for gRPC, `http/1.1` for
/// HTTPS.
pub(super) fn tls_client(
    cfg: &Config,
    host: &str,
    protocol: Protocol,
) -> Result<Option<TlsClient>> {
    let Some(settings) = &cfg.tls else {
        return Ok(None);
    };
    let alpn: &[&[u8]] = match protocol {
        Protocol::Grpc => &[b"h2"],
        Protocol::Http => &[b"http/1.1"],
    };
    let opts = TlsOptions::from_config(settings, alpn);
    Ok(Some(TlsClient::new(&opts, tls_host_of(host))?))
}

/// Reads the model's cumulative statistics (every model's too, when composing models are
/// reported); `None` when the server has no statistics.
pub fn fetch_stats(target: &mut Target, cfg: &Config) -> Result<Option<StatsSnapshot>> {
    if !target.stats_available() {
        return Ok(None);
    }
    let composing = !target.composing().is_empty();
    let all = if !composing {
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
    let all = if !composing { Vec::new() } else { all };
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
