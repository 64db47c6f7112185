//! Before the load: find the server, wait until it is ready, read the model's metadata and
//! config, and decide whether server statistics are available.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::measure::server_stats::parse_stats;
use crate::measure::ModelStats;
use crate::protocol::http1::blocking::BlockingClient;
use crate::service::triton_http::{
    config_path, error_message, metadata_path, parse_model_config, parse_model_metadata,
    parse_server_metadata, stats_path, ModelConfig, ModelMetadata,
};

/// The server and model a run targets.
pub struct Target {
    pub addr: SocketAddr,
    /// `host:port` as given (sent as the Host header).
    pub host: String,
    pub meta: ModelMetadata,
    pub config: ModelConfig,
    /// The server lists the `statistics` extension.
    pub stats_available: bool,
    /// Blocking connection used for setup and statistics (never for load).
    pub client: BlockingClient,
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

/// Connects, waits for `/v2/health/ready`, and reads what the run needs from the server.
pub fn prepare(cfg: &Config) -> Result<Target> {
    let host = host_of(&cfg.url).to_string();
    let addr = resolve(&host)?;
    let mut client = wait_ready(&host, cfg.ready_timeout_s)?;
    let stats_available = match client.get("/v2") {
        Ok((200, body)) => parse_server_metadata(&body)
            .map(|m| m.extensions.iter().any(|e| e == "statistics"))
            .unwrap_or(false),
        _ => false,
    };
    let meta_path = metadata_path(&cfg.model_name, &cfg.model_version);
    let (status, body) = client.get(&meta_path)?;
    if status != 200 {
        return Err(Error::generic(format!(
            "model '{}': {} (GET {meta_path})",
            cfg.model_name,
            error_message(status, &body)
        )));
    }
    let meta = parse_model_metadata(&body)?;
    let cpath = config_path(&cfg.model_name, &cfg.model_version);
    let (status, body) = client.get(&cpath)?;
    if status != 200 {
        return Err(Error::generic(format!(
            "model '{}': {} (GET {cpath})",
            cfg.model_name,
            error_message(status, &body)
        )));
    }
    let config = parse_model_config(&body)?;
    check_supported(cfg, &config)?;
    Ok(Target {
        addr,
        host,
        meta,
        config,
        stats_available,
        client,
    })
}

fn check_supported(cfg: &Config, config: &ModelConfig) -> Result<()> {
    if config.decoupled {
        return Err(Error::usage(format!(
            "model '{}' is decoupled: it needs --async --streaming over gRPC, which inferperf \
             does not support yet",
            cfg.model_name
        )));
    }
    if config.sequence_batching {
        return Err(Error::usage(format!(
            "model '{}' is a sequence model; sequence models are not supported yet",
            cfg.model_name
        )));
    }
    Ok(())
}

/// Polls `/v2/health/ready` until it answers 200 or `timeout_s` passes (one try when 0).
fn wait_ready(host: &str, timeout_s: u64) -> Result<BlockingClient> {
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
        let last = match BlockingClient::connect(host, Duration::from_secs(2)) {
            Ok(mut c) => match c.get("/v2/health/ready") {
                Ok((200, _)) => return Ok(c),
                // Servers without the health endpoint (404) are taken as ready.
                Ok((404, _)) => return Ok(c),
                Ok((s, b)) => format!("server at {host} is not ready: {}", error_message(s, &b)),
                Err(e) => format!("server at {host}: {e}"),
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

/// Reads the model's cumulative statistics; `None` when the server has no statistics.
pub fn fetch_stats(target: &mut Target, cfg: &Config) -> Result<Option<ModelStats>> {
    if !target.stats_available {
        return Ok(None);
    }
    let path = stats_path(&cfg.model_name, &cfg.model_version);
    let (status, body) = target.client.get(&path)?;
    if status != 200 {
        return Err(Error::generic(format!(
            "server statistics: {} (GET {path})",
            error_message(status, &body)
        )));
    }
    let all = parse_stats(&body)?;
    // Without a version the server reports every loaded version: add them up.
    let v = &cfg.model_version;
    let mut mine = all
        .into_iter()
        .filter(|m| m.name == cfg.model_name && (v.is_empty() || &m.version == v));
    let Some(mut sum) = mine.next() else {
        return Ok(None);
    };
    mine.for_each(|m| sum.add(&m));
    Ok(Some(sum))
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
