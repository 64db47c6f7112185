//! Tests of the blocking gRPC client against an in-test `h2` server on 127.0.0.1 (port 0),
//! plus raw sockets for a refused connection, a silent server and a non-HTTP/2 server.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;

use super::{percent_decode, GrpcClient};
use crate::protocol::grpc::pb::inference as pb;

const TIMEOUT: Duration = Duration::from_secs(2);
/// Size of the large response's raw output (bytes): well past 1 MiB and any window tested here.
const LARGE_OUTPUT: usize = 3 << 20;

/// What the test server saw: connections accepted and the stream id of each request.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    streams: Mutex<Vec<u32>>,
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn framed(msg: &impl Message) -> Bytes {
    let body = msg.encode_to_vec();
    let mut out = Vec::with_capacity(body.len() + 5);
    out.push(0);
    out.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(&body);
    Bytes::from(out)
}

fn grpc_headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, value.parse().unwrap());
    }
    map
}

/// Answers one request by its path; the request body is read fully first.
async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) -> std::result::Result<(), h2::Error> {
    let path = request.uri().path().to_string();
    let mut body = request.into_body();
    let mut got = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        body.flow_control().release_capacity(chunk.len())?;
        got.extend_from_slice(&chunk);
    }
    let method = path.trim_start_matches("/inference.GRPCInferenceService/");
    let mut head = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc");
    if method == "ServerReady" {
        // Trailers-only response: status and message in the one HEADERS frame.
        head = head
            .header("grpc-status", "14")
            .header("grpc-message", "unavailable");
        respond.send_response(head.body(()).unwrap(), true)?;
        return Ok(());
    }
    let mut send = respond.send_response(head.body(()).unwrap(), false)?;
    let trailers = match method {
        "ServerMetadata" => {
            let reply = pb::ServerMetadataResponse {
                name: "triton".into(),
                version: "2.50.0".into(),
                extensions: vec!["statistics".into()],
            };
            send.send_data(framed(&reply), false)?;
            grpc_headers(&[("grpc-status", "0")])
        }
        "ModelInfer" => {
            // Echo the request's length so the test sees the whole body arrived.
            let reply = pb::ModelInferResponse {
                id: got.len().to_string(),
                raw_output_contents: vec![pattern(LARGE_OUTPUT)],
                ..Default::default()
            };
            send.send_data(framed(&reply), false)?;
            grpc_headers(&[("grpc-status", "0")])
        }
        "ModelMetadata" => grpc_headers(&[
            ("grpc-status", "5"),
            ("grpc-message", "unknown model: 'nope' (100%25 sure)"),
        ]),
        _ => grpc_headers(&[("grpc-status", "12")]),
    };
    send.send_trailers(trailers)
}

/// Serves `connections` connections one after the other, then returns.
fn serve(connections: usize) -> (String, Arc<Seen>, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Seen::default());
    let seen_by_server = Arc::clone(&seen);
    let handle = thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            for _ in 0..connections {
                let (socket, _) = listener.accept().await.unwrap();
                // Without it, Nagle plus delayed ACKs stall each small-window round trip.
                socket.set_nodelay(true).unwrap();
                seen_by_server.connections.fetch_add(1, Ordering::SeqCst);
                let mut conn = h2::server::handshake(socket).await.unwrap();
                while let Some(Ok((request, respond))) = conn.accept().await {
                    seen_by_server
                        .streams
                        .lock()
                        .unwrap()
                        .push(respond.stream_id().as_u32());
                    tokio::spawn(answer(request, respond));
                }
            }
        });
    });
    (addr, seen, handle)
}

#[test]
fn calls_decode_and_reuse_one_connection() {
    let (addr, seen, server) = serve(1);
    let mut client = GrpcClient::connect(&addr, TIMEOUT).unwrap();
    assert_eq!(client.address(), addr);
    for _ in 0..2 {
        let bytes = client.unary("ServerMetadata", b"").unwrap();
        let reply = pb::ServerMetadataResponse::decode(&bytes[..]).unwrap();
        assert_eq!(reply.name, "triton");
        assert_eq!(reply.version, "2.50.0");
        assert_eq!(reply.extensions, ["statistics"]);
    }
    // An error status leaves the connection usable.
    assert!(client.unary("ModelMetadata", b"x").is_err());
    assert!(client.unary("ServerMetadata", b"").is_ok());
    drop(client);
    server.join().unwrap();
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.streams.lock().unwrap(), [1, 3, 5, 7]);
}

#[test]
fn error_statuses_name_the_method_and_message() {
    let (addr, _seen, server) = serve(1);
    let mut client = GrpcClient::connect(&addr, TIMEOUT).unwrap();
    let cases = [
        (
            "ModelMetadata",
            "ModelMetadata: gRPC status 5: unknown model: 'nope' (100% sure)",
        ),
        // Trailers-only response.
        ("ServerReady", "ServerReady: gRPC status 14: unavailable"),
        ("NoSuchMethod", "NoSuchMethod: gRPC status 12"),
    ];
    for (method, expected) in cases {
        let err = client.unary(method, b"").unwrap_err();
        assert_eq!(err.msg, expected);
        assert_eq!(err.exit_code(), 99);
    }
    drop(client);
    server.join().unwrap();
}

/// A 400 KiB request (past the server's 64 KiB default window) and a 3 MiB response, with
/// the client's default window and with a minimal one that needs many WINDOW_UPDATEs.
#[test]
fn large_messages_flow_in_both_directions() {
    let request = pb::ModelInferRequest {
        model_name: "big".into(),
        raw_input_contents: vec![pattern(400 << 10)],
        ..Default::default()
    }
    .encode_to_vec();
    for window in [super::RECV_WINDOW, 65_535] {
        let (addr, _seen, server) = serve(1);
        let mut client = GrpcClient::connect_with_window(&addr, TIMEOUT, window, None).unwrap();
        for _ in 0..2 {
            let bytes = client.unary("ModelInfer", &request).unwrap();
            let reply = pb::ModelInferResponse::decode(&bytes[..]).unwrap();
            assert_eq!(reply.id, (request.len() + 5).to_string(), "window {window}");
            assert_eq!(reply.raw_output_contents, [pattern(LARGE_OUTPUT)]);
        }
        drop(client);
        server.join().unwrap();
    }
}

#[test]
fn refused_connection_names_the_address() {
    let addr = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let err = GrpcClient::connect(&addr, TIMEOUT).unwrap_err();
    assert_eq!(
        err.msg,
        format!("cannot connect to gRPC server at {addr}: Connection refused")
    );
}

#[test]
fn silent_server_times_out() {
    // The kernel completes the handshake from the backlog; nothing ever answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut client = GrpcClient::connect(&addr, Duration::from_millis(200)).unwrap();
    let started = Instant::now();
    let err = client.unary("ServerMetadata", b"").unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        err.msg,
        format!("ServerMetadata to gRPC server at {addr}: no response within 0.2 s")
    );
}

/// A server that answers with `reply` and then waits for the client to close.
fn raw_server(reply: &'static [u8]) -> (String, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        socket.set_read_timeout(Some(TIMEOUT)).unwrap();
        socket.write_all(reply).unwrap();
        // The client's side is done: an empty reply becomes a plain close.
        socket.shutdown(std::net::Shutdown::Write).unwrap();
        let mut sink = Vec::new();
        let _ = socket.read_to_end(&mut sink);
    });
    (addr, handle)
}

#[test]
fn peer_misbehaviour_is_an_error() {
    // SETTINGS (empty), then RST_STREAM on stream 1 with REFUSED_STREAM.
    const RESET: &[u8] = &[
        0, 0, 0, 4, 0, 0, 0, 0, 0, // SETTINGS, no parameters
        0, 0, 4, 3, 0, 0, 0, 0, 1, 0, 0, 0, 7, // RST_STREAM stream 1, code 7
    ];
    // GOAWAY, last stream 0, ENHANCE_YOUR_CALM, debug "slow down".
    const GOAWAY: &[u8] = b"\0\0\x11\x07\0\0\0\0\0\0\0\0\0\0\0\0\x0bslow down";
    let cases: [(&[u8], &str); 4] = [
        (
            b"HTTP/1.1 400 Bad Request\r\n\r\n",
            "HTTP/2 connection error FRAME_SIZE_ERROR",
        ),
        (b"", "server closed the connection"),
        (
            RESET,
            "ServerMetadata: server reset the stream (REFUSED_STREAM)",
        ),
        (
            GOAWAY,
            "server closed the connection (GOAWAY ENHANCE_YOUR_CALM: slow down)",
        ),
    ];
    for (reply, expected) in cases {
        let (addr, server) = raw_server(reply);
        let mut client = GrpcClient::connect(&addr, TIMEOUT).unwrap();
        let err = client.unary("ServerMetadata", b"").unwrap_err();
        assert!(err.msg.contains(expected), "{:?}: {}", reply, err.msg);
        assert!(err.msg.starts_with("ServerMetadata"), "{}", err.msg);
        drop(client);
        server.join().unwrap();
    }
}

#[test]
fn grpc_message_percent_decoding() {
    let cases = [
        ("plain text", "plain text"),
        ("100%25", "100%"),
        ("caf%C3%A9", "café"),
        ("bad %zz and %4", "bad %zz and %4"),
        ("%+1", "%+1"),
        ("", ""),
    ];
    for (wire, expected) in cases {
        assert_eq!(percent_decode(wire), expected, "{wire}");
    }
}
