use super::*;
use std::net::{TcpListener, TcpStream};
use std::thread;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Reads one request (head and Content-Length body) from `stream`; None on EOF.
fn read_request(stream: &mut TcpStream) -> Option<String> {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got).to_string();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    Some(head + &String::from_utf8_lossy(&body))
}

/// A server thread: for each accepted connection, answers requests with the given responses
/// in order; an entry of `None` closes the connection instead. Returns the requests it saw.
fn serve(connections: Vec<Vec<Option<&'static str>>>) -> (String, thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let handle = thread::spawn(move || {
        let mut seen = Vec::new();
        for answers in connections {
            let (mut stream, _) = listener.accept().unwrap();
            stream.set_read_timeout(Some(TIMEOUT)).unwrap();
            for answer in answers {
                let Some(answer) = answer else { break };
                let Some(request) = read_request(&mut stream) else {
                    break;
                };
                seen.push(request);
                stream.write_all(answer.as_bytes()).unwrap();
            }
        }
        seen
    });
    (address, handle)
}

const OK_HELLO: &str = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

#[test]
fn reuses_a_keep_alive_connection() {
    let chunked =
        "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let (address, server) = serve(vec![vec![Some(OK_HELLO), Some(chunked), Some(OK_HELLO)]]);
    let mut client = BlockingClient::connect(&format!("http://{address}/"), TIMEOUT).unwrap();
    assert_eq!(client.get("/v2").unwrap(), (200, b"hello".to_vec()));
    assert_eq!(client.get("/v2/models/m").unwrap(), (404, b"abc".to_vec()));
    let headers = vec![("X-Test".to_string(), "1".to_string())];
    assert_eq!(
        client.post("/p", &headers, b"{}").unwrap(),
        (200, b"hello".to_vec())
    );
    drop(client);
    let seen = server.join().unwrap();
    assert_eq!(seen.len(), 3, "all three on one connection");
    assert_eq!(
        seen[0],
        format!("GET /v2 HTTP/1.1\r\nHost: {address}\r\n\r\n")
    );
    assert!(seen[2].starts_with("POST /p HTTP/1.1\r\n"), "{}", seen[2]);
    assert!(seen[2].contains("X-Test: 1\r\n") && seen[2].ends_with("Content-Length: 2\r\n\r\n{}"));
}

#[test]
fn reconnects_once_when_the_server_closed_the_connection() {
    // Connection 1 answers once then closes; connection 2 answers the retried request.
    let (address, server) = serve(vec![vec![Some(OK_HELLO), None], vec![Some(OK_HELLO)]]);
    let mut client = BlockingClient::connect(&address, TIMEOUT).unwrap();
    assert_eq!(client.get("/a").unwrap().0, 200);
    thread::sleep(Duration::from_millis(50)); // let the close arrive
    assert_eq!(client.get("/b").unwrap(), (200, b"hello".to_vec()));
    drop(client);
    assert_eq!(server.join().unwrap().len(), 2);
}

#[test]
fn opens_a_new_connection_after_connection_close() {
    let close = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx";
    let (address, server) = serve(vec![vec![Some(close)], vec![Some(OK_HELLO)]]);
    let mut client = BlockingClient::connect(&address, TIMEOUT).unwrap();
    assert_eq!(client.get("/a").unwrap(), (200, b"x".to_vec()));
    assert_eq!(client.get("/b").unwrap(), (200, b"hello".to_vec()));
    drop(client);
    assert_eq!(server.join().unwrap().len(), 2);
}

#[test]
fn reports_refused_connections_with_the_address() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = BlockingClient::connect(&format!("127.0.0.1:{port}"), TIMEOUT).unwrap_err();
    assert_eq!(
        err.msg,
        format!("cannot connect to server at 127.0.0.1:{port}: Connection refused")
    );
}

#[test]
fn times_out_and_reports_a_broken_response() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let server = thread::spawn(move || {
        let (mut silent, _) = listener.accept().unwrap();
        read_request(&mut silent);
        let (mut broken, _) = listener.accept().unwrap();
        read_request(&mut broken);
        broken
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")
            .unwrap();
        drop(broken); // EOF in the middle of the body
        drop(silent);
    });
    let mut client = BlockingClient::connect(&address, Duration::from_millis(200)).unwrap();
    let err = client.get("/slow").unwrap_err();
    assert!(
        err.msg
            .starts_with(&format!("GET /slow to server at {address}: no response")),
        "{}",
        err.msg
    );
    let err = client.get("/short").unwrap_err();
    assert!(
        err.msg.ends_with("in the middle of a response"),
        "{}",
        err.msg
    );
    drop(client);
    server.join().unwrap();
}

#[test]
fn server_addresses() {
    let cases: &[(&str, Option<&str>)] = &[
        ("localhost:8000", Some("localhost:8000")),
        ("http://127.0.0.1:8000/", Some("127.0.0.1:8000")),
        ("HTTP://h:1/v2", Some("h:1")),
        ("example", Some("example:80")),
        ("[::1]:9", Some("[::1]:9")),
        ("[::1]", Some("[::1]:80")),
        ("https://h:443", None),
        ("", None),
        ("http://", None),
        ("h st:1", None),
        ("é", Some("é:80")),
    ];
    for (url, want) in cases {
        let got = server_address(url).ok();
        assert_eq!(got.as_deref(), *want, "url {url:?}");
    }
}

#[test]
fn server_addresses_with_tls() {
    let cases: &[(&str, Option<&str>)] = &[
        ("https://h:8443/", Some("h:8443")),
        ("HTTPS://h", Some("h:443")),
        ("localhost:8000", Some("localhost:8000")),
        ("[::1]", Some("[::1]:443")),
        ("http://h:80", None),
        ("https://", None),
    ];
    for (url, want) in cases {
        let got = server_address_for(url, true).ok();
        assert_eq!(got.as_deref(), *want, "url {url:?}");
    }
    let err = server_address("https://h:443").unwrap_err();
    assert!(err.msg.contains("TLS settings"), "{}", err.msg);
}
