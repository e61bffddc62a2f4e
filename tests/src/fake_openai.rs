//! A stand-in OpenAI-compatible completions server on loopback: every request is answered with
//! one choice whose text is `middle` (usage 7 prompt and 5 completion tokens), or with an HTTP
//! 500, when the test lets it if asked, and every request body is kept, for the tests of remote
//! backends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// Starts the server; its base URL (`http://127.0.0.1:PORT`) and the bodies it was sent.
pub fn start(middle: &'static str) -> (String, Arc<Mutex<Vec<Value>>>) {
    let (url, seen, release) = start_held(middle);
    // Dropped: nothing holds an answer back.
    drop(release);
    (url, seen)
}

/// [`start`], each answer held back (one request at a time) until the test lets it go with the
/// returned sender (one `send` an answer; once it is dropped, all go at once), so that a test
/// can make requests overlap.
pub fn start_held(middle: &'static str) -> (String, Arc<Mutex<Vec<Value>>>, Sender<()>) {
    held(Reply::Middle(middle))
}

/// [`start_held`], each request answered HTTP 500 with `message` as its error.
pub fn start_held_failing(message: &'static str) -> (String, Arc<Mutex<Vec<Value>>>, Sender<()>) {
    held(Reply::Error(message))
}

/// What every request gets.
#[derive(Clone, Copy)]
enum Reply {
    Middle(&'static str),
    Error(&'static str),
}

fn held(reply: Reply) -> (String, Arc<Mutex<Vec<Value>>>, Sender<()>) {
    let (release, released) = channel();
    let (url, seen) = serve(reply, released);
    (url, seen, release)
}

fn serve(reply: Reply, released: Receiver<()>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            log.lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            // An error: the sender is gone, nothing holds answers back.
            let _ = released.recv();
            let (status, answer) = match reply {
                Reply::Middle(middle) => (
                    "200 OK",
                    json!({
                        "id": "cmpl-1", "object": "text_completion", "created": 0, "model": "fake",
                        "choices": [{"text": middle, "index": 0, "finish_reason": "stop", "logprobs": null}],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
                    }),
                ),
                Reply::Error(message) => (
                    "500 Internal Server Error",
                    json!({"error": {"message": message}}),
                ),
            };
            let answer = answer.to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, seen)
}
