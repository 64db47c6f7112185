//! The gRPC endpoint's time limits: a connection idle after its calls gets GOAWAY after
//! `--idle-timeout`, and a call whose request trickles (or never ends) is DEADLINE_EXCEEDED
//! after `--request-read-timeout`, while a stream may wait as long as it likes between
//! messages. Connections that never bring a call are in `crate::conn::idle_tests`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use prost::Message;

use super::hostile_tests::{call_headers, h2_frame, Raw, DATA, GOAWAY, HEADERS};
use super::test_client::*;
use super::wire::code;
use crate::limits::Limits;
use crate::{start, ServeConfig, ServerHandle};
use inferperf_wire::protocol::grpc::pb::inference as pb;

/// A short limit for the timeouts under test; the checks allow far more.
const SHORT: Duration = Duration::from_millis(300);

fn grpc_limited(limits: Limits) -> ServerHandle {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    start(ServeConfig {
        addr: local,
        grpc_addr: Some(local),
        limits,
        ..ServeConfig::default()
    })
    .expect("server starts")
}

#[test]
fn a_connection_idle_after_its_call_gets_goaway_and_is_closed() {
    let server = grpc_limited(Limits {
        idle_timeout: SHORT,
        ..Limits::default()
    });
    let (mut raw, _) = Raw::connect(server.grpc_addr.unwrap());
    const END_STREAM: u8 = 1;
    const END_HEADERS: u8 = 4;
    raw.send(&h2_frame(
        HEADERS,
        END_HEADERS,
        1,
        &call_headers("ServerLive"),
    ));
    raw.send(&h2_frame(DATA, END_STREAM, 1, &frame(b"", None)));
    let start = Instant::now();
    let (mut headers, mut goaway) = (0, None);
    while let Some((kind, _, stream, payload)) = raw.next() {
        match kind {
            HEADERS if stream == 1 => headers += 1,
            GOAWAY => goaway = Some(payload),
            _ => {}
        }
    }
    let closed = start.elapsed();
    assert_eq!(headers, 2, "the answer's head and trailers");
    let goaway = goaway.expect("GOAWAY before the close");
    assert_eq!(
        (&goaway[0..4], &goaway[4..8]),
        (&[0, 0, 0, 1][..], &[0, 0, 0, 0][..]),
        "last stream 1, NO_ERROR"
    );
    assert!(
        closed >= SHORT * 2 / 3 && closed < SHORT + Duration::from_secs(5),
        "closed after {closed:?}"
    );
    let give_up = Instant::now() + Duration::from_secs(10);
    while server.open_connections() > 0 {
        assert!(
            Instant::now() < give_up,
            "the connection's place is still taken"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_request_that_does_not_arrive_in_time_is_deadline_exceeded() {
    let server = grpc_limited(Limits {
        request_read_timeout: SHORT,
        ..Limits::default()
    });
    let addr = server.grpc_addr.unwrap();
    let one = |id: &str| {
        infer_request(
            "identity_fp32",
            id,
            &[("INPUT0", "FP32", &[1, 1], 1f32.to_le_bytes().to_vec())],
        )
    };
    let framed = frame(&one("half").encode_to_vec(), None);
    let half = framed[..framed.len() / 2].to_vec();
    block_on(async move {
        let mut c = connect(addr).await;
        // Half a message, and a whole one with no end of the call: the call's request is
        // timed whole, from its start.
        for body in [half.clone(), frame(b"", None)] {
            let started = Instant::now();
            let reply = c.call_unfinished("ModelInfer", body).await;
            assert_eq!(reply.status, code::DEADLINE_EXCEEDED, "{}", reply.message);
            assert!(
                reply.message.contains("--request-read-timeout"),
                "{}",
                reply.message
            );
            assert!(
                started.elapsed() >= SHORT * 2 / 3,
                "{:?}",
                started.elapsed()
            );
        }
        // A stream waits between messages as long as it likes; a message is timed from its
        // first byte.
        let mut s = c.stream().await;
        tokio::time::sleep(SHORT * 2).await;
        s.send(&one("late but whole"));
        let answer = s.next().await.expect("an answer");
        assert_eq!(answer.infer_response.unwrap().id, "late but whole");
        s.send_raw(half);
        assert!(s.next().await.is_none(), "the stream ends");
        let (status, message) = s.status().await;
        assert_eq!(status, code::DEADLINE_EXCEEDED, "{message}");
        // The connection goes on serving.
        let live = c
            .unary::<_, pb::ServerLiveResponse>("ServerLive", &pb::ServerLiveRequest {})
            .await;
        assert!(live.unwrap().live);
    });
}
