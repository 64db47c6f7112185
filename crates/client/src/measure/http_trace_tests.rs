use super::*;

fn fresh_tls() -> HttpTrace {
    HttpTrace {
        due_ns: 1_000,
        connect_start_ns: 1_500,
        connect_end_ns: 2_000,
        tls_start_ns: 2_000,
        tls_end_ns: 3_000,
        send_start_ns: 3_100,
        send_end_ns: 3_200,
        recv_start_ns: 5_200,
        recv_end_ns: 9_200,
        bytes_sent: 435,
        bytes_received: 4_068,
        writes: 1,
        reads: 21,
        reused: false,
    }
}

#[test]
fn bytes_round_trip() {
    let t = fresh_tls();
    assert_eq!(HttpTrace::from_bytes(&t.to_bytes()), Some(t));
    let reused = HttpTrace {
        reused: true,
        writes: u32::MAX,
        reads: 7,
        ..t
    };
    assert_eq!(HttpTrace::from_bytes(&reused.to_bytes()), Some(reused));
    assert_eq!(HttpTrace::from_bytes(&[0u8; 8]), None);
}

#[test]
fn a_new_connection_counts_connect_and_tls_once() {
    let p = fresh_tls().phases().unwrap();
    // Due at 1000, the connection began opening at 1500.
    assert_eq!(p.blocked_ns, 500);
    assert_eq!(p.dns_lookup_ns, 0);
    assert_eq!(
        p.connecting_ns, 1_500,
        "TCP and TLS, until the handshake ended"
    );
    assert_eq!(p.sending_ns, 100);
    assert_eq!(p.waiting_ns, 2_000);
    assert_eq!(p.receiving_ns, 4_000);
    assert_eq!(p.duration_ns, p.sending_ns + p.waiting_ns + p.receiving_ns);
    assert_eq!(p.connection_overhead_ns, 2_000);
    assert_eq!(p.total_ns, 2_000 + 6_100);
    assert_eq!((p.chunks_sent, p.chunks_received), (1, 21));
    assert!(!p.reused);
}

#[test]
fn a_reused_connection_has_no_connect_time() {
    let t = HttpTrace {
        reused: true,
        due_ns: 3_100,
        ..fresh_tls()
    };
    let p = t.phases().unwrap();
    assert_eq!((p.connecting_ns, p.blocked_ns), (0, 0));
    assert_eq!(p.connection_overhead_ns, 0);
    assert_eq!(p.total_ns, p.duration_ns);
    assert!(p.reused);
}

#[test]
fn a_connection_opened_before_the_request_does_not_block_it() {
    // Closed loop: the connection was opened before the run; the request is due when its
    // slot takes it, which is when it is sent.
    let t = HttpTrace {
        due_ns: 3_100,
        ..fresh_tls()
    };
    let p = t.phases().unwrap();
    assert_eq!(p.blocked_ns, 0);
    assert_eq!(p.connecting_ns, 1_500);
}

#[test]
fn one_read_means_no_receiving_time_and_no_read_means_no_phases() {
    let one = HttpTrace {
        reads: 1,
        ..fresh_tls()
    };
    assert_eq!(one.phases().unwrap().receiving_ns, 0);
    let none = HttpTrace {
        recv_start_ns: 0,
        recv_end_ns: 0,
        reads: 0,
        ..fresh_tls()
    };
    assert_eq!(none.phases(), None);
}
