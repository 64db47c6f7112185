//! Unit tests of the HTTP/1.1 pool against a bare listener.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Poll};

use super::super::pool::{Cx, Feed, Pool, Ready};
use super::super::sink::{Sink, SENDS_PER_TURN};
use super::HttpPool;
use crate::clock::Clock;

/// Opens `count` connections to a listener that accepts and never answers, and polls until
/// every one is connected (idle). The listener and the accepted sockets are returned so the
/// connections stay open.
fn connected_pool(count: usize) -> (HttpPool, Poll, (TcpListener, Vec<std::net::TcpStream>)) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let mut pool = HttpPool::new(listener.local_addr().unwrap(), None, count);
    let mut poll = Poll::new().unwrap();
    pool.open(poll.registry()).unwrap();
    let (clock, requests) = (
        Clock::new(),
        Arc::new(vec![b"GET / HTTP/1.1\r\n\r\n".to_vec()]),
    );
    let mut feed = Feed::new(requests, 0, Some(0), None, None);
    let mut sink = Sink::new(Vec::new(), false);
    let (mut accepted, mut events) = (Vec::new(), Events::with_capacity(1024));
    let deadline = Instant::now() + Duration::from_secs(20);
    while (0..count).any(|i| !pool.connected(i)) && Instant::now() < deadline {
        while let Ok((s, _)) = listener.accept() {
            accepted.push(s);
        }
        poll.poll(&mut events, Some(Duration::from_millis(5)))
            .unwrap();
        let mut cx = Cx {
            registry: poll.registry(),
            clock: &clock,
            feed: &mut feed,
            sink: &mut sink,
        };
        for ev in events.iter() {
            pool.on_event(ev.token().0, Ready::of(ev), &mut cx);
        }
    }
    assert!(
        (0..count).all(|i| pool.connected(i)),
        "every connection opens"
    );
    (pool, poll, (listener, accepted))
}

#[test]
fn one_turn_sends_at_most_the_budget_and_says_more_are_due() {
    let count = SENDS_PER_TURN as usize + 44;
    let (mut pool, poll, _accepted) = connected_pool(count);
    let clock = Clock::new();
    let requests = Arc::new(vec![b"GET / HTTP/1.1\r\n\r\n".to_vec()]);
    let mut feed = Feed::new(requests, 0, Some(count as u64), None, None);
    let mut sink = Sink::new(Vec::new(), false);
    let mut turn = |sink: &mut Sink| {
        sink.backlog = false;
        let mut cx = Cx {
            registry: poll.registry(),
            clock: &clock,
            feed: &mut feed,
            sink,
        };
        pool.fill(&mut cx);
        (sink.in_flight, sink.backlog)
    };
    assert_eq!(turn(&mut sink), (SENDS_PER_TURN as usize, true));
    assert_eq!(turn(&mut sink), (count, false));
}
