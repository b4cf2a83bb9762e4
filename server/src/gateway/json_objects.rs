//! Splits a request body into the JSON objects it carries one after another (etcd's gateway
//! reads a streaming call's requests so: `{"create_request":…}{"cancel_request":…}`), without
//! waiting for the body to end. A pure state machine: bytes in, the end of each complete object
//! out; each byte is looked at once, however the body is cut into chunks.

/// Where a framer is inside the bytes it has been given.
#[derive(Debug, Default)]
pub(crate) struct Framer {
    /// Nesting depth of `{`/`[` outside strings; 0 between objects.
    depth: usize,
    in_string: bool,
    /// The previous byte was a backslash inside a string.
    escaped: bool,
    /// Bytes of the buffer already looked at.
    scanned: usize,
}

/// What the bytes so far hold.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// `buf[..end]` is one whole value (with any whitespace before it).
    Complete(usize),
    /// Only whitespace (nothing to read yet).
    Empty,
    /// A value has begun and not ended.
    Partial,
}

impl Framer {
    /// Looks at the bytes of `buf` not seen before (the caller appends to `buf` between calls,
    /// and after a `Complete(end)` removes `buf[..end]` and calls [`Framer::consumed`]).
    pub(crate) fn scan(&mut self, buf: &[u8]) -> Frame {
        let mut started = self.depth > 0 || self.in_string;
        while self.scanned < buf.len() {
            let b = buf[self.scanned];
            self.scanned += 1;
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => {
                        self.in_string = false;
                        if self.depth == 0 {
                            return Frame::Complete(self.scanned);
                        }
                    }
                    _ => {}
                }
                continue;
            }
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b'"' => {
                    started = true;
                    self.in_string = true;
                }
                b'{' | b'[' => {
                    started = true;
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Frame::Complete(self.scanned);
                    }
                }
                // A bare scalar at the top (not a request etcd takes): end it here, so the
                // decoder refuses it rather than the framer waiting for more.
                _ if self.depth == 0 => return Frame::Complete(self.scanned),
                _ => started = true,
            }
        }
        if started {
            Frame::Partial
        } else {
            Frame::Empty
        }
    }

    /// The caller removed the first `n` bytes of its buffer (the value `scan` reported).
    pub(crate) fn consumed(&mut self, n: usize) {
        self.scanned = self.scanned.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` one at a time and returns the values found, as text.
    fn split(chunks: &[&str]) -> Vec<String> {
        let mut f = Framer::default();
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for c in chunks {
            buf.extend_from_slice(c.as_bytes());
            while let Frame::Complete(end) = f.scan(&buf) {
                out.push(
                    String::from_utf8(buf[..end].to_vec())
                        .unwrap()
                        .trim()
                        .to_string(),
                );
                buf.drain(..end);
                f.consumed(end);
            }
        }
        out
    }

    #[test]
    fn e21_objects_one_after_another_in_any_cut() {
        let body = r#"{"a":{"b":"}\"{"}} {"c":[1,{"d":2}]}
{"e":"\\"}"#;
        let whole = split(&[body]);
        assert_eq!(
            whole,
            vec![
                r#"{"a":{"b":"}\"{"}}"#,
                r#"{"c":[1,{"d":2}]}"#,
                r#"{"e":"\\"}"#
            ]
        );
        // Every byte a chunk of its own: the same objects.
        let bytes: Vec<String> = body.chars().map(String::from).collect();
        let refs: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(split(&refs), whole);
    }

    #[test]
    fn e21_a_partial_object_waits_and_whitespace_is_empty() {
        let mut f = Framer::default();
        assert_eq!(f.scan(b"  \n"), Frame::Empty);
        assert_eq!(f.scan(b"  \n{\"a\":"), Frame::Partial);
        assert_eq!(f.scan(b"  \n{\"a\":1}"), Frame::Complete(10));
    }
}
