//! A minimal blocking HTTP/1.1 client for the server's tests: hand-written requests over
//! `std::net::TcpStream`, responses parsed by hand (deliberately not with the server's code).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::{start, Delay, ServeConfig, ServerHandle};

/// Starts a server on an ephemeral 127.0.0.1 port with the given delays.
pub fn server_with(delays: Vec<(String, Delay)>) -> ServerHandle {
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    start(ServeConfig {
        addr,
        delays,
        ..ServeConfig::default()
    })
    .expect("server starts")
}

pub fn server() -> ServerHandle {
    server_with(Vec::new())
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON, or (with `Inference-Header-Content-Length`) its JSON part.
    pub fn json(&self) -> serde_json::Value {
        let n = self
            .header("Inference-Header-Content-Length")
            .map_or(self.body.len(), |v| {
                v.parse().expect("numeric Inference-Header-Content-Length")
            });
        serde_json::from_slice(&self.body[..n]).expect("JSON body")
    }

    /// The binary part after the JSON header.
    pub fn binary(&self) -> &[u8] {
        let n: usize = self
            .header("Inference-Header-Content-Length")
            .unwrap()
            .parse()
            .unwrap();
        &self.body[n..]
    }

    pub fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Reads more bytes; false at EOF.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 65536];
        let n = self.stream.read(&mut chunk).expect("read (timeout?)");
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    /// Reads one response (Content-Length framed; none means an empty body).
    pub fn recv(&mut self) -> Response {
        let head_end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            assert!(self.fill(), "connection closed before a response head");
        };
        let head = String::from_utf8(self.buf[..head_end].to_vec()).unwrap();
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap();
                (n.trim().to_string(), v.trim().to_string())
            })
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, v)| v.parse().unwrap());
        while self.buf.len() < head_end + len {
            assert!(self.fill(), "connection closed inside a body");
        }
        let body = self.buf[head_end..head_end + len].to_vec();
        self.buf.drain(..head_end + len);
        Response {
            status,
            headers,
            body,
        }
    }

    /// True if the server closed the connection (no further bytes).
    pub fn closed(&mut self) -> bool {
        self.buf.is_empty() && !self.fill()
    }

    pub fn request(&mut self, bytes: &[u8]) -> Response {
        self.send(bytes);
        self.recv()
    }
}

pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

pub fn post_json(path: &str, body: &str) -> Vec<u8> {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body.as_bytes());
    req
}

/// A binary-tensor infer request: JSON header then `data`.
pub fn post_binary(path: &str, header: &str, data: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n\
         Inference-Header-Content-Length: {}\r\nContent-Length: {}\r\n\r\n",
        header.len(),
        header.len() + data.len()
    )
    .into_bytes();
    req.extend_from_slice(header.as_bytes());
    req.extend_from_slice(data);
    req
}

pub fn i32_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub fn i32_values(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A binary `simple` request with batch `batch`: INPUT0 = 0.., INPUT1 = 100.. (batch*16 each).
pub fn simple_binary(batch: usize) -> Vec<u8> {
    let n = batch * 16;
    let a: Vec<i32> = (0..n as i32).collect();
    let b: Vec<i32> = (100..100 + n as i32).collect();
    let header = format!(
        r#"{{"id":"b{batch}","inputs":[{{"name":"INPUT0","datatype":"INT32","shape":[{batch},16],"parameters":{{"binary_data_size":{s}}}}},{{"name":"INPUT1","datatype":"INT32","shape":[{batch},16],"parameters":{{"binary_data_size":{s}}}}}],"outputs":[{{"name":"OUTPUT0","parameters":{{"binary_data":true}}}},{{"name":"OUTPUT1","parameters":{{"binary_data":true}}}}]}}"#,
        s = n * 4
    );
    let mut data = i32_bytes(&a);
    data.extend_from_slice(&i32_bytes(&b));
    post_binary("/v2/models/simple/infer", &header, &data)
}

/// Checks a response to [`simple_binary`]: OUTPUT0 = a+b, OUTPUT1 = a-b = -100.
pub fn check_simple_binary(resp: &Response, batch: usize) {
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    let j = resp.json();
    assert_eq!(j["id"], format!("b{batch}"));
    let n = batch * 16;
    let bin = resp.binary();
    assert_eq!(bin.len(), 2 * n * 4);
    let sum: Vec<i32> = (0..n as i32).map(|i| 2 * i + 100).collect();
    assert_eq!(i32_values(&bin[..n * 4]), sum);
    assert_eq!(i32_values(&bin[n * 4..]), vec![-100; n]);
}
