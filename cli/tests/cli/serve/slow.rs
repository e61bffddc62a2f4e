//! Slow and greedy clients over raw TCP: half-sent request heads, stalled bodies and clients
//! that stop reading their answers are closed after their timeouts, one address holds at most
//! its share of connections, connections past the total wait, and a shutdown closes idle and
//! stalled connections at once, so it ends within its grace period.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::client::Server;

/// Reads until the server closes the connection; what it sent. Fails the test if it is still
/// open after `limit`.
#[track_caller]
fn read_until_closed(socket: &mut TcpStream, limit: Duration) -> Vec<u8> {
    socket.set_read_timeout(Some(limit)).unwrap();
    let mut answer = Vec::new();
    match socket.read_to_end(&mut answer) {
        Ok(_) => {}
        // A reset is closed too (the server did not read what was sent).
        Err(err) if err.kind() == ErrorKind::ConnectionReset => {}
        Err(err) => panic!(
            "the connection was still open after {limit:?} ({err}); read so far: {:?}",
            String::from_utf8_lossy(&answer)
        ),
    }
    answer
}

/// A keep-alive `GET /health` on `socket`, its response read whole (the connection stays open);
/// the status.
fn health_keep_alive(socket: &mut TcpStream, host: &str) -> u16 {
    socket
        .write_all(format!("GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        socket.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .expect("a Content-Length");
    let mut body = vec![0; length];
    socket.read_exact(&mut body).unwrap();
    head[9..12].parse().unwrap()
}

/// The server answers a fresh connection (retried for a while: a connection dropped on our side
/// leaves the server's count a moment later).
#[track_caller]
fn answers_again(server: &Server) {
    let started = Instant::now();
    loop {
        let mut socket = server.connect();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let host = server.addr.to_string();
        let request = format!("GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let mut answer = Vec::new();
        if socket.write_all(request.as_bytes()).is_ok() {
            let _ = socket.read_to_end(&mut answer);
        }
        if answer.starts_with(b"HTTP/1.1 200") {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no answer: {:?}",
            String::from_utf8_lossy(&answer)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Fifty request heads that never finish: each connection is closed once
/// `--header-timeout-ms` has passed, not held.
#[test]
fn half_sent_heads_are_closed_after_the_header_timeout() {
    let server = Server::start(&["--header-timeout-ms", "1000"]);
    let host = server.addr.to_string();
    let started = Instant::now();
    let mut sockets: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut socket = server.connect();
            socket
                .write_all(
                    format!("POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-").as_bytes(),
                )
                .unwrap();
            socket
        })
        .collect();
    for socket in &mut sockets {
        let answer = read_until_closed(socket, Duration::from_secs(8));
        // hyper answers 408 or just closes.
        assert!(
            answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
            "{:?}",
            String::from_utf8_lossy(&answer)
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    answers_again(&server);
}

/// Bodies that stop arriving: each request is answered 408 once `--body-timeout-ms` has passed
/// since its head, and its connection closed.
#[test]
fn stalled_bodies_are_408_after_the_body_timeout() {
    let server = Server::start(&["--body-timeout-ms", "1000"]);
    let host = server.addr.to_string();
    let started = Instant::now();
    let mut sockets: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut socket = server.connect();
            let head = format!(
                "POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"prompt\":"
            );
            socket.write_all(head.as_bytes()).unwrap();
            socket
        })
        .collect();
    for socket in &mut sockets {
        let answer = read_until_closed(socket, Duration::from_secs(8));
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("request_timeout"), "{answer}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.metric("redraft_body_timeouts_total"), 10.0);
}

/// One address holds at most `--max-connections-per-peer` connections: the next is closed at
/// once, unanswered, and a place freed is a place taken again.
#[test]
fn one_address_holds_at_most_its_share_of_connections() {
    let server = Server::start(&["--max-connections-per-peer", "4"]);
    let host = server.addr.to_string();
    let mut held: Vec<TcpStream> = (0..4).map(|_| server.connect()).collect();
    for socket in &mut held {
        assert_eq!(health_keep_alive(socket, &host), 200);
    }
    let started = Instant::now();
    let mut fifth = server.connect();
    let _ = fifth.write_all(format!("GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
    let answer = read_until_closed(&mut fifth, Duration::from_secs(5));
    assert!(answer.is_empty(), "{:?}", String::from_utf8_lossy(&answer));
    assert!(started.elapsed() < Duration::from_secs(2));
    drop(held.pop());
    answers_again(&server);
    // Room for the metrics request whatever the moment the server lets go of the last one.
    drop(held.pop());
    answers_again(&server);
    assert!(server.metric("redraft_refused_connections_total") >= 1.0);
    // The held ones were never disturbed.
    for socket in &mut held {
        assert_eq!(health_keep_alive(socket, &host), 200);
    }
}

/// Clients that pipeline requests and never read the answers: once the socket takes no more
/// of a response for `--write-timeout-ms` the connection is closed, so they do not hold their
/// address's share of connections (here all of it) for ever.
#[test]
fn clients_that_stop_reading_are_closed_after_the_write_timeout() {
    let server = Server::start(&[
        "--max-connections-per-peer",
        "2",
        "--write-timeout-ms",
        "1000",
    ]);
    let host = server.addr.to_string();
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let stalled: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut socket = server.connect();
            socket.set_nonblocking(true).unwrap();
            // Far more answers than the sockets' buffers hold; stop where the server stops
            // reading.
            for _ in 0..20_000 {
                match socket.write(request.as_bytes()) {
                    Ok(_) => {}
                    Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                    Err(err) => panic!("{err}"),
                }
            }
            socket
        })
        .collect();
    // Both places are taken until the stalled writes time out; then the address is served.
    answers_again(&server);
    // Room for the metrics request whatever the moment the server lets go of the other stalled
    // connection (it may time out later) and of the one that was just answered.
    drop(stalled);
    answers_again(&server);
    assert!(server.metric("redraft_write_timeouts_total") >= 1.0);
}

/// Past `--max-connections` a new connection waits to be accepted, and is served once one
/// closes.
#[test]
fn connections_past_the_total_wait_for_a_place() {
    let server = Server::start(&["--max-connections", "2"]);
    let host = server.addr.to_string();
    let mut held: Vec<TcpStream> = (0..2).map(|_| server.connect()).collect();
    for socket in &mut held {
        assert_eq!(health_keep_alive(socket, &host), 200);
    }
    let mut third = server.connect();
    third
        .write_all(
            format!("GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let waited = third.read(&mut [0u8; 1]);
    assert!(
        matches!(&waited, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "answered while two connections were open: {waited:?}"
    );
    drop(held.pop());
    let answer = read_until_closed(&mut third, Duration::from_secs(10));
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
}

/// SIGTERM with fifty half-sent heads, ten stalled bodies and five idle kept-alive connections
/// (and timeouts far off): they are closed at once, the stalled requests answered 503, and the
/// server exits well within its grace period.
#[test]
fn shutdown_closes_idle_and_stalled_connections_at_once() {
    let server = Server::start(&[
        "--shutdown-grace-ms",
        "3000",
        "--header-timeout-ms",
        "60000",
        "--body-timeout-ms",
        "60000",
    ]);
    let host = server.addr.to_string();
    let mut heads: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut socket = server.connect();
            socket
                .write_all(format!("GET /health HTTP/1.1\r\nHost: {host}\r\nAcc").as_bytes())
                .unwrap();
            socket
        })
        .collect();
    let mut bodies: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut socket = server.connect();
            let head = format!(
                "POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
            );
            socket.write_all(head.as_bytes()).unwrap();
            socket
        })
        .collect();
    let mut idle: Vec<TcpStream> = (0..5).map(|_| server.connect()).collect();
    for socket in &mut idle {
        assert_eq!(health_keep_alive(socket, &host), 200);
    }
    // Every connection accepted and every stalled body being read.
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let status = server.terminate();
    let took = started.elapsed();
    assert!(status.success(), "exit status {status:?}");
    // Within the grace period (it takes well under a second here; it took grace + 5 s).
    assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
    for socket in &mut bodies {
        let answer = read_until_closed(socket, Duration::from_secs(5));
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 503"),
            "{answer}"
        );
    }
    for socket in heads.iter_mut().chain(&mut idle) {
        read_until_closed(socket, Duration::from_secs(5));
    }
}
