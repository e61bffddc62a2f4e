//! The base protocol's framing (`Content-Length: N\r\n\r\n` + N bytes) read from bytes that may
//! be anything: a decoder that never gives up. Headers are read tolerantly (any case, any
//! `Content-Type`, `\n` or `\r\n` line ends); what cannot be framed is skipped up to the next
//! `Content-Length` header, and a body whose `Content-Length` overstated it is cut where the
//! next frame's header begins, so the frames after it are not lost.
//!
//! A run of skipped bytes is reported once: when the skipping stops (the next frame begins, or
//! the input ends), or, if the input at hand runs dry first, then, with the bytes skipped so far
//! ([`Decoder::skipped_so_far`]), so that a lone piece of junk is answered at once. The rest of
//! that run, up to the next frame, is dropped without another report, however many reads it
//! takes to arrive (the body of a 300 MB message over [`MAX_BODY_BYTES`] came as thousands of
//! reads, each reported). Only a header of its own in it (a refused `Content-Length`, a header
//! block without one) is reported again: that is another message lost, not more of the same.
//!
//! No I/O and no JSON here: bytes in ([`Decoder::feed`], [`Decoder::end`]), frames out
//! ([`Decoder::next`], [`Decoder::skipped_so_far`]).

/// The largest body accepted. Far above any document an editor sends (the tests open 50 MB);
/// a larger `Content-Length` comes from a broken or hostile client, and waiting for that many
/// bytes would only hold up every message after it.
pub const MAX_BODY_BYTES: u64 = 256 << 20;

/// A header block is a few dozen bytes; this many without its end is not a header.
const MAX_HEADER_BYTES: usize = 8 << 10;

const CONTENT_LENGTH: &[u8] = b"content-length";

/// What the decoder found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A body, exactly as its `Content-Length` framed it.
    Body(Vec<u8>),
    /// A body that ended before its `Content-Length` did: the next frame's header began inside
    /// it (`declared` is the length the header claimed).
    ShortBody { body: Vec<u8>, declared: u64 },
    /// `bytes` bytes that could not be framed were dropped.
    Skipped { bytes: usize, reason: Skip },
}

/// Why bytes were skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Bytes where a header should start that are not one.
    NotAHeader,
    /// A header block without a `Content-Length`.
    MissingContentLength,
    /// A `Content-Length` that is not a decimal number.
    BadContentLength,
    /// A `Content-Length` over [`MAX_BODY_BYTES`]; `None`: 2^64 or more, which no `u64` holds
    /// (reported as that, not as `u64::MAX`).
    TooLong(Option<u64>),
    /// The input ended inside a frame.
    Truncated,
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::NotAHeader => f.write_str("not a message header"),
            Skip::MissingContentLength => f.write_str("a header without Content-Length"),
            Skip::BadContentLength => f.write_str("a Content-Length that is not a number"),
            Skip::TooLong(Some(n)) => write!(
                f,
                "a Content-Length of {n} bytes, over the limit of {MAX_BODY_BYTES}"
            ),
            Skip::TooLong(None) => write!(
                f,
                "a Content-Length of 2^64 bytes or more, over the limit of {MAX_BODY_BYTES}"
            ),
            Skip::Truncated => f.write_str("a frame cut short by the end of input"),
        }
    }
}

#[derive(Debug)]
enum State {
    Header,
    /// Reading a body of `len` bytes that starts at `start`; `scanned` bytes of it were already
    /// searched for a header that would cut it short.
    Body {
        len: usize,
        declared: u64,
        scanned: usize,
    },
}

/// Bytes in, frames out; see the module comment.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    start: usize,
    state: State,
    ended: bool,
    /// Bytes skipped since the last frame or report, reported once the skipping stops (or by
    /// [`Decoder::skipped_so_far`]).
    skipping: Option<(usize, Skip)>,
    /// The run of skipped bytes under way was reported when the input ran dry: junk skipped
    /// before the next frame is the rest of it, not reported again.
    reported: bool,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            buf: Vec::new(),
            start: 0,
            state: State::Header,
            ended: false,
            skipping: None,
            reported: false,
        }
    }
}

enum Header {
    /// A complete header block of `len` bytes.
    Complete {
        len: usize,
        length: Result<u64, Skip>,
    },
    /// The block may still be completed by more input.
    Partial,
    /// The bytes cannot be a header block.
    Garbage,
}

impl Decoder {
    pub fn feed(&mut self, bytes: &[u8]) {
        // Consumed bytes are dropped before appending, so the buffer holds at most one frame
        // and what arrived after it.
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The bytes skipped since the last frame or report, if any, reported now: for when
    /// [`Decoder::next`] has no frame until more input comes, so junk is answered before the
    /// client sends anything else rather than with the next frame. They are dropped already;
    /// what waits in the buffer (a header still arriving, perhaps) is not among them. Junk
    /// skipped after this, up to the next frame, is the rest of the same run and is not
    /// reported (see the module comment), so a run is one report however it arrives.
    pub fn skipped_so_far(&mut self) -> Option<Frame> {
        let report = self.skipping.take()?;
        self.reported = true;
        Some(skipped(report))
    }

    /// No more input: what is left is reported by the next calls to [`Decoder::next`].
    pub fn end(&mut self) {
        self.ended = true;
    }

    /// The next frame, or `None` until more input arrives (or for good, after [`Decoder::end`]).
    pub fn next(&mut self) -> Option<Frame> {
        loop {
            match self.state {
                State::Header => {
                    // Blank lines between frames are harmless; some clients send them. Inside
                    // skipped bytes they count as skipped.
                    while self
                        .buf
                        .get(self.start)
                        .is_some_and(u8::is_ascii_whitespace)
                    {
                        self.start += 1;
                        if let Some((bytes, _)) = &mut self.skipping {
                            *bytes += 1;
                        }
                    }
                    let rest = &self.buf[self.start..];
                    if rest.is_empty() {
                        return self
                            .ended
                            .then(|| self.skipping.take())
                            .flatten()
                            .map(skipped);
                    }
                    match parse_header(rest) {
                        Header::Complete { len, length: Ok(n) } if n <= MAX_BODY_BYTES => {
                            if let Some(frame) = self.skipping.take() {
                                return Some(skipped(frame));
                            }
                            self.reported = false;
                            self.start += len;
                            self.state = State::Body {
                                len: n as usize,
                                declared: n,
                                scanned: 0,
                            };
                        }
                        Header::Complete { length, .. } => {
                            // A Content-Length refused on its own (too long, no number) is
                            // another message lost: the junk before it is reported first, and
                            // the header gets its own report (it was counted into the junk's,
                            // its reason lost). A block without one may be junk that reads as
                            // a header (`garbage` before a frame split across reads): it stays
                            // in the run.
                            let refused = matches!(
                                length,
                                Ok(_) | Err(Skip::BadContentLength | Skip::TooLong(_))
                            );
                            if let Some(frame) = self.skipping.take_if(|_| refused) {
                                return Some(skipped(frame));
                            }
                            let reason = match length {
                                Ok(n) => Skip::TooLong(Some(n)),
                                Err(reason) => reason,
                            };
                            self.resync(reason);
                        }
                        Header::Garbage => self.resync(Skip::NotAHeader),
                        Header::Partial if rest.len() > MAX_HEADER_BYTES => {
                            self.resync(Skip::NotAHeader);
                        }
                        Header::Partial if self.ended => {
                            let bytes = rest.len();
                            self.start = self.buf.len();
                            self.note_skipped(bytes, Skip::Truncated);
                        }
                        Header::Partial => return None,
                    }
                }
                State::Body {
                    len,
                    declared,
                    scanned,
                } => {
                    let available = self.buf.len() - self.start;
                    let upto = available.min(len);
                    let body = &self.buf[self.start..self.start + upto];
                    if let Some(cut) = inner_header(body, scanned) {
                        let body = body[..cut].to_vec();
                        self.start += cut;
                        self.state = State::Header;
                        return Some(Frame::ShortBody { body, declared });
                    }
                    if available >= len {
                        let body = body.to_vec();
                        self.start += len;
                        self.state = State::Header;
                        return Some(Frame::Body(body));
                    }
                    if self.ended {
                        self.start = self.buf.len();
                        self.state = State::Header;
                        self.note_skipped(available, Skip::Truncated);
                        continue;
                    }
                    self.state = State::Body {
                        len,
                        declared,
                        scanned: upto,
                    };
                    return None;
                }
            }
        }
    }

    /// Drops bytes up to the next `Content-Length` after the current position (or all but a
    /// tail that may be the start of one).
    fn resync(&mut self, reason: Skip) {
        let rest = &self.buf[self.start..];
        let skip = match find_ignore_case(&rest[1..], CONTENT_LENGTH) {
            Some(at) => at + 1,
            None if self.ended => rest.len(),
            // Only the start of a `Content-Length` waits for the read that completes it: more
            // of the junk would be read as the start of that frame's header (a `name:` in it
            // made the frame's header a block without `Content-Length`, reported again).
            None => rest.len() - content_length_begun(&rest[1..]),
        };
        self.start += skip;
        self.note_skipped(skip, reason);
    }

    fn note_skipped(&mut self, bytes: usize, reason: Skip) {
        if self.reported {
            // A header refused on its own is another message lost; anything else is the rest
            // of the run already reported.
            let header = matches!(
                reason,
                Skip::MissingContentLength | Skip::BadContentLength | Skip::TooLong(_)
            );
            if !header {
                return;
            }
            self.reported = false;
        }
        let entry = self.skipping.get_or_insert((0, reason));
        entry.0 += bytes;
    }
}

fn skipped((bytes, reason): (usize, Skip)) -> Frame {
    Frame::Skipped { bytes, reason }
}

fn parse_header(bytes: &[u8]) -> Header {
    let mut pos = 0;
    let mut length = Err(Skip::MissingContentLength);
    loop {
        let rest = &bytes[pos..];
        let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
            // An unfinished line is already garbage if its name cannot be a header name, or
            // is empty before its colon (a lone `\r` may be the start of the line end). Junk
            // taken for a header under way would be answered only when more input came.
            let line = rest.strip_suffix(b"\r").unwrap_or(rest);
            let colon = line.iter().position(|&b| b == b':');
            let name = line[..colon.unwrap_or(line.len())].trim_ascii();
            if !name.iter().all(|&b| is_name_byte(b)) || (colon.is_some() && name.is_empty()) {
                return Header::Garbage;
            }
            return Header::Partial;
        };
        let line = &rest[..newline];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        pos += newline + 1;
        if line.is_empty() {
            return Header::Complete { len: pos, length };
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Header::Garbage;
        };
        let name = line[..colon].trim_ascii();
        if name.is_empty() || !name.iter().all(|&b| is_name_byte(b)) {
            return Header::Garbage;
        }
        if name.eq_ignore_ascii_case(CONTENT_LENGTH) {
            let value = line[colon + 1..].trim_ascii();
            length = if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
                // Too many digits to be a length is "too long", not "not a number".
                std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .ok_or(Skip::TooLong(None))
            } else {
                Err(Skip::BadContentLength)
            };
        }
    }
}

/// RFC 7230 token characters (spaces around a name are trimmed before this is asked).
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Where a `Content-Length: N` header line starts inside `body`, searching the lines that end
/// at or after `from`. Valid JSON cannot hold one: a raw line break may only stand between
/// tokens, and a header name is not a token, so a match means the body was cut short there.
fn inner_header(body: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(offset) = body[at..].iter().position(|&b| b == b'\n') {
        let newline = at + offset;
        if let Some(start) = header_line_ending_at(&body[..newline]) {
            return Some(start);
        }
        at = newline + 1;
    }
    None
}

/// If `before` ends with `content-length: <digits>` (optionally `\r`), where that starts.
fn header_line_ending_at(before: &[u8]) -> Option<usize> {
    let mut end = before.len();
    if before[..end].ends_with(b"\r") {
        end -= 1;
    }
    let digits = before[..end]
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 {
        return None;
    }
    end -= digits;
    end -= before[..end]
        .iter()
        .rev()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    end = end.checked_sub(1).filter(|&colon| before[colon] == b':')?;
    end -= before[..end]
        .iter()
        .rev()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    let start = end.checked_sub(CONTENT_LENGTH.len())?;
    before[start..end]
        .eq_ignore_ascii_case(CONTENT_LENGTH)
        .then_some(start)
}

/// How many bytes at the end of `bytes` a `Content-Length` (not all of it) starts with.
fn content_length_begun(bytes: &[u8]) -> usize {
    (1..CONTENT_LENGTH.len())
        .rev()
        .find(|&len| {
            bytes.len() >= len
                && bytes[bytes.len() - len..].eq_ignore_ascii_case(&CONTENT_LENGTH[..len])
        })
        .unwrap_or(0)
}

fn find_ignore_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    /// Everything the decoder makes of `input`, fed in pieces of `chunk` bytes.
    fn decode(input: &[u8], chunk: usize) -> Vec<Frame> {
        let mut decoder = Decoder::default();
        let mut frames = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            decoder.feed(piece);
            frames.extend(std::iter::from_fn(|| decoder.next()));
        }
        decoder.end();
        frames.extend(std::iter::from_fn(|| decoder.next()));
        frames
    }

    /// The same frames whatever the chunking: one byte at a time, a few, all at once.
    fn check(input: &[u8], expect: &[Frame]) {
        for chunk in [1, 3, 7, 64, input.len()] {
            assert_eq!(decode(input, chunk), expect, "chunk {chunk}");
        }
    }

    fn body(text: &str) -> Frame {
        Frame::Body(text.as_bytes().to_vec())
    }

    #[test]
    fn well_formed_frames_and_tolerated_headers() {
        let mut input = frame("{}");
        input.extend(b"content-length:3\nContent-Type: application/vscode-jsonrpc\n\n[1]");
        input.extend(b"\r\n\r\n");
        input.extend(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH :  2 \r\n\r\nab");
        input.extend(frame(""));
        check(&input, &[body("{}"), body("[1]"), body("ab"), body("")]);
    }

    #[test]
    fn garbage_and_bad_headers_are_skipped_up_to_the_next_frame() {
        let mut input = b"hello garbage".to_vec();
        input.extend(frame("1"));
        input.extend(b"Content-Type: text/plain\r\n\r\n{\"lost\":1}");
        input.extend(frame("2"));
        input.extend(b"Content-Length: twelve\r\n\r\n");
        input.extend(frame("3"));
        input.extend(b"Content-Length: 99999999999999999999999\r\n\r\n");
        input.extend(frame("4"));
        check(
            &input,
            &[
                Frame::Skipped {
                    bytes: 13,
                    reason: Skip::NotAHeader,
                },
                body("1"),
                Frame::Skipped {
                    bytes: 38,
                    reason: Skip::MissingContentLength,
                },
                body("2"),
                Frame::Skipped {
                    bytes: 26,
                    reason: Skip::BadContentLength,
                },
                body("3"),
                Frame::Skipped {
                    bytes: 43,
                    reason: Skip::TooLong(None),
                },
                body("4"),
            ],
        );
    }

    /// Junk, then a header refused on its own, then a message: two reports, the header's with
    /// its own reason (it was counted into the junk's "not a message header").
    #[test]
    fn a_refused_header_after_junk_is_reported_on_its_own() {
        for (header, reason) in [
            (
                &b"Content-Length: 300000000\r\n\r\n"[..],
                Skip::TooLong(Some(300_000_000)),
            ),
            (b"Content-Length: -5\r\n\r\n", Skip::BadContentLength),
            (
                b"Content-Length: 99999999999999999999999\r\n\r\n",
                Skip::TooLong(None),
            ),
        ] {
            let mut input = b"garbage\r\n".to_vec();
            input.extend(header);
            input.extend(frame("1"));
            for chunk in [1, 7, input.len()] {
                assert_eq!(
                    decode(&input, chunk),
                    [
                        Frame::Skipped {
                            bytes: 9,
                            reason: Skip::NotAHeader,
                        },
                        Frame::Skipped {
                            bytes: header.len(),
                            reason,
                        },
                        body("1"),
                    ],
                    "{chunk}-byte reads of {:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
    }

    #[test]
    fn an_overstated_length_is_cut_at_the_next_header() {
        let first = r#"{"id":1}"#;
        let mut input = format!("Content-Length: 500\r\n\r\n{first}").into_bytes();
        input.extend(frame("{\"id\":2}"));
        input.extend(frame("{\"id\":3}"));
        check(
            &input,
            &[
                Frame::ShortBody {
                    body: first.as_bytes().to_vec(),
                    declared: 500,
                },
                body("{\"id\":2}"),
                body("{\"id\":3}"),
            ],
        );
        // Text that merely mentions a header, inside a JSON string, is not one.
        let text = r#"{"text":"Content-Length: 5\n\nabc"}"#;
        check(&frame(text), &[body(text)]);
    }

    /// A length of 2^64 or more is said to be that: it was reported as u64::MAX, a number the
    /// client never sent.
    #[test]
    fn a_length_no_number_holds_is_not_reported_as_another() {
        let mut input = b"Content-Length: 99999999999999999999999\r\n\r\n".to_vec();
        input.extend(frame("{}"));
        input.extend(b"Content-Length: 300000000\r\n\r\n");
        input.extend(frame("{}"));
        let reasons: Vec<String> = decode(&input, input.len())
            .iter()
            .filter_map(|frame| match frame {
                Frame::Skipped { reason, .. } => Some(reason.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(
            reasons,
            [
                "a Content-Length of 2^64 bytes or more, over the limit of 268435456",
                "a Content-Length of 300000000 bytes, over the limit of 268435456",
            ]
        );
    }

    /// Junk is reported once the input at hand is used up, not when the next frame comes (the
    /// client was answered one message late); what may still be the start of a header waits.
    #[test]
    fn what_was_skipped_is_reported_when_the_input_runs_dry() {
        let mut decoder = Decoder::default();
        decoder.feed(b"\x00\x01 garbage {}}}\r\n\r\n\xff\xfe");
        assert_eq!(decoder.next(), None);
        assert_eq!(
            decoder.skipped_so_far(),
            Some(Frame::Skipped {
                bytes: 21,
                reason: Skip::NotAHeader
            })
        );
        assert_eq!(decoder.skipped_so_far(), None, "reported once");
        decoder.feed(&frame("{}"));
        assert_eq!(decoder.next(), Some(body("{}")));
        // A line that starts with a colon is no header under way: all of it is junk now.
        decoder.feed(b"x\n:\"2.0\"}");
        assert_eq!(decoder.next(), None);
        assert_eq!(
            decoder.skipped_so_far(),
            Some(Frame::Skipped {
                bytes: 9,
                reason: Skip::NotAHeader
            })
        );
        decoder.feed(&frame("{}"));
        assert_eq!(decoder.next(), Some(body("{}")));
        decoder.feed(b"junk\r\nContent-Len");
        assert_eq!(decoder.next(), None);
        assert_eq!(
            decoder.skipped_so_far(),
            Some(Frame::Skipped {
                bytes: 6,
                reason: Skip::NotAHeader
            }),
            "the junk, not the header under way"
        );
        decoder.feed(&frame("{}")["Content-Len".len()..]);
        assert_eq!(decoder.next(), Some(body("{}")));
        assert_eq!(decoder.next(), None);
        assert_eq!(decoder.skipped_so_far(), None);
    }

    /// What the stdin reader makes of one read: the frames, then what was skipped so far.
    fn read(decoder: &mut Decoder, piece: &[u8]) -> Vec<Frame> {
        decoder.feed(piece);
        std::iter::from_fn(|| decoder.next().or_else(|| decoder.skipped_so_far())).collect()
    }

    /// A run of skipped bytes is one report however many reads bring it: a message over the
    /// limit (a 300 MB `didOpen`), or one whose length no number holds, was reported once per
    /// read of its body, thousands of times. It is reported at the first read (junk alone is
    /// answered at once) and the rest of it goes unreported up to the next frame; a refused
    /// header in it is another message lost, reported on its own.
    #[test]
    fn a_run_of_skipped_bytes_is_reported_once_however_many_reads_bring_it() {
        let text = b"    let total = values.iter().sum::<u32>();\\n".repeat(100);
        for (header, reason) in [
            (
                &b"Content-Length: 300000000\r\n\r\n"[..],
                Skip::TooLong(Some(300_000_000)),
            ),
            (
                b"Content-Length: 99999999999999999999999\r\n\r\n",
                Skip::TooLong(None),
            ),
            (b"\x00garbage", Skip::NotAHeader),
        ] {
            let mut decoder = Decoder::default();
            let mut frames = read(&mut decoder, header);
            frames.extend(read(
                &mut decoder,
                br#"{"jsonrpc":"2.0","method":"didOpen","#,
            ));
            for _ in 0..1000 {
                frames.extend(read(&mut decoder, &text));
            }
            assert!(
                matches!(frames[..], [Frame::Skipped { reason: r, .. }] if r == reason),
                "{reason:?}: {frames:?}"
            );
            // The next frame ends the run: it comes alone, and junk after it is a run of its
            // own, answered at once again.
            assert_eq!(read(&mut decoder, &frame("{}")), [body("{}")], "{reason:?}");
            let junk = read(&mut decoder, b"junk\r\n");
            assert_eq!(
                junk,
                [Frame::Skipped {
                    bytes: 6,
                    reason: Skip::NotAHeader
                }]
            );
        }

        let mut decoder = Decoder::default();
        assert_eq!(read(&mut decoder, b"junk\r\n").len(), 1);
        assert_eq!(read(&mut decoder, b"more junk\r\n"), []);
        let refused = read(&mut decoder, b"Content-Length: twelve\r\n\r\n");
        assert_eq!(
            refused,
            [Frame::Skipped {
                bytes: 26,
                reason: Skip::BadContentLength
            }],
            "a header of its own in the run"
        );
        assert_eq!(read(&mut decoder, &text), []);
        decoder.end();
        assert_eq!(decoder.next(), None, "the rest, up to the end of input");
    }

    #[test]
    fn the_end_of_input_inside_a_frame_is_reported() {
        let mut input = frame("{}");
        input.extend(b"Content-Length: 10\r\n\r\n{\"a\"");
        check(
            &input,
            &[
                body("{}"),
                Frame::Skipped {
                    bytes: 4,
                    reason: Skip::Truncated,
                },
            ],
        );
        check(
            b"Content-Len",
            &[Frame::Skipped {
                bytes: 11,
                reason: Skip::Truncated,
            }],
        );
    }

    #[test]
    fn random_bytes_never_stop_the_decoder() {
        // A fixed-seed xorshift: the same noise every run.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut noise = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let good = frame("{\"ok\":1}");
        for _ in 0..2000 {
            let mut input = Vec::new();
            for _ in 0..noise() % 64 {
                match noise() % 10 {
                    0 => input.push(b'\n'),
                    1 => input.extend(b"\r\n"),
                    2 => input.push(b':'),
                    3 => input.extend(b"Content-Length: "),
                    4 => input.extend((noise() % 40).to_string().as_bytes()),
                    _ => input.push(noise() as u8),
                }
            }
            // Noise may swallow the first good frame (a header in it whose length ends inside
            // the frame's first line); never the second.
            input.extend(&good);
            input.extend(&good);
            let frames = decode(&input, (noise() % 16) as usize + 1);
            assert_eq!(
                frames.last(),
                Some(&body("{\"ok\":1}")),
                "{input:?} -> {frames:?}"
            );
        }
    }
}
