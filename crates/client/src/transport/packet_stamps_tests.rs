//! Tests of the packet decoder, the sequence-to-offset table and, where a packet socket can
//! be opened, the socket on loopback.

use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

const SYN_ACK: u8 = 0x12;
const ACK: u8 = 0x10;

/// A TCP header (20 bytes, or more with `options` words) and nothing of the payload.
fn tcp(sport: u16, dport: u16, seq: u32, flags: u8, options: usize) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&seq.to_be_bytes());
    h.extend_from_slice(&[0; 4]);
    h.push(((5 + options as u8) << 4) & 0xf0);
    h.push(flags);
    h.extend_from_slice(&[0; 6]);
    h.resize(h.len() + options * 4, 1);
    h
}

/// An IPv4 packet as the filter keeps it: headers only, the lengths saying `payload` more.
fn v4(src: [u8; 4], seg: &[u8], payload: usize) -> Vec<u8> {
    let total = 20 + seg.len() + payload;
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&[127, 0, 0, 1]);
    p.extend_from_slice(seg);
    p
}

fn v6(src: Ipv6Addr, seg: &[u8], payload: usize) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&((seg.len() + payload) as u16).to_be_bytes());
    p.extend_from_slice(&[6, 64]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
    p.extend_from_slice(seg);
    p
}

#[test]
fn parse_reads_ipv4_and_ipv6_segments() {
    let seg = tcp(8000, 41000, 0xdead_beef, ACK, 3);
    let got = parse(&v4([10, 0, 0, 7], &seg, 300)).unwrap();
    assert_eq!(
        got,
        Segment {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)),
            src_port: 8000,
            dst_port: 41000,
            seq: 0xdead_beef,
            syn_ack: false,
            payload: 300,
        }
    );
    let syn = parse(&v6(Ipv6Addr::LOCALHOST, &tcp(1, 2, 7, SYN_ACK, 0), 0)).unwrap();
    assert_eq!(syn.src, IpAddr::V6(Ipv6Addr::LOCALHOST));
    assert!(syn.syn_ack && syn.payload == 0 && syn.seq == 7);
    // An ACK alone is not a SYN-ACK; a SYN alone neither.
    assert!(
        !parse(&v4([1; 4], &tcp(1, 2, 3, 0x02, 0), 0))
            .unwrap()
            .syn_ack
    );
}

#[test]
fn parse_refuses_what_is_not_a_whole_tcp_segment() {
    let good = v4([127, 0, 0, 1], &tcp(1, 2, 3, ACK, 0), 10);
    assert!(parse(&good).is_some());
    for cut in 0..34 {
        assert_eq!(parse(&good[..cut]), None, "cut at {cut}");
    }
    let mut udp = good.clone();
    udp[9] = 17;
    let mut fragment = good.clone();
    fragment[6] = 0x20; // more fragments
    let mut later_fragment = good.clone();
    later_fragment[7] = 1;
    let mut short_ihl = good.clone();
    short_ihl[0] = 0x44;
    let mut short_doff = good.clone();
    short_doff[20 + 12] = 0x40;
    let mut short_total = good.clone();
    short_total[2..4].copy_from_slice(&30u16.to_be_bytes());
    let mut v5 = good.clone();
    v5[0] = 0x55;
    for bad in [
        udp,
        fragment,
        later_fragment,
        short_ihl,
        short_doff,
        short_total,
        v5,
    ] {
        assert_eq!(parse(&bad), None, "{bad:?}");
    }
    let mut v6_udp = v6(Ipv6Addr::LOCALHOST, &tcp(1, 2, 3, ACK, 0), 0);
    v6_udp[6] = 17;
    assert_eq!(parse(&v6_udp), None);
    assert_eq!(parse(&[]), None);
}

/// A data segment of `len` bytes at stream offset `off` of a stream whose first byte has
/// sequence number `first`.
fn data(port: u16, first: u32, off: u32, len: u32) -> Segment {
    Segment {
        src: IpAddr::V4(Ipv4Addr::LOCALHOST),
        src_port: 8000,
        dst_port: port,
        seq: first.wrapping_add(off),
        syn_ack: false,
        payload: len,
    }
}

fn syn_ack(port: u16, isn: u32) -> Segment {
    Segment {
        syn_ack: true,
        payload: 0,
        seq: isn,
        ..data(port, 0, 0, 0)
    }
}

#[test]
fn offsets_map_to_the_segments_that_carried_them_across_a_sequence_wrap() {
    let mut t = Table::default();
    let isn: u32 = 0xffff_fff0;
    let first = isn.wrapping_add(1);
    t.register(5000);
    t.on_segment(&syn_ack(5000, isn), 1);
    t.on_segment(&data(5000, first, 0, 5), 10);
    t.on_segment(&data(5000, first, 5, 7), 20); // crosses the wrap of the sequence space
    t.on_segment(&data(5000, first, 12, 3), 30);
    let mut out = Vec::new();
    assert!(t.segments(5000, 0, 15, &mut out));
    assert_eq!(out, [(5, 10), (12, 20), (15, 30)]);
    // A read that starts and ends inside segments: the last end is cut to the read's end.
    assert!(t.segments(5000, 3, 13, &mut out));
    assert_eq!(out, [(5, 10), (12, 20), (13, 30)]);
    // A later read drops what earlier ones consumed.
    assert!(t.segments(5000, 12, 15, &mut out));
    assert_eq!(out, [(15, 30)]);
    assert!(!t.segments(5000, 0, 5, &mut out) && out.is_empty());
    // Bytes not seen yet, or another port: no answer.
    assert!(!t.segments(5000, 12, 16, &mut out));
    assert!(!t.segments(5001, 0, 1, &mut out));
    assert!(t.segments(5000, 15, 15, &mut out) && out.is_empty());
}

#[test]
fn the_syn_ack_counts_whether_it_comes_before_or_after_the_registration() {
    let mut t = Table::default();
    let mut out = Vec::new();
    // Seen first, kept by port.
    t.on_segment(&syn_ack(7, 100), 1);
    t.register(7);
    t.on_segment(&data(7, 101, 0, 4), 2);
    assert!(t.segments(7, 0, 4, &mut out));
    // Registered first.
    t.register(8);
    t.on_segment(&data(8, 201, 0, 4), 2); // before its SYN-ACK: cannot be placed
    t.on_segment(&syn_ack(8, 200), 3);
    t.on_segment(&data(8, 201, 0, 4), 4);
    assert!(t.segments(8, 0, 4, &mut out));
    assert_eq!(out, [(4, 4)]);
    // A new connection on the same port starts afresh; an unregistered port keeps nothing.
    t.on_segment(&syn_ack(8, 900), 5);
    assert!(!t.segments(8, 0, 4, &mut out));
    t.unregister(7);
    t.on_segment(&data(7, 101, 4, 4), 6);
    assert!(!t.segments(7, 4, 8, &mut out));
    assert!(!t.flows.contains_key(&7) && !t.first_seq.contains_key(&7));
}

#[test]
fn holes_refuse_and_retransmissions_take_the_later_stamp() {
    let mut t = Table::default();
    let mut out = Vec::new();
    t.register(9);
    t.on_segment(&syn_ack(9, 0), 0);
    t.on_segment(&data(9, 1, 0, 10), 10);
    t.on_segment(&data(9, 1, 20, 10), 30); // bytes 10..20 never seen
    assert!(!t.segments(9, 0, 30, &mut out) && out.is_empty());
    assert!(t.segments(9, 0, 10, &mut out));
    t.on_segment(&data(9, 1, 10, 10), 40); // arrives late (a retransmission)
    assert!(t.segments(9, 0, 30, &mut out));
    // Stamps never go back along the stream: bytes 20..30 were delivered once 10..20 came.
    assert_eq!(out, [(10, 10), (20, 40), (30, 40)]);
    t.on_segment(&data(9, 1, 0, 10), 50); // the first ten again
    assert!(t.segments(9, 0, 10, &mut out));
    assert_eq!(out, [(10, 50)]);
}

#[test]
fn a_connection_keeps_a_bounded_number_of_segments() {
    let mut t = Table::default();
    t.register(1);
    t.on_segment(&syn_ack(1, 0), 0);
    for i in 0..(MAX_SEGMENTS as u32 + 100) {
        t.on_segment(&data(1, 1, i, 1), u64::from(i));
    }
    assert_eq!(t.flows[&1].spans.len(), MAX_SEGMENTS);
    let mut out = Vec::new();
    assert!(!t.segments(1, 0, 1, &mut out), "the oldest went first");
    let last = u64::from(MAX_SEGMENTS as u32 + 100);
    assert!(t.segments(1, last - 2, last, &mut out));
    assert_eq!(out.len(), 2);
}

#[test]
fn covers_sees_a_range_held_by_recorded_segments() {
    let mut t = Table::default();
    t.register(3);
    t.on_segment(&syn_ack(3, 0), 0);
    t.on_segment(&data(3, 1, 0, 4), 1);
    t.on_segment(&data(3, 1, 4, 4), 2);
    assert!(t.covers(3, 0, 8) && t.covers(3, 2, 6) && t.covers(3, 5, 5));
    assert!(!t.covers(3, 0, 9) && !t.covers(4, 0, 1));
}

#[test]
fn the_filter_ends_in_keep_and_drop_and_every_jump_lands_on_drop() {
    for server in ["127.0.0.1:8000", "[::1]:8000"] {
        let prog = filter(server.parse().unwrap());
        let n = prog.len();
        assert_eq!((prog[n - 2].code, prog[n - 2].k), (RET_K, SNAP as u32));
        assert_eq!((prog[n - 1].code, prog[n - 1].k), (RET_K, 0));
        for (i, ins) in prog.iter().enumerate() {
            for off in [ins.jt, ins.jf] {
                if off != 0 {
                    assert_eq!(i + 1 + off as usize, n - 1, "instruction {i}");
                }
            }
        }
        assert!(prog.iter().any(|i| i.code == JEQ_K && i.k == 8000));
    }
}

/// A packet socket for `server`, or `None` (with one line) where it cannot be opened.
fn open_or_skip(server: SocketAddr) -> Option<PacketStamps> {
    match PacketStamps::open(server) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("skipped: no packet socket here ({e}); needs root or CAP_NET_RAW");
            None
        }
    }
}

/// Over loopback: three writes 15 ms apart, read at once by a client that slept through
/// them, come back as three segments with their own stamps, each seen once (the copy of a
/// packet leaving the host is filtered out), and nothing of another server's traffic.
#[test]
fn loopback_segments_keep_their_own_stamps_while_the_reader_sleeps() {
    for host in ["127.0.0.1:0", "[::1]:0"] {
        let Ok(listener) = TcpListener::bind(host) else {
            continue;
        };
        let server_addr = listener.local_addr().unwrap();
        let Some(stamps) = open_or_skip(server_addr) else {
            return;
        };
        let other = TcpListener::bind(host).unwrap();
        let mut client = TcpStream::connect(server_addr).unwrap();
        let port = client.local_addr().unwrap().port();
        stamps.register(port);
        let (mut server, _) = listener.accept().unwrap();
        server.set_nodelay(true).unwrap();
        // Traffic of another server must not pass the filter.
        let mut noise = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        let (mut noise_server, _) = other.accept().unwrap();
        for part in [&b"a"[..], b"bb", b"ccc"] {
            server.write_all(part).unwrap();
            noise_server.write_all(part).unwrap();
            std::thread::sleep(Duration::from_millis(15));
        }
        let mut buf = [0u8; 6];
        client.read_exact(&mut buf).unwrap();
        noise.read_exact(&mut buf).unwrap();
        let mut out = Vec::new();
        assert!(stamps.segments(port, 0, 6, &mut out), "{host}: {out:?}");
        let ends: Vec<u64> = out.iter().map(|e| e.0).collect();
        assert_eq!(ends, [1, 3, 6], "{host}");
        for w in out.windows(2) {
            let gap = w[1].1 - w[0].1;
            assert!(gap >= 10_000_000, "{host}: segments {gap} ns apart");
        }
        let inner = stamps.lock();
        assert_eq!(inner.table.flows[&port].spans.len(), 3, "{host}");
        let syn_acks: Vec<u16> = inner.table.first_seq.keys().copied().collect();
        assert_eq!(syn_acks, [port], "{host}: only our server's SYN-ACK passed");
        drop(inner);
        assert_eq!(stamps.take_stats().dropped, 0);
    }
}
