//! The test side of the wire: the real `redraft serve` process on a free loopback port
//! (`--bind 127.0.0.1:0`; the bound address is read from its stderr), and a small blocking
//! HTTP/1.1 client over `std::net::TcpStream`, so a test can send exactly what a client sends,
//! read a stream event by event and hang up mid-way, or write bytes no client library would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long any one read may block before the test fails.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

/// How to start a server.
#[derive(Default)]
pub struct Start<'a> {
    pub args: &'a [&'a str],
    pub env: &'a [(&'a str, &'a str)],
    /// `REDRAFT_STEP_DELAY_MS`: a pause after every denoising step.
    pub step_delay_ms: Option<u64>,
}

impl Server {
    /// `redraft serve --bind 127.0.0.1:0 ARGS` (ARGS' own address where they give one), once it
    /// listens.
    pub fn start(args: &[&str]) -> Server {
        Server::start_with(Start {
            args,
            ..Start::default()
        })
    }

    pub fn start_with(start: Start<'_>) -> Server {
        let mut command = Command::new(crate::cli::redraft_binary());
        command.arg("serve");
        if !["--bind", "--host", "--port"]
            .iter()
            .any(|flag| start.args.contains(flag))
        {
            command.args(["--bind", "127.0.0.1:0"]);
        }
        command.args(start.args);
        // The embedded default's own inline bar (tuned when a model is shipped) is not what
        // these tests are about: a server running it withholds nothing unless a test says so.
        if !start
            .args
            .iter()
            .any(|a| ["--model", "--min-confidence"].contains(a))
        {
            command.args(["--min-confidence", "0"]);
        }
        command
            .env_remove("REDRAFT_API_KEY")
            .env_remove("REDRAFT_STEP_DELAY_MS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in start.env {
            command.env(key, value);
        }
        if let Some(ms) = start.step_delay_ms {
            command.env("REDRAFT_STEP_DELAY_MS", ms.to_string());
        }
        let mut child = command.spawn().expect("starting redraft serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap());
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in lines.lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.split("listening on http://").nth(1) {
                    let _ = tx.send(addr.trim().parse::<SocketAddr>().unwrap());
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "redraft serve did not start listening: {}",
                    stderr.lock().unwrap()
                );
            }
        };
        Server {
            child,
            addr,
            stderr,
        }
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until the server has written `needle` to stderr (what it logs after answering
    /// reaches the reading thread a moment later), and returns all it wrote.
    pub fn wait_for_stderr(&self, needle: &str) -> String {
        let started = Instant::now();
        loop {
            let stderr = self.stderr();
            if stderr.contains(needle) {
                return stderr;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the server never wrote {needle:?}: {stderr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).expect("connecting to the server");
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream
    }

    pub fn get(&self, path: &str) -> Response {
        self.request("GET", path, &[], b"")
    }

    pub fn post(&self, path: &str, body: &Value) -> Response {
        self.post_raw(path, body.to_string().as_bytes())
    }

    pub fn post_raw(&self, path: &str, body: &[u8]) -> Response {
        self.request("POST", path, &[("Content-Type", "application/json")], body)
    }

    /// One request on its own connection, read to the end.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let mut stream = self.open(method, path, headers, body);
        let mut body = Vec::new();
        while let Some(chunk) = stream.chunk() {
            body.extend(chunk);
        }
        Response {
            status: stream.status,
            headers: stream.headers,
            body,
        }
    }

    /// Sends a request and reads the response head; the body is read with
    /// [`Streaming::chunk`] / [`Streaming::line`]. Dropping it hangs up.
    pub fn open(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Streaming {
        let mut socket = self.connect();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        socket.write_all(head.as_bytes()).unwrap();
        socket.write_all(body).unwrap();
        Streaming::read_head(socket)
    }

    /// Writes `bytes` as they are on a new connection and reads the response to its end.
    pub fn raw(&self, bytes: &[u8]) -> Response {
        let mut socket = self.connect();
        socket.write_all(bytes).unwrap();
        Later { socket }.finish()
    }

    /// Sends a JSON request and returns without reading the answer: [`Later::finish`] reads it,
    /// dropping it hangs up.
    pub fn open_later(&self, method: &str, path: &str, body: &[u8]) -> Later {
        self.send_later(self.connect(), method, path, body)
    }

    /// [`Server::open_later`] from a slow reader: a connection whose receive buffer is about
    /// `bytes` (set before connecting, so the server sees a small window from the start), which
    /// reads nothing until [`Later::finish`].
    pub fn open_later_with_receive_buffer(
        &self,
        bytes: usize,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Later {
        self.send_later(small_window(self.addr, bytes), method, path, body)
    }

    fn send_later(&self, mut socket: TcpStream, method: &str, path: &str, body: &[u8]) -> Later {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        socket.write_all(head.as_bytes()).unwrap();
        socket.write_all(body).unwrap();
        Later { socket }
    }

    /// The value of one series in `/metrics` (its name with labels, as written there); 0 when
    /// it is not there yet.
    pub fn metric(&self, series: &str) -> f64 {
        let text = self.get("/metrics").text();
        text.lines()
            .find_map(|line| {
                let (name, value) = line.rsplit_once(' ')?;
                (name == series).then(|| value.parse::<f64>().unwrap())
            })
            .unwrap_or(0.0)
    }

    /// Waits until `series` reaches `value` (the server works on its own thread).
    pub fn wait_for_metric(&self, series: &str, value: f64) {
        let started = Instant::now();
        while self.metric(series) < value {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{series} never reached {value}: {}",
                self.get("/metrics").text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then the exit status (the test fails if it takes over 30 s).
    pub fn terminate(mut self) -> ExitStatus {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.wait(Duration::from_secs(30))
    }

    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < limit,
                "the server did not exit: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A connection to `addr` (IPv4) whose receive buffer is set to `bytes` before it connects
/// (std sets socket options only on a connected socket, after the window is agreed).
fn small_window(addr: SocketAddr, bytes: usize) -> TcpStream {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(v4) = addr else {
        panic!("the test server listens on IPv4 loopback, not {addr}")
    };
    // SAFETY: a socket this function owns, configured and connected with plain values, then
    // handed to `TcpStream`, which closes it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        let size = libc::c_int::try_from(bytes).unwrap();
        let set = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        assert_eq!(set, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
        let mut to: libc::sockaddr_in = std::mem::zeroed();
        to.sin_family = libc::AF_INET as libc::sa_family_t;
        to.sin_port = v4.port().to_be();
        to.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
        let connected = libc::connect(
            fd,
            (&to as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(
            connected,
            0,
            "connecting to {addr}: {}",
            std::io::Error::last_os_error()
        );
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream
    }
}

/// `redraft serve ARGS` that is expected not to start: its exit status and stderr (the test
/// fails if it is still running after 60 s).
pub fn refused_start(args: &[&str], env: &[(&str, &str)]) -> (ExitStatus, String) {
    let mut command = Command::new(crate::cli::redraft_binary());
    command
        .arg("serve")
        .args(["--bind", "127.0.0.1:0"])
        .args(args)
        .env_remove("REDRAFT_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("starting redraft serve");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("redraft serve {args:?} started, and was expected not to");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status, stderr)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request sent and not yet read.
pub struct Later {
    socket: TcpStream,
}

impl Later {
    pub fn finish(self) -> Response {
        let mut stream = Streaming::read_head(self.socket);
        let mut body = Vec::new();
        while let Some(chunk) = stream.chunk() {
            body.extend(chunk);
        }
        Response {
            status: stream.status,
            headers: stream.headers,
            body,
        }
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("a UTF-8 body")
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text()))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// The body as server-sent events: each `data:` payload, in order, comments left out.
    pub fn events(&self) -> Vec<String> {
        let text = self.text();
        assert!(
            text.ends_with("\n\n"),
            "an SSE stream ends an event: {text:?}"
        );
        // A comment (`: keep-alive`, sent while a stream has nothing else) is no event, as
        // for every SSE parser.
        text.split("\n\n")
            .filter(|e| !e.is_empty() && !e.starts_with(':'))
            .map(|event| {
                event
                    .strip_prefix("data: ")
                    .unwrap_or_else(|| panic!("an event that is not `data: `: {event:?}"))
                    .to_string()
            })
            .collect()
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A response being read: head parsed, body in chunks as they arrive.
pub struct Streaming {
    reader: BufReader<TcpStream>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    chunked: bool,
    /// Body bytes still to read without chunking (`None`: until the connection closes).
    remaining: Option<usize>,
    done: bool,
    /// Body bytes read but not yet handed out by [`Streaming::line`].
    pending: Vec<u8>,
}

impl Streaming {
    fn read_head(socket: TcpStream) -> Streaming {
        let mut reader = BufReader::new(socket);
        let mut status_line = String::new();
        reader
            .read_line(&mut status_line)
            .expect("reading the status line");
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
        let chunked = header(&headers, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let remaining = header(&headers, "content-length").map(|v| v.parse().unwrap());
        Streaming {
            reader,
            status,
            headers,
            chunked,
            remaining,
            done: false,
            pending: Vec::new(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// The next piece of the body; `None` at its end.
    pub fn chunk(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        if self.chunked {
            let mut size = String::new();
            if self.reader.read_line(&mut size).unwrap_or(0) == 0 {
                self.done = true;
                return None;
            }
            let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
            let mut data = vec![0; size + 2];
            self.reader.read_exact(&mut data).unwrap();
            data.truncate(size);
            if size == 0 {
                self.done = true;
                return None;
            }
            return Some(data);
        }
        let want = self.remaining.unwrap_or(64 << 10).min(64 << 10);
        if want == 0 {
            self.done = true;
            return None;
        }
        let mut data = vec![0; want];
        let n = self.reader.read(&mut data).unwrap_or(0);
        if n == 0 {
            self.done = true;
            return None;
        }
        data.truncate(n);
        if let Some(remaining) = &mut self.remaining {
            *remaining -= n;
        }
        Some(data)
    }

    /// The next `\n`-terminated line of the body (without it); `None` at the end.
    pub fn line(&mut self) -> Option<String> {
        loop {
            if let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=at).collect();
                return Some(String::from_utf8(line[..at].to_vec()).unwrap());
            }
            match self.chunk() {
                Some(data) => self.pending.extend(data),
                None if self.pending.is_empty() => return None,
                None => return Some(String::from_utf8(std::mem::take(&mut self.pending)).unwrap()),
            }
        }
    }

    /// The next server-sent event's `data:` payload; `None` at the end.
    pub fn event(&mut self) -> Option<String> {
        loop {
            let line = self.line()?;
            if let Some(data) = line.strip_prefix("data: ") {
                return Some(data.to_string());
            }
        }
    }
}
