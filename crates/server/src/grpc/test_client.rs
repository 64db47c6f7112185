//! A small gRPC client for the server's tests, on the `h2` crate's client (not the server's
//! code): unary calls with optional request compression, and a bidirectional stream.

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use h2::{RecvStream, SendStream};
use prost::Message;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::{start, Delay, ServeConfig, ServerHandle};
use inferperf_wire::protocol::grpc::pb::inference as pb;

/// Not a gRPC status: the call failed below gRPC (connection reset, TLS alert).
pub const TRANSPORT: u32 = u32::MAX;

/// Every test's async part runs on its own runtime and gives up after this long.
const TEST_TIMEOUT: Duration = Duration::from_secs(20);

pub fn block_on<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime");
    rt.block_on(async { tokio::time::timeout(TEST_TIMEOUT, f).await })
        .expect("test timed out")
}

/// A server with HTTP and gRPC on ephemeral 127.0.0.1 ports.
pub fn grpc_server(delays: Vec<(String, Delay)>, serial: Vec<String>) -> ServerHandle {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    start(ServeConfig {
        addr: local,
        grpc_addr: Some(local),
        delays,
        serial,
        ..ServeConfig::default()
    })
    .expect("server starts")
}

/// A finished call: grpc-status, decoded grpc-message, and the response messages' bytes.
#[derive(Debug)]
pub struct Reply {
    pub status: u32,
    pub message: String,
    pub messages: Vec<Vec<u8>>,
}

pub struct Client {
    send: SendRequest<Bytes>,
}

/// HTTP/2 over `io`; the connection is driven by a task on the test runtime.
pub async fn h2_over<T>(io: T) -> Result<Client, h2::Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Client { send })
}

pub async fn connect(addr: SocketAddr) -> Client {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    h2_over(tcp).await.expect("h2 handshake")
}

/// TLS then HTTP/2; `Err` if the TLS handshake fails.
pub async fn connect_tls(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<Client> {
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    h2_over(tls).await.map_err(std::io::Error::other)
}

/// One message with the gRPC prefix; `compress` = Some("gzip" | "deflate") compresses it.
pub fn frame(msg: &[u8], compress: Option<&str>) -> Vec<u8> {
    let (flag, body) = match compress {
        None => (0u8, msg.to_vec()),
        Some("gzip") => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(msg).unwrap();
            (1, e.finish().unwrap())
        }
        Some(_) => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(msg).unwrap();
            (1, e.finish().unwrap())
        }
    };
    let mut out = vec![flag];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Splits length-prefixed messages (uncompressed, as the server replies).
fn unframe(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while bytes.len() >= 5 {
        assert_eq!(bytes[0], 0, "server replies uncompressed");
        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        out.push(bytes[5..5 + len].to_vec());
        bytes = &bytes[5 + len..];
    }
    assert!(bytes.is_empty(), "trailing partial message");
    out
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A call to `method` of the Triton service, or to `method` as the whole path when it starts
/// with `/`.
fn request(method: &str, encoding: Option<&str>) -> http::Request<()> {
    let path = match method.starts_with('/') {
        true => method.to_string(),
        false => format!("/inference.GRPCInferenceService/{method}"),
    };
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(e) = encoding {
        req = req.header("grpc-encoding", e);
    }
    req.body(()).unwrap()
}

async fn read_status(body: &mut RecvStream) -> (u32, String) {
    let trailers = body
        .trailers()
        .await
        .expect("trailers")
        .expect("has trailers");
    let status = trailers["grpc-status"].to_str().unwrap().parse().unwrap();
    let message = trailers
        .get("grpc-message")
        .map(|v| percent_decode(v.to_str().unwrap()))
        .unwrap_or_default();
    (status, message)
}

impl Client {
    /// Sends `body` (already framed) to `method` and reads the whole reply.
    pub async fn call(&mut self, method: &str, body: Vec<u8>, encoding: Option<&str>) -> Reply {
        self.try_call(method, body, encoding).await.expect("call")
    }

    /// As `call`, with transport failures (reset, TLS alert) as `Err`.
    pub async fn try_call(
        &mut self,
        method: &str,
        body: Vec<u8>,
        encoding: Option<&str>,
    ) -> Result<Reply, String> {
        self.call_ending(method, body, encoding, true).await
    }

    /// Sends `body` to `method` without ending the request, and reads the whole reply.
    pub async fn call_unfinished(&mut self, method: &str, body: Vec<u8>) -> Reply {
        let reply = self.call_ending(method, body, None, false).await;
        reply.expect("call")
    }

    async fn call_ending(
        &mut self,
        method: &str,
        body: Vec<u8>,
        encoding: Option<&str>,
        end: bool,
    ) -> Result<Reply, String> {
        let err = |e: h2::Error| e.to_string();
        let (response, mut send) = self
            .send
            .send_request(request(method, encoding), false)
            .map_err(err)?;
        send.send_data(Bytes::from(body), end).map_err(err)?;
        let response = response.await.map_err(err)?;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "application/grpc");
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(err)?;
            let _ = body.flow_control().release_capacity(chunk.len());
            bytes.extend_from_slice(&chunk);
        }
        let (status, message) = read_status(&mut body).await;
        Ok(Reply {
            status,
            message,
            messages: unframe(&bytes),
        })
    }

    /// A unary call: the decoded response, or (grpc-status, grpc-message); a transport
    /// failure is ([`TRANSPORT`], its text).
    pub async fn unary<Req: Message, Resp: Message + Default>(
        &mut self,
        method: &str,
        req: &Req,
    ) -> Result<Resp, (u32, String)> {
        let reply = self
            .try_call(method, frame(&req.encode_to_vec(), None), None)
            .await
            .map_err(|e| (TRANSPORT, e))?;
        if reply.status != 0 {
            assert!(reply.messages.is_empty(), "an error carries no message");
            return Err((reply.status, reply.message));
        }
        assert_eq!(reply.messages.len(), 1, "one response message");
        Ok(Resp::decode(reply.messages[0].as_slice()).expect("decodes"))
    }

    /// Opens ModelStreamInfer.
    pub async fn stream(&mut self) -> Stream {
        self.stream_with(None).await
    }

    /// Opens ModelStreamInfer with `grpc-encoding: encoding`.
    pub async fn stream_with(&mut self, encoding: Option<&str>) -> Stream {
        let (response, send) = self
            .send
            .send_request(request("ModelStreamInfer", encoding), false)
            .expect("open stream");
        let response = response.await.expect("stream response head");
        assert_eq!(response.status(), 200);
        Stream {
            send,
            recv: response.into_body(),
            buf: Vec::new(),
        }
    }
}

pub struct Stream {
    send: SendStream<Bytes>,
    recv: RecvStream,
    buf: Vec<u8>,
}

impl Stream {
    pub fn send(&mut self, req: &pb::ModelInferRequest) {
        let framed = frame(&req.encode_to_vec(), None);
        self.send
            .send_data(Bytes::from(framed), false)
            .expect("send");
    }

    /// Sends bytes already framed as gRPC messages (possibly compressed: flag 1).
    pub fn send_raw(&mut self, framed: Vec<u8>) {
        self.send
            .send_data(Bytes::from(framed), false)
            .expect("send");
    }

    /// Ends the client's side of the stream.
    pub fn close(&mut self) {
        self.send.send_data(Bytes::new(), true).expect("close");
    }

    /// The next response, or None when the server ended the stream.
    pub async fn next(&mut self) -> Option<pb::ModelStreamInferResponse> {
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]);
                let end = 5 + len as usize;
                if self.buf.len() >= end {
                    let msg = pb::ModelStreamInferResponse::decode(&self.buf[5..end]).unwrap();
                    self.buf.drain(..end);
                    return Some(msg);
                }
            }
            let chunk = self.recv.data().await?.expect("stream data");
            let _ = self.recv.flow_control().release_capacity(chunk.len());
            self.buf.extend_from_slice(&chunk);
        }
    }

    /// The final status (after `next` returned None).
    pub async fn status(&mut self) -> (u32, String) {
        read_status(&mut self.recv).await
    }
}

/// A ModelInferRequest with raw inputs: (name, datatype, shape, bytes) each.
pub fn infer_request(
    model: &str,
    id: &str,
    inputs: &[(&str, &str, &[i64], Vec<u8>)],
) -> pb::ModelInferRequest {
    pb::ModelInferRequest {
        model_name: model.into(),
        id: id.into(),
        inputs: inputs
            .iter()
            .map(
                |(name, datatype, shape, _)| pb::model_infer_request::InferInputTensor {
                    name: name.to_string(),
                    datatype: datatype.to_string(),
                    shape: shape.to_vec(),
                    ..Default::default()
                },
            )
            .collect(),
        raw_input_contents: inputs.iter().map(|(.., data)| data.clone()).collect(),
        ..Default::default()
    }
}

/// A `repeat_int32` request for `values`, optionally asking for the empty final response.
pub fn repeat_request(id: &str, values: &[i32], empty_final: bool) -> pb::ModelInferRequest {
    let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut req = infer_request(
        "repeat_int32",
        id,
        &[("IN", "INT32", &[values.len() as i64], data)],
    );
    if empty_final {
        req.parameters.insert(
            "triton_enable_empty_final_response".into(),
            pb::InferParameter {
                parameter_choice: Some(pb::infer_parameter::ParameterChoice::BoolParam(true)),
            },
        );
    }
    req
}

/// `triton_final_response` of a response, if present.
pub fn final_flag(r: &pb::ModelInferResponse) -> Option<bool> {
    match r.parameters.get("triton_final_response")?.parameter_choice {
        Some(pb::infer_parameter::ParameterChoice::BoolParam(b)) => Some(b),
        _ => None,
    }
}
