//! An HPACK (RFC 7541) decoder for the header blocks a client sends on a unix socket (see
//! `authority`): it keeps the client's dynamic table so that later blocks, which refer to it,
//! can be read. Decoding only; bounded by its input (every string is at most its encoded length
//! times 8/5) and by the table size the server advertised.
//!
//! Ours rather than a crate's: h2 keeps its HPACK module private, and the published decoders
//! are unmaintained or rebuild a Huffman table per string (see DESIGN.md, unix sockets).

use std::collections::VecDeque;

/// Why a header block cannot be decoded; the connection that sent it is closed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// RFC 7541 Appendix A.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The Huffman code's length in bits for each symbol, 256 being EOS (RFC 7541 Appendix B). The
/// code is canonical (codes of one length are consecutive, in symbol order, after the shorter
/// ones), so the lengths alone define it.
const HUFFMAN_BITS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

const MAX_BITS: usize = 30;

/// The canonical code's decoding tables: per length, its first code, how many codes it has and
/// where its symbols start in `symbols` (all symbols ordered by length, then value).
struct Canonical {
    first: [u32; MAX_BITS + 1],
    count: [u16; MAX_BITS + 1],
    start: [u16; MAX_BITS + 1],
    symbols: [u16; 257],
}

const fn canonical() -> Canonical {
    let mut c = Canonical {
        first: [0; MAX_BITS + 1],
        count: [0; MAX_BITS + 1],
        start: [0; MAX_BITS + 1],
        symbols: [0; 257],
    };
    let mut s = 0;
    while s < 257 {
        c.count[HUFFMAN_BITS[s] as usize] += 1;
        s += 1;
    }
    let (mut code, mut at, mut len) = (0u32, 0u16, 1);
    while len <= MAX_BITS {
        c.first[len] = code;
        c.start[len] = at;
        code = (code + c.count[len] as u32) << 1;
        at += c.count[len];
        len += 1;
    }
    let mut next = c.start;
    let mut s = 0;
    while s < 257 {
        let len = HUFFMAN_BITS[s] as usize;
        c.symbols[next[len] as usize] = s as u16;
        next[len] += 1;
        s += 1;
    }
    c
}

static HUFFMAN: Canonical = canonical();

/// Appends the Huffman-coded string `src` to `out`.
fn huffman(src: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
    let (mut code, mut len) = (0u32, 0usize);
    for &byte in src {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            let offset = code.wrapping_sub(HUFFMAN.first[len]);
            if offset < u32::from(HUFFMAN.count[len]) {
                match HUFFMAN.symbols[(HUFFMAN.start[len] as u32 + offset) as usize] {
                    256 => return Err(Malformed("EOS in a Huffman string")),
                    sym => out.push(sym as u8),
                }
                (code, len) = (0, 0);
            } else if len == MAX_BITS {
                return Err(Malformed("invalid Huffman code"));
            }
        }
    }
    // Padding: fewer than 8 bits, all ones (the start of EOS).
    if len >= 8 || code != (1 << len) - 1 {
        return Err(Malformed("invalid Huffman padding"));
    }
    Ok(())
}

/// Reads an integer with an `n`-bit prefix (RFC 7541 5.1), at most 2^28 + prefix as h2 allows.
fn integer(buf: &mut &[u8], n: u8) -> Result<usize, Malformed> {
    let (&first, mut rest) = buf.split_first().ok_or(Malformed("truncated integer"))?;
    let mask = (1usize << n) - 1;
    let mut value = usize::from(first) & mask;
    if value == mask {
        let mut shift = 0;
        loop {
            let (&b, more) = rest.split_first().ok_or(Malformed("truncated integer"))?;
            rest = more;
            value += usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 21 {
                return Err(Malformed("integer too large"));
            }
        }
    }
    *buf = rest;
    Ok(value)
}

/// Reads a string literal: its octets and whether they are Huffman-coded.
fn string<'a>(buf: &mut &'a [u8]) -> Result<(&'a [u8], bool), Malformed> {
    let coded = buf.first().is_some_and(|b| b & 0x80 != 0);
    let len = integer(buf, 7)?;
    if len > buf.len() {
        return Err(Malformed("truncated string"));
    }
    let (s, rest) = buf.split_at(len);
    *buf = rest;
    Ok((s, coded))
}

/// A string's text: borrowed when raw, decoded into `scratch` when Huffman-coded.
fn text<'a>((s, coded): (&'a [u8], bool), scratch: &'a mut Vec<u8>) -> Result<&'a [u8], Malformed> {
    if !coded {
        return Ok(s);
    }
    scratch.clear();
    huffman(s, scratch)?;
    Ok(scratch)
}

/// An entry's size as HPACK counts it (RFC 7541 4.1).
pub(crate) fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// A dynamic table entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// The decoding context of one connection: its dynamic table.
pub(crate) struct Decoder {
    /// Newest first.
    table: VecDeque<Entry>,
    size: usize,
    /// The size the client's last update chose, at most `limit`.
    max: usize,
    /// SETTINGS_HEADER_TABLE_SIZE as the server advertised it.
    limit: usize,
}

/// A representation's kind (RFC 7541 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A table entry by its index.
    Indexed,
    /// A literal the decoder adds to its table.
    Incremental,
    /// A literal no table keeps.
    Without,
    /// A literal no table keeps, nor any intermediary's (a sensitive value).
    Never,
    /// A dynamic table size update: no field.
    SizeUpdate,
}

/// One representation of a block: its field (empty for a size update) and its octets.
#[derive(Debug)]
pub(crate) struct Rep<'a> {
    pub(crate) kind: Kind,
    pub(crate) name: &'a [u8],
    /// `None` for a literal no table keeps whose name is not the one asked for.
    pub(crate) value: Option<&'a [u8]>,
    pub(crate) raw: &'a [u8],
}

impl Decoder {
    pub(crate) fn new(limit: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: limit,
            limit,
        }
    }

    fn evict_to(&mut self, room: usize) {
        while self.size > room {
            let Some((n, v)) = self.table.pop_back() else {
                break;
            };
            self.size -= entry_size(&n, &v);
        }
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = entry_size(name, value);
        if size > self.max {
            // RFC 7541 4.4: an entry larger than the table empties it and is not added.
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max - size);
        self.table.push_front((name.into(), value.into()));
        self.size += size;
    }

    fn get(&self, index: usize) -> Result<(&[u8], &[u8]), Malformed> {
        match index {
            0 => Err(Malformed("index 0")),
            1..=61 => {
                let (n, v) = STATIC[index - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self
                .table
                .get(index - 62)
                .map(|(n, v)| (&n[..], &v[..]))
                .ok_or(Malformed("index beyond the table")),
        }
    }

    /// Decodes one whole header block, handing each representation to `each` in order; the
    /// value of a literal that no table keeps is decoded only if its name is `only` (all when
    /// `None`): the others are the server's to read. An error leaves the table unusable: the
    /// caller closes the connection.
    pub(crate) fn decode(
        &mut self,
        block: &[u8],
        only: Option<&[u8]>,
        mut each: impl FnMut(Rep<'_>) -> Result<(), Malformed>,
    ) -> Result<(), Malformed> {
        let (mut name_buf, mut value_buf) = (Vec::new(), Vec::new());
        let mut at_start = true;
        let mut buf = block;
        while let Some(&b) = buf.first() {
            let from = block.len() - buf.len();
            let raw = |buf: &[u8]| &block[from..block.len() - buf.len()];
            if b & 0x80 != 0 {
                let (name, value) = self.get(integer(&mut buf, 7)?)?;
                each(Rep {
                    kind: Kind::Indexed,
                    name,
                    value: Some(value),
                    raw: raw(buf),
                })?;
            } else if b & 0xe0 == 0x20 {
                // Only at the start of a block (RFC 7541 4.2), as h2 requires.
                if !at_start {
                    return Err(Malformed("table size update after a field"));
                }
                let max = integer(&mut buf, 5)?;
                if max > self.limit {
                    return Err(Malformed("table size update over the advertised size"));
                }
                self.max = max;
                self.evict_to(max);
                each(Rep {
                    kind: Kind::SizeUpdate,
                    name: &[],
                    value: None,
                    raw: raw(buf),
                })?;
                continue;
            } else {
                let (prefix, kind) = match b & 0xf0 {
                    0x00 => (4, Kind::Without),
                    0x10 => (4, Kind::Never),
                    _ => (6, Kind::Incremental),
                };
                let index = integer(&mut buf, prefix)?;
                let name = match index {
                    0 => text(string(&mut buf)?, &mut name_buf)?,
                    i => self.get(i)?.0,
                };
                let coded = string(&mut buf)?;
                let wanted = kind == Kind::Incremental || only.is_none_or(|o| o == name);
                let value = if wanted {
                    Some(text(coded, &mut value_buf)?)
                } else {
                    None
                };
                each(Rep {
                    kind,
                    name,
                    value,
                    raw: raw(buf),
                })?;
                if let (Kind::Incremental, Some(value)) = (kind, value) {
                    let (name, value) = (name.to_vec(), value.to_vec());
                    self.insert(&name, &value);
                }
            }
            at_start = false;
        }
        Ok(())
    }
}

/// Octets from hex digits, spaces ignored (as the RFC prints its examples).
#[cfg(test)]
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, Malformed> {
        let mut out = Vec::new();
        d.decode(block, None, |r| {
            if let Some(v) = r.value {
                out.push((
                    String::from_utf8_lossy(r.name).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ));
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// RFC 7541 C.4: requests with Huffman coding, the later ones referring to the table.
    #[test]
    fn e1_rfc7541_c4_requests_with_huffman_and_the_dynamic_table() {
        let mut d = Decoder::new(4096);
        let first = hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff");
        assert_eq!(
            decode(&mut d, &first).unwrap(),
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ])
        );
        let second = hex("8286 84be 5886 a8eb 1064 9cbf");
        assert_eq!(
            decode(&mut d, &second).unwrap(),
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("cache-control", "no-cache"),
            ])
        );
        let third = hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
        assert_eq!(
            decode(&mut d, &third).unwrap(),
            pairs(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ])
        );
        assert_eq!(d.size, 164, "RFC 7541 C.4.3: table size");
    }

    /// RFC 7541 C.5: responses with a 256-byte table, so entries are evicted.
    #[test]
    fn e1_rfc7541_c5_eviction_keeps_indices_as_the_encoder_has_them() {
        let mut d = Decoder::new(256);
        let blocks = [
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
             6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
             3d31",
        ];
        let mut last = Vec::new();
        for b in blocks {
            last = decode(&mut d, &hex(b)).unwrap();
        }
        assert_eq!(last[0], (":status".into(), "200".into()));
        assert_eq!(last[2].0, "date");
        assert_eq!(
            last[3],
            ("location".into(), "https://www.example.com".into())
        );
        assert_eq!(d.size, 215, "RFC 7541 C.5.3: table size");
    }

    #[test]
    fn e1_every_static_entry_and_huffman_symbol_decodes() {
        let mut d = Decoder::new(4096);
        for i in 1..=61u8 {
            let got = decode(&mut d, &[0x80 | i]).unwrap();
            assert_eq!(got.len(), 1);
        }
        assert_eq!(
            decode(&mut d, &[0x80 | 58]).unwrap(),
            pairs(&[("user-agent", "")])
        );
        // A canonical code: every symbol's code, padded with ones, decodes to the symbol.
        let mut code = 0u64;
        let mut order: Vec<usize> = (0..257).collect();
        order.sort_by_key(|&s| (HUFFMAN_BITS[s], s));
        let mut prev = HUFFMAN_BITS[order[0]];
        for (i, &s) in order.iter().enumerate() {
            let bits = HUFFMAN_BITS[s];
            if i > 0 {
                code = (code + 1) << (bits - prev);
            }
            prev = bits;
            if s == 256 {
                break;
            }
            let pad = (8 - bits % 8) % 8;
            let v = (code << pad) | ((1 << pad) - 1);
            let n = usize::from((bits + pad) / 8);
            let bytes: Vec<u8> = (0..n).rev().map(|k| (v >> (8 * k)) as u8).collect();
            let mut out = Vec::new();
            huffman(&bytes, &mut out).unwrap();
            assert_eq!(out, [s as u8], "symbol {s}");
        }
        // Known codes: '0' is 00000, 'a' 00011, EOS thirty ones.
        let mut out = Vec::new();
        huffman(&[0b0000_0111], &mut out).unwrap();
        assert_eq!(out, b"0");
        assert_eq!(
            huffman(&[0xff, 0xff, 0xff, 0xfc], &mut Vec::new()),
            Err(Malformed("EOS in a Huffman string"))
        );
    }

    #[test]
    fn e1_malformed_blocks_are_errors() {
        for (block, why) in [
            (&[0x80][..], "index 0"),
            (&[0xbe][..], "index beyond the table"),
            (&[0xff][..], "truncated integer"),
            (
                &[0xff, 0x80, 0x80, 0x80, 0x80, 0x01][..],
                "integer too large",
            ),
            (&[0x00, 0x05, b'a'][..], "truncated string"),
            (
                &[0x3f, 0xe2, 0x1f][..],
                "table size update over the advertised size",
            ),
            (&[0x82, 0x20][..], "table size update after a field"),
            (&[0x00, 0x81, 0x00, 0x00][..], "invalid Huffman padding"),
            (&[0x00, 0x81, 0xff, 0x00][..], "invalid Huffman padding"),
            (&[0x00][..], "truncated integer"),
        ] {
            assert_eq!(decode(&mut Decoder::new(4096), block), Err(Malformed(why)));
        }
    }

    #[test]
    fn e1_an_entry_larger_than_the_table_empties_it() {
        let mut d = Decoder::new(64);
        decode(&mut d, &[0x40, 1, b'a', 1, b'b']).unwrap();
        assert_eq!(d.table.len(), 1);
        let big = [&[0x40, 1, b'a', 40][..], &[b'x'; 40]].concat();
        decode(&mut d, &big).unwrap();
        assert_eq!((d.table.len(), d.size), (0, 0));
        // A size update to 0 evicts everything; a later index into the table fails.
        decode(&mut d, &[0x40, 1, b'a', 1, b'b']).unwrap();
        assert_eq!(
            decode(&mut d, &[0x20, 0xbe]),
            Err(Malformed("index beyond the table"))
        );
    }

    proptest::proptest! {
        /// Another implementation (loona-hpack) decodes every Huffman string as this one does.
        #[test]
        fn e1_huffman_agrees_with_another_decoder(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            let mut ours = Vec::new();
            let ours = huffman(&bytes, &mut ours).map(|()| ours).ok();
            let theirs = loona_hpack::huffman::HuffmanDecoder::new().decode(&bytes).ok();
            proptest::prop_assert_eq!(ours, theirs);
        }
    }
}
