//! Unix-socket connections only (SPEC E1): gRPC clients put the socket's name in the HTTP/2
//! `:authority` (grpc-go as in etcdctl 3.4 sends `/run/x.sock`, or `unix:///run/x.sock` for
//! `endpoint status`), which h2's server refuses as malformed, resetting every stream. Between
//! the socket and h2, `LocalAuthority` rewrites the `:authority` of each header block the client
//! sends to `localhost` (see below); every other frame, and the client preface, passes byte for
//! byte.
//!
//! HPACK is stateful, and h2 decodes with its own dynamic table what the client encoded with
//! its own. Each block is decoded with the client's table (`hpack`) and passed on as the client
//! wrote it, representation for representation, but for `:authority`: a literal becomes one
//! naming `localhost`, except a literal the client adds to its table, which carries a stand-in
//! of the same length (`localhost`, cut or followed by dots) so that h2's table keeps entries
//! of the same sizes, evicts alike and so stays index for index the client's; a reference to
//! such an entry then passes unchanged. Bounds are h2's as hyper configures it, whose settings
//! `serve` keeps: frames of a header block up to 16 KiB, at most 5 CONTINUATION frames, a 4 KiB
//! dynamic table; a block passed on is at most its own size plus one authority. Anything
//! malformed ends this connection with an error, as h2 would end it; what h2 judges per stream
//! (a field list over its 16 KiB, a missing method) it still judges.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

use crate::hpack::{Decoder, Kind, Malformed, Rep};

/// What every rewritten `:authority` says.
pub(crate) const AUTHORITY: &[u8] = b"localhost";
/// "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n": passed through as it is (h2 checks it).
const PREFACE_LEN: usize = 24;
const HEAD_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE as h2 advertises it (hyper's default; `serve` sets no other).
const MAX_FRAME: usize = 16_384;
/// h2's bound for that frame size and its 16 KiB field list.
const MAX_CONTINUATIONS: usize = 5;
/// SETTINGS_HEADER_TABLE_SIZE as h2 advertises it (the protocol's default).
const TABLE_SIZE: usize = 4096;

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// Buffers kept between blocks shrink back to this after a larger block.
const KEEP: usize = 16 * 1024;

/// A HEADERS frame whose block continues (its fragment so far in `Rewriter::fragment`).
struct Block {
    stream: u32,
    /// END_STREAM and PRIORITY of the HEADERS frame.
    flags: u8,
    priority: [u8; 5],
    continuations: usize,
}

/// The frame of a header block being read (its payload so far in `Rewriter::payload`).
#[derive(Clone, Copy)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    len: usize,
}

/// The client-to-server byte stream's rewriting, fed in whatever pieces the socket yields.
pub(crate) struct Rewriter {
    decoder: Decoder,
    /// Bytes that pass unchanged before the next frame header: the rest of the preface or of
    /// a frame outside header blocks. The caller moves them (`feed` stops while it is not 0).
    pass: usize,
    head: [u8; HEAD_LEN],
    head_len: usize,
    frame: Option<Frame>,
    payload: Vec<u8>,
    block: Option<Block>,
    fragment: Vec<u8>,
    /// The block written anew.
    fields: Vec<u8>,
    /// Octets of the preface seen so far (`PREFACE_LEN` once checked).
    preface_seen: usize,
}

impl Default for Rewriter {
    fn default() -> Rewriter {
        Rewriter {
            decoder: Decoder::new(TABLE_SIZE),
            pass: PREFACE_LEN,
            head: [0; HEAD_LEN],
            head_len: 0,
            frame: None,
            payload: Vec::new(),
            block: None,
            fragment: Vec::new(),
            fields: Vec::new(),
            preface_seen: 0,
        }
    }
}

fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// An HPACK integer with a 7-bit prefix after the bits of `first`.
fn integer(out: &mut Vec<u8>, first: u8, mut v: usize) {
    if v < 0x7f {
        out.push(first | v as u8);
        return;
    }
    out.push(first | 0x7f);
    v -= 0x7f;
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `n` octets that h2 takes as an authority when `n` > 0: `localhost`, cut short or followed
/// by dots. It stands in for a client's authority in an entry h2 adds to its table, where it
/// must take the same room as the client's (RFC 7541 4.1) so both tables evict alike.
fn stand_in(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&AUTHORITY[..n.min(AUTHORITY.len())]);
    out.extend(std::iter::repeat_n(b'.', n.saturating_sub(AUTHORITY.len())));
}

/// `r` as h2 is to read it: the client's octets, but for `:authority`.
fn rewritten(out: &mut Vec<u8>, r: &Rep<'_>) {
    let authority = r.name == b":authority";
    // An indexed `:authority` of the dynamic table is a stand-in in h2's table; the static
    // entry is empty.
    if !authority || (r.kind == Kind::Indexed && r.value.is_some_and(|v| !v.is_empty())) {
        out.extend_from_slice(r.raw);
        return;
    }
    // Literals naming the static `:authority` entry (index 1).
    let (first, n) = match r.kind {
        Kind::Incremental => (0x41, r.value.map_or(0, <[u8]>::len)),
        Kind::Never => (0x11, AUTHORITY.len()),
        _ => (0x01, AUTHORITY.len()),
    };
    out.push(first);
    integer(out, 0, n);
    stand_in(out, n);
}

impl Rewriter {
    /// Bytes to pass through unchanged before `feed` goes on.
    pub(crate) fn passing(&self) -> usize {
        self.pass
    }

    /// The connection's first octets, before they pass: a connection that does not open with
    /// HTTP/2's preface is HTTP/1.1 (`/health`, `/metrics`, E16), whose bytes all pass unread.
    pub(crate) fn check_preface(&mut self, bytes: &[u8]) {
        const PREFACE: &[u8; PREFACE_LEN] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        if self.preface_seen >= PREFACE_LEN {
            return;
        }
        let n = bytes.len().min(PREFACE_LEN - self.preface_seen);
        if bytes[..n] == PREFACE[self.preface_seen..self.preface_seen + n] {
            self.preface_seen += n;
        } else {
            self.preface_seen = PREFACE_LEN;
            self.pass = usize::MAX;
        }
    }

    /// `n` of the `passing` bytes went through.
    pub(crate) fn passed(&mut self, n: usize) {
        self.pass -= n.min(self.pass);
    }

    /// All of `input` to `out`, the passing bytes copied (`LocalAuthority` reads those into
    /// h2's buffer instead). For tests and the benchmark.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn rewrite_all(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), Malformed> {
        while !input.is_empty() {
            self.check_preface(input);
            let n = self.passing().min(input.len());
            if n > 0 {
                out.extend_from_slice(&input[..n]);
                self.passed(n);
                input = &input[n..];
            } else {
                input = &input[self.feed(input, out)?..];
            }
        }
        Ok(())
    }

    /// Reads `input` as far as it can, appending what the server is to read to `out`; returns
    /// how much it consumed. It stops early only when bytes are `passing`.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, Malformed> {
        let mut used = 0;
        while self.pass == 0 {
            if let Some(f) = self.frame {
                let take = (f.len - self.payload.len()).min(input.len() - used);
                self.payload.extend_from_slice(&input[used..used + take]);
                used += take;
                if self.payload.len() < f.len {
                    break;
                }
                self.frame = None;
                self.frame_read(f, out)?;
                continue;
            }
            let take = (HEAD_LEN - self.head_len).min(input.len() - used);
            self.head[self.head_len..self.head_len + take]
                .copy_from_slice(&input[used..used + take]);
            self.head_len += take;
            used += take;
            if self.head_len < HEAD_LEN {
                break;
            }
            self.head_len = 0;
            self.frame_head(out)?;
        }
        Ok(used)
    }

    fn frame_head(&mut self, out: &mut Vec<u8>) -> Result<(), Malformed> {
        let h = self.head;
        let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        let (kind, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        let in_block = self.block.as_ref().map(|b| b.stream);
        match (kind, in_block) {
            (HEADERS, None) => {}
            (CONTINUATION, Some(s)) if s == stream => {}
            (_, Some(_)) => return Err(Malformed("a frame inside a header block")),
            // Anything else, a stray CONTINUATION too, is h2's to judge.
            (_, None) => {
                out.extend_from_slice(&h);
                self.pass = len;
                return Ok(());
            }
        }
        if len > MAX_FRAME {
            return Err(Malformed("a header block frame over the frame size"));
        }
        self.payload.clear();
        self.payload.reserve_exact(len);
        self.frame = Some(Frame {
            kind,
            flags,
            stream,
            len,
        });
        Ok(())
    }

    fn frame_read(&mut self, f: Frame, out: &mut Vec<u8>) -> Result<(), Malformed> {
        let short = || Malformed("a HEADERS frame shorter than its padding and priority");
        if f.kind == HEADERS {
            let mut p = &self.payload[..];
            let mut pad = 0;
            if f.flags & PADDED != 0 {
                (pad, p) = p
                    .split_first()
                    .map(|(n, r)| (usize::from(*n), r))
                    .ok_or_else(short)?;
            }
            let mut priority = [0; 5];
            if f.flags & PRIORITY != 0 {
                priority.copy_from_slice(p.get(..5).ok_or_else(short)?);
                p = &p[5..];
            }
            let keep = p.len().checked_sub(pad).ok_or_else(short)?;
            self.fragment.clear();
            self.fragment.extend_from_slice(&p[..keep]);
            self.block = Some(Block {
                stream: f.stream,
                flags: f.flags & (END_STREAM | PRIORITY),
                priority,
                continuations: 0,
            });
        } else {
            // `frame_head` takes a CONTINUATION for a header block only inside one.
            let b = self
                .block
                .as_mut()
                .ok_or(Malformed("CONTINUATION outside a block"))?;
            b.continuations += 1;
            if b.continuations > MAX_CONTINUATIONS {
                return Err(Malformed("too many CONTINUATION frames"));
            }
            self.fragment.extend_from_slice(&self.payload);
        }
        if f.flags & END_HEADERS != 0 {
            if let Some(b) = self.block.take() {
                self.rewrite(b, out)?;
            }
        }
        Ok(())
    }

    /// The block as h2 is to read it, in frames h2 accepts: the client's representations but
    /// for `:authority`, so h2's table holds what the client's does but for authorities, which
    /// take the same room.
    fn rewrite(&mut self, b: Block, out: &mut Vec<u8>) -> Result<(), Malformed> {
        let Rewriter {
            decoder,
            fragment,
            fields,
            ..
        } = self;
        fields.clear();
        let mut authorities = 0;
        decoder.decode(fragment, Some(b":authority"), |r| {
            if r.name == b":authority" {
                // h2 refuses a second one anyway; refused here it cannot make a block grow.
                authorities += 1;
                if authorities > 1 {
                    return Err(Malformed("two :authority fields in one block"));
                }
            }
            rewritten(fields, &r);
            Ok(())
        })?;
        let lead = if b.flags & PRIORITY != 0 { 5 } else { 0 };
        let mut rest = &fields[..];
        let first = rest.len().min(MAX_FRAME - lead);
        let end = |done: bool| if done { END_HEADERS } else { 0 };
        frame_head(
            out,
            lead + first,
            HEADERS,
            b.flags | end(first == rest.len()),
            b.stream,
        );
        out.extend_from_slice(&b.priority[..lead]);
        out.extend_from_slice(&rest[..first]);
        rest = &rest[first..];
        while !rest.is_empty() {
            let n = rest.len().min(MAX_FRAME);
            frame_head(out, n, CONTINUATION, end(n == rest.len()), b.stream);
            out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        for buf in [fields, fragment] {
            buf.clear();
            buf.shrink_to(KEEP);
        }
        Ok(())
    }
}

/// A unix-socket connection as h2 reads it: header blocks rewritten (see the module).
pub(crate) struct LocalAuthority<S> {
    io: S,
    rw: Rewriter,
    /// Read from the socket, not yet fed: `input[start..end]`.
    input: Box<[u8]>,
    start: usize,
    end: usize,
    /// Rewritten, not yet read by h2: `out[out_at..]`.
    out: Vec<u8>,
    out_at: usize,
    /// Why the client's stream cannot be read on, once that is so.
    failed: Option<Malformed>,
}

impl<S> LocalAuthority<S> {
    pub(crate) fn new(io: S) -> LocalAuthority<S> {
        LocalAuthority {
            io,
            rw: Rewriter::default(),
            input: vec![0; 8192].into_boxed_slice(),
            start: 0,
            end: 0,
            out: Vec::new(),
            out_at: 0,
            failed: None,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for LocalAuthority<S> {
    /// Fills `buf` as far as what the socket has already given allows, so that h2 reads a
    /// request's HEADERS and DATA in one call as it would from the socket itself.
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let some = |buf: &ReadBuf<'_>| buf.filled().len() > before;
        while buf.remaining() > 0 {
            if me.out_at < me.out.len() {
                let n = buf.remaining().min(me.out.len() - me.out_at);
                buf.put_slice(&me.out[me.out_at..me.out_at + n]);
                me.out_at += n;
                if me.out_at == me.out.len() {
                    me.out.clear();
                    me.out_at = 0;
                }
                continue;
            }
            // What came before the malformed part is read first; then the error, every time.
            if let Some(m) = &me.failed {
                if some(buf) {
                    break;
                }
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, m.0)));
            }
            let pass = me.rw.passing();
            if me.start < me.end {
                if pass > 0 {
                    me.rw.check_preface(&me.input[me.start..me.end]);
                    let n = me.rw.passing().min(me.end - me.start).min(buf.remaining());
                    buf.put_slice(&me.input[me.start..me.start + n]);
                    me.start += n;
                    me.rw.passed(n);
                    continue;
                }
                match me.rw.feed(&me.input[me.start..me.end], &mut me.out) {
                    Ok(used) => me.start += used,
                    Err(m) => {
                        tracing::debug!("unix socket client: {m}; closing the connection");
                        me.failed = Some(m);
                    }
                }
                continue;
            }
            if some(buf) {
                // Nothing more without reading the socket: h2 gets what there is.
                break;
            }
            if pass >= me.input.len() {
                // Straight into h2's buffer: a large DATA frame is not copied twice.
                let want = pass.min(buf.remaining());
                let mut direct = ReadBuf::new(buf.initialize_unfilled_to(want));
                ready!(Pin::new(&mut me.io).poll_read(cx, &mut direct))?;
                let n = direct.filled().len();
                buf.advance(n);
                me.rw.passed(n);
                break;
            }
            let mut read = ReadBuf::new(&mut me.input);
            ready!(Pin::new(&mut me.io).poll_read(cx, &mut read))?;
            let n = read.filled().len();
            if n == 0 {
                // The client closed; a frame it left unfinished is dropped, as h2 would drop it.
                break;
            }
            (me.start, me.end) = (0, n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for LocalAuthority<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl<S: Connected> Connected for LocalAuthority<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpack::entry_size;
    use proptest::prelude::*;

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        frame_head(&mut f, payload.len(), kind, flags, stream);
        f.extend_from_slice(payload);
        f
    }

    /// The rewritten stream, `input` fed in pieces of the sizes `chunks` cycles through.
    fn run(input: &[u8], chunks: &[usize]) -> Result<Vec<u8>, Malformed> {
        let (mut rw, mut out, mut at) = (Rewriter::default(), Vec::new(), 0);
        for &c in chunks.iter().cycle() {
            if at == input.len() {
                break;
            }
            let end = (at + c.max(1)).min(input.len());
            rw.rewrite_all(&input[at..end], &mut out)?;
            at = end;
        }
        Ok(out)
    }

    #[test]
    fn e16_an_http1_request_passes_unread() {
        // Its bytes at a frame header's type would read as HEADERS (0x01) and CONTINUATION
        // (0x09): nothing of it is decoded.
        let mut req = b"GET /health HTTP/1.1\r\nHost: localhost\r\nX:".to_vec();
        req.extend([0x01, 0x09, b'\t', 0x01, 0x04, 0x00, 0x00, 0x00, 0x01]);
        req.extend(b"\r\n\r\n".repeat(20));
        for chunks in [&[1usize][..], &[3, 7], &[4096]] {
            assert_eq!(run(&req, chunks).unwrap(), req, "{chunks:?}");
        }
        // A preface cut off early is HTTP/2 until it differs.
        let mut near = PREFACE[..10].to_vec();
        near.extend(b"garbage that is no frame at all\x01\x09");
        assert_eq!(run(&near, &[1]).unwrap(), near);
    }

    /// What the server reads: other frames whole, header blocks as (stream, flags, priority,
    /// fields), decoded in order by another HPACK implementation, with one table as h2 has.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Frame(Vec<u8>),
        Block(u32, u8, Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>),
    }

    fn seen(out: &[u8]) -> Vec<Seen> {
        assert_eq!(&out[..PREFACE_LEN], PREFACE);
        let mut rest = &out[PREFACE_LEN..];
        let mut seen = Vec::new();
        let mut open: Option<(u32, u8, Vec<u8>, Vec<u8>)> = None;
        let mut h2 = loona_hpack::Decoder::new();
        while !rest.is_empty() {
            let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
            let (kind, flags) = (rest[3], rest[4]);
            let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]);
            let payload = &rest[HEAD_LEN..HEAD_LEN + len];
            assert!(len <= MAX_FRAME, "a frame over the frame size");
            match kind {
                HEADERS => {
                    assert!(open.is_none());
                    assert_eq!(flags & PADDED, 0, "padding is dropped");
                    let lead = if flags & PRIORITY != 0 { 5 } else { 0 };
                    open = Some((
                        stream,
                        flags & (END_STREAM | PRIORITY),
                        payload[..lead].to_vec(),
                        payload[lead..].to_vec(),
                    ));
                }
                CONTINUATION => {
                    let b = open.as_mut().expect("a CONTINUATION inside a block");
                    assert_eq!(b.0, stream);
                    b.3.extend_from_slice(payload);
                }
                _ => seen.push(Seen::Frame(rest[..HEAD_LEN + len].to_vec())),
            }
            if matches!(kind, HEADERS | CONTINUATION) && flags & END_HEADERS != 0 {
                let (stream, flags, priority, block) = open.take().unwrap();
                let fields = h2.decode(&block).unwrap();
                seen.push(Seen::Block(stream, flags, priority, fields));
            }
            rest = &rest[HEAD_LEN + len..];
        }
        assert!(open.is_none(), "every block ends");
        seen
    }

    fn field(n: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
        (n.as_bytes().to_vec(), v.as_bytes().to_vec())
    }

    #[test]
    fn e1_authority_becomes_localhost_in_every_form_clients_send() {
        let mut input = PREFACE.to_vec();
        let settings = frame(0x4, 0, 0, &[0, 3, 0, 0, 0, 100]);
        input.extend_from_slice(&settings);
        // RFC 7541 C.4.1 and C.4.2: Huffman-coded, the second refers to the first's entry.
        input.extend(frame(
            HEADERS,
            END_HEADERS,
            1,
            &crate::hpack::hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
        ));
        let data = frame(0x0, END_STREAM, 1, b"\0\0\0\0\x02ab");
        input.extend_from_slice(&data);
        input.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            3,
            &crate::hpack::hex("8286 84be 5886 a8eb 1064 9cbf"),
        ));
        // What grpc-go and other clients put there for a unix endpoint, each indexed by the
        // client's table and then referred to.
        let mut enc = loona_hpack::Encoder::new();
        let mut stream = 5;
        for authority in [
            "/tmp/x/tenure.sock",
            "unix:///tmp/x/tenure.sock",
            "unix://localhost:app",
            "localhost:app",
        ] {
            for _ in 0..2 {
                let block = enc.encode([
                    (&b":method"[..], &b"POST"[..]),
                    (b":authority", authority.as_bytes()),
                    (b":path", b"/etcdserverpb.KV/Range"),
                ]);
                input.extend(frame(HEADERS, END_HEADERS, stream, &block));
                stream += 2;
            }
        }
        for chunks in [&[usize::MAX][..], &[1], &[7, 3, 100]] {
            let seen = seen(&run(&input, chunks).unwrap());
            assert_eq!(seen[0], Seen::Frame(settings.clone()));
            // "www.example.com" went into the client's table: h2's holds a stand-in as long.
            let get = |extra: &[(Vec<u8>, Vec<u8>)]| {
                let mut f = vec![
                    field(":method", "GET"),
                    field(":scheme", "http"),
                    field(":path", "/"),
                    field(":authority", "localhost......"),
                ];
                f.extend_from_slice(extra);
                f
            };
            assert_eq!(seen[1], Seen::Block(1, 0, vec![], get(&[])));
            assert_eq!(seen[2], Seen::Frame(data.clone()));
            let cache = [field("cache-control", "no-cache")];
            assert_eq!(seen[3], Seen::Block(3, END_STREAM, vec![], get(&cache)));
            for (i, s) in seen[4..].iter().enumerate() {
                let post = vec![
                    field(":method", "POST"),
                    field(":authority", "localhost"),
                    field(":path", "/etcdserverpb.KV/Range"),
                ];
                assert_eq!(*s, Seen::Block(5 + 2 * i as u32, 0, vec![], post));
            }
            assert_eq!(seen.len(), 12);
        }
    }

    #[derive(Debug, Clone)]
    enum Item {
        Request {
            /// (name, value from the pool, representation: 0 incremental, 1 without
            /// indexing, 2 never indexed, 3 indexed when the client's table has it)
            fields: Vec<(usize, usize, u8)>,
            end_stream: bool,
            pad: Option<u8>,
            priority: Option<[u8; 5]>,
            splits: Vec<usize>,
        },
        Other(u8, u8, u32, Vec<u8>),
    }

    const NAMES: [&str; 9] = [
        ":authority",
        ":method",
        ":path",
        ":scheme",
        "content-type",
        "te",
        "grpc-timeout",
        "user-agent",
        "x-trace-bin",
    ];

    fn item() -> impl Strategy<Value = Item> {
        let request = (
            prop::collection::vec((0..NAMES.len(), 0usize..4, 0u8..4), 0..12),
            any::<bool>(),
            prop::option::of(any::<u8>()),
            prop::option::of(any::<[u8; 5]>()),
            prop::collection::vec(0usize..400, 0..4),
        )
            .prop_map(
                |(fields, end_stream, pad, priority, splits)| Item::Request {
                    fields,
                    end_stream,
                    pad,
                    priority,
                    splits,
                },
            );
        let other = (
            prop::sample::select(vec![0x0u8, 0x2, 0x3, 0x4, 0x6, 0x7, 0x8, 0x20]),
            any::<u8>(),
            any::<u32>(),
            prop::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(|(k, f, s, p)| Item::Other(k, f, s, p));
        prop_oneof![request, other]
    }

    /// A client's HPACK encoder: every representation, its own table of `max` octets.
    struct Client {
        table: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
        max: usize,
    }

    impl Client {
        fn string(out: &mut Vec<u8>, s: &[u8]) {
            integer(out, 0, s.len());
            out.extend_from_slice(s);
        }

        /// Encodes a field as `rep` asks; returns the `:authority` h2 must then read.
        fn field(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8], rep: u8) -> Vec<u8> {
            let found = self.table.iter().position(|(n, v)| n == name && v == value);
            let localhost = AUTHORITY.to_vec();
            let mut stand = Vec::new();
            stand_in(&mut stand, value.len());
            match (rep, found) {
                (3, Some(i)) => {
                    integer(out, 0x80, 62 + i);
                    // Only a 7-bit prefix here: the test's tables are small enough.
                    assert!(62 + i < 0x7f);
                    if value.is_empty() {
                        localhost
                    } else {
                        stand
                    }
                }
                (1 | 2, _) => {
                    out.push(if rep == 1 { 0x00 } else { 0x10 });
                    Client::string(out, name);
                    Client::string(out, value);
                    localhost
                }
                _ => {
                    out.push(0x40);
                    Client::string(out, name);
                    Client::string(out, value);
                    let size = entry_size(name, value);
                    let mut used: usize = self.table.iter().map(|(n, v)| entry_size(n, v)).sum();
                    while used + size > self.max {
                        let Some((n, v)) = self.table.pop_back() else {
                            break;
                        };
                        used -= entry_size(&n, &v);
                    }
                    if size <= self.max {
                        self.table.push_front((name.to_vec(), value.to_vec()));
                    }
                    stand
                }
            }
        }
    }

    /// The client's bytes for `items` (values from `pool`) and what the server must read.
    fn client(items: &[Item], pool: &[Vec<u8>], table: usize) -> (Vec<u8>, Vec<Seen>) {
        let mut enc = Client {
            table: Default::default(),
            max: table,
        };
        let mut bytes = PREFACE.to_vec();
        let mut want = Vec::new();
        let mut updated = false;
        for (i, it) in items.iter().enumerate() {
            match it {
                Item::Other(kind, flags, stream, payload) => {
                    let f = frame(*kind, *flags, *stream & 0x7fff_ffff, payload);
                    bytes.extend_from_slice(&f);
                    want.push(Seen::Frame(f));
                }
                Item::Request {
                    fields,
                    end_stream,
                    pad,
                    priority,
                    splits,
                } => {
                    let stream = 2 * i as u32 + 1;
                    let mut block = Vec::new();
                    if !updated && table != TABLE_SIZE && !fields.is_empty() {
                        // The encoder tells the decoder its smaller table (RFC 7541 6.3).
                        block = loona_hpack::encoder::encode_integer(table, 5);
                        block[0] |= 0x20;
                        updated = true;
                    }
                    let mut list = Vec::new();
                    let mut authority = false;
                    for &(n, v, rep) in fields {
                        // One `:authority` a block, as h2 requires.
                        if n == 0 && std::mem::replace(&mut authority, true) {
                            continue;
                        }
                        let (name, value) = (NAMES[n].as_bytes(), &pool[v][..]);
                        let read = enc.field(&mut block, name, value, rep);
                        let read = if name == b":authority" {
                            read
                        } else {
                            value.to_vec()
                        };
                        list.push((name.to_vec(), read));
                    }
                    let mut cuts: Vec<usize> = splits.iter().map(|&s| s.min(block.len())).collect();
                    cuts.sort_unstable();
                    cuts.push(block.len());
                    let mut from = 0;
                    for (j, &to) in cuts.iter().enumerate() {
                        let last = if j + 1 == cuts.len() { END_HEADERS } else { 0 };
                        if j == 0 {
                            let mut flags = last;
                            let mut payload = Vec::new();
                            if let Some(p) = pad {
                                flags |= PADDED;
                                payload.push(*p);
                            }
                            if let Some(pr) = priority {
                                flags |= PRIORITY;
                                payload.extend_from_slice(pr);
                            }
                            if *end_stream {
                                flags |= END_STREAM;
                            }
                            payload.extend_from_slice(&block[from..to]);
                            payload.extend(std::iter::repeat_n(0, usize::from(pad.unwrap_or(0))));
                            bytes.extend(frame(HEADERS, flags, stream, &payload));
                        } else {
                            bytes.extend(frame(CONTINUATION, last, stream, &block[from..to]));
                        }
                        from = to;
                    }
                    let flags = if *end_stream { END_STREAM } else { 0 }
                        | if priority.is_some() { PRIORITY } else { 0 };
                    let pr = priority.map(|p| p.to_vec()).unwrap_or_default();
                    want.push(Seen::Block(stream, flags, pr, list));
                }
            }
        }
        (bytes, want)
    }

    proptest! {
        #[test]
        fn e1_rewriting_keeps_every_frame_and_field_but_the_authority(
            items in prop::collection::vec(item(), 0..24),
            pool in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..60), 4),
            chunks in prop::collection::vec(1usize..700, 1..8),
            table in prop::sample::select(vec![TABLE_SIZE, 0, 31, 200]),
        ) {
            let (bytes, want) = client(&items, &pool, table);
            let out = run(&bytes, &chunks).unwrap();
            prop_assert_eq!(seen(&out), want);
        }

        /// Whatever the bytes: an answer or an error for this connection, never a panic, and
        /// the buffers stay within h2's bounds.
        #[test]
        fn e1_any_bytes_end_in_output_or_an_error_never_a_panic(
            frames in prop::collection::vec(
                (prop::sample::select(vec![0x0u8, 0x1, 0x1, 0x9, 0x9, 0x4]), any::<u8>(),
                 0u32..4, 0usize..20_000, prop::collection::vec(any::<u8>(), 0..200)),
                0..12),
            noise in prop::collection::vec(any::<u8>(), 0..64),
            chunks in prop::collection::vec(1usize..5000, 1..4),
        ) {
            let mut bytes = PREFACE.to_vec();
            for (kind, flags, stream, len, payload) in frames {
                let mut f = Vec::new();
                // The declared length need not match what follows.
                frame_head(&mut f, len, kind, flags, stream);
                f.extend(payload);
                bytes.extend(f);
            }
            bytes.extend(noise);
            let mut rw = Rewriter::default();
            let mut out = Vec::new();
            let mut rest = &bytes[..];
            let mut c = chunks.iter().cycle();
            while !rest.is_empty() {
                let piece = &rest[..rest.len().min(*c.next().unwrap())];
                let n = rw.passing().min(piece.len());
                let used = if n > 0 {
                    rw.passed(n);
                    n
                } else {
                    match rw.feed(piece, &mut out) {
                        Ok(u) => u,
                        Err(_) => break,
                    }
                };
                prop_assert!(rw.payload.capacity() <= MAX_FRAME);
                prop_assert!(rw.fragment.len() <= (1 + MAX_CONTINUATIONS) * MAX_FRAME);
                rest = &rest[used..];
            }
        }
    }

    /// h2 takes every stand-in as an authority, as the `http` crate parses one.
    #[test]
    fn e1_every_stand_in_is_an_authority_h2_accepts() {
        use tonic::codegen::http::uri::Authority;
        for n in 1..300 {
            let mut s = Vec::new();
            stand_in(&mut s, n);
            assert_eq!(s.len(), n);
            assert!(
                Authority::try_from(&s[..]).is_ok(),
                "{}",
                String::from_utf8_lossy(&s)
            );
        }
        // What h2 refuses (`localhost:app` it takes: a name with a non-numeric port).
        for refused in ["/tmp/x/tenure.sock", "unix:///tmp/x/tenure.sock", "/s"] {
            assert!(Authority::try_from(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn e1_malformed_header_frames_close_the_connection() {
        let headers = |flags: u8, payload: &[u8]| frame(HEADERS, flags, 1, payload);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                [headers(0, &[0x82]), frame(0x0, 0, 1, b"x")].concat(),
                "a frame inside a header block",
            ),
            (
                [
                    headers(0, &[0x82]),
                    frame(CONTINUATION, END_HEADERS, 3, &[]),
                ]
                .concat(),
                "a frame inside a header block",
            ),
            (
                [headers(0, &[0x82]), headers(END_HEADERS, &[0x82])].concat(),
                "a frame inside a header block",
            ),
            (
                std::iter::once(headers(0, &[0x82]))
                    .chain(std::iter::repeat_n(frame(CONTINUATION, 0, 1, &[0x84]), 6))
                    .collect::<Vec<_>>()
                    .concat(),
                "too many CONTINUATION frames",
            ),
            (
                headers(END_HEADERS, &vec![0x82; MAX_FRAME + 1]),
                "a header block frame over the frame size",
            ),
            (
                headers(END_HEADERS | PADDED, &[5, 0x82]),
                "a HEADERS frame shorter than its padding and priority",
            ),
            (
                headers(END_HEADERS | PRIORITY, &[0, 0, 0]),
                "a HEADERS frame shorter than its padding and priority",
            ),
            (
                headers(END_HEADERS | PADDED, &[]),
                "a HEADERS frame shorter than its padding and priority",
            ),
            (headers(END_HEADERS, &[0x80]), "index 0"),
        ];
        for (frames, why) in cases {
            let input = [PREFACE, &frames].concat();
            assert_eq!(run(&input, &[usize::MAX]), Err(Malformed(why)), "{why}");
        }
        // A CONTINUATION outside a block is h2's to refuse; it passes.
        let stray = [PREFACE, &frame(CONTINUATION, END_HEADERS, 1, &[0x82])].concat();
        assert_eq!(run(&stray, &[3]).unwrap(), stray);
    }

    /// A block naming a large entry many times passes as the client sent it (h2 bounds the
    /// list it decodes, as on TCP); two authorities in one block end the connection.
    #[test]
    fn e1_blocks_are_not_expanded_and_one_authority_is_allowed() {
        let mut first = vec![0x40, 1, b'k'];
        integer(&mut first, 0, 4000);
        first.extend(std::iter::repeat_n(b'v', 4000));
        let bomb = frame(HEADERS, END_HEADERS, 3, &[0xbe; 17]);
        let input = [PREFACE, &frame(HEADERS, END_HEADERS, 1, &first), &bomb].concat();
        assert_eq!(run(&input, &[usize::MAX]).unwrap(), input);
        for twice in [
            &[0x01, 1, b'a', 0x01, 1, b'b'][..],
            &[0x81, 0x81],
            &[0x41, 1, b'a', 0xbe],
        ] {
            let input = [PREFACE, &frame(HEADERS, END_HEADERS, 1, twice)].concat();
            assert_eq!(
                run(&input, &[usize::MAX]),
                Err(Malformed("two :authority fields in one block"))
            );
        }
    }

    #[test]
    fn e1_a_long_block_is_split_into_frames_h2_accepts() {
        let mut enc = loona_hpack::Encoder::new();
        let big = vec![b'x'; 15_000];
        let block = enc.encode([
            (&b":authority"[..], &b"/s"[..]),
            (b"a", &big),
            (b"b", &big),
            (b"c", &big),
        ]);
        let mut input = PREFACE.to_vec();
        let mut pay = vec![0, 0, 0, 1, 9];
        pay.extend_from_slice(&block[..10_000]);
        input.extend(frame(HEADERS, PRIORITY, 1, &pay));
        let parts: Vec<&[u8]> = block[10_000..].chunks(MAX_FRAME).collect();
        for (i, part) in parts.iter().enumerate() {
            let last = if i + 1 == parts.len() { END_HEADERS } else { 0 };
            input.extend(frame(CONTINUATION, last, 1, part));
        }
        let seen = seen(&run(&input, &[4096]).unwrap());
        let Seen::Block(1, PRIORITY, pr, fields) = &seen[0] else {
            panic!("{seen:?}")
        };
        assert_eq!(pr, &[0, 0, 0, 1, 9]);
        assert_eq!(fields[0], field(":authority", "localhost"));
        assert_eq!(fields[3].1, big);
    }

    /// Through the async adapter as tonic uses it: the same bytes, a large DATA frame read
    /// straight into the caller's buffer, and an error once the client sends a bad block.
    #[tokio::test]
    async fn e1_the_socket_adapter_reads_what_the_rewriter_writes() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut input = PREFACE.to_vec();
        input.extend(frame(
            HEADERS,
            END_HEADERS,
            1,
            &crate::hpack::hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
        ));
        input.extend(frame(0x0, END_STREAM, 1, &vec![7; 40_000]));
        input.extend(frame(
            HEADERS,
            END_HEADERS,
            3,
            &crate::hpack::hex("8286 84be"),
        ));
        let want = run(&input, &[usize::MAX]).unwrap();
        let (mut client, server) = tokio::io::duplex(1000);
        let writer = tokio::spawn(async move {
            for piece in input.chunks(777) {
                client.write_all(piece).await.unwrap();
            }
            client
                .write_all(&frame(HEADERS, END_HEADERS, 5, &[0x80]))
                .await
                .unwrap();
            client
        });
        let mut server = LocalAuthority::new(server);
        let mut got = vec![0; want.len()];
        server.read_exact(&mut got).await.unwrap();
        assert!(got == want);
        let err = server.read(&mut [0; 64]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(err.to_string(), "index 0");
        assert!(
            server.read(&mut [0; 64]).await.is_err(),
            "the connection stays failed"
        );
        drop(writer.await.unwrap());
    }
}
