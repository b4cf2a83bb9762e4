//! `cargo bench -p tenure-server --bench unix`: what reading unix-socket connections through
//! `LocalAuthority` (the `:authority` rewriting, SPEC E1) costs.
//!
//! 1. End to end, A/B in one process: one gRPC server (an etcd KV service answering at once, so
//!    the adapter's share is as large as it can be) on two unix sockets, one read plainly and
//!    one through the adapter; the etcd-client crate (tonic's unix channel) sends unary Range
//!    requests over one connection to each, the two alternating in rounds so both see the same
//!    machine load. Latency per request, median and p99, for each, and the difference of the
//!    two sides' medians round by round.
//! 2. The rewriter alone on a client's byte stream: HEADERS as a client sends them (a changing
//!    `grpc-timeout`, the rest from the client's table) and a small DATA frame, per request.
//! 3. HPACK decoding of a hostile 16 KiB block (4096 fields of one Huffman-coded byte): ours
//!    against loona-hpack's, the published decoder we did not take.
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) it only smoke-tests briefly.

#[allow(dead_code)]
#[path = "../src/authority.rs"]
mod authority;
#[allow(dead_code)]
#[path = "../src/hpack.rs"]
mod hpack;

use std::time::{Duration, Instant};

use etcd_client::proto::*;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status};

struct Kv;

#[tonic::async_trait]
impl PbKvService for Kv {
    async fn range(
        &self,
        _req: Request<PbRangeRequest>,
    ) -> Result<Response<PbRangeResponse>, Status> {
        Ok(Response::new(PbRangeResponse::default()))
    }

    type RangeStreamStream = tokio_stream::Empty<Result<PbRangeStreamResponse, Status>>;

    async fn range_stream(
        &self,
        _req: Request<PbRangeRequest>,
    ) -> Result<Response<Self::RangeStreamStream>, Status> {
        Err(Status::unimplemented("range_stream"))
    }

    async fn put(&self, _req: Request<PbPutRequest>) -> Result<Response<PbPutResponse>, Status> {
        Err(Status::unimplemented("put"))
    }

    async fn delete_range(
        &self,
        _req: Request<PbDeleteRequest>,
    ) -> Result<Response<PbDeleteResponse>, Status> {
        Err(Status::unimplemented("delete_range"))
    }

    async fn txn(&self, _req: Request<PbTxnRequest>) -> Result<Response<PbTxnResponse>, Status> {
        Err(Status::unimplemented("txn"))
    }

    async fn compact(
        &self,
        _req: Request<PbCompactionRequest>,
    ) -> Result<Response<PbCompactionResponse>, Status> {
        Err(Status::unimplemented("compact"))
    }
}

/// Serves `Kv` on a unix socket at `path`, through the adapter when `adapt`.
fn serve(path: &std::path::Path, adapt: bool) {
    let l = tokio::net::UnixListener::bind(path).unwrap();
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(l);
    let router = tonic::transport::Server::builder().add_service(PbKvServer::new(Kv));
    if adapt {
        let incoming = incoming.map(|c| c.map(authority::LocalAuthority::new));
        tokio::spawn(router.serve_with_incoming(incoming));
    } else {
        tokio::spawn(router.serve_with_incoming(incoming));
    }
}

async fn client(path: &std::path::Path) -> etcd_client::Client {
    let channel = tonic::transport::Endpoint::from_shared(format!("unix://{}", path.display()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    etcd_client::Client::from_channel(etcd_client::Channel::Tonic(channel), None)
        .await
        .unwrap()
}

/// The `q` quantile of `sorted`, in µs.
fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q) as usize).min(sorted.len() - 1);
    sorted[i].as_secs_f64() * 1e6
}

fn end_to_end(rounds: usize, per_round: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (plain, adapted) = (
        dir.path().join("plain.sock"),
        dir.path().join("adapted.sock"),
    );
    rt.block_on(async {
        serve(&plain, false);
        serve(&adapted, true);
        let mut clients = [client(&plain).await, client(&adapted).await];
        let mut lat: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        // Each round's median for each side, and their difference: the load moves between
        // rounds, rarely within one.
        let mut medians: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut deltas = Vec::new();
        for round in 0..rounds {
            // Alternate which goes first, so neither always follows the other.
            for k in [round % 2, 1 - round % 2] {
                let mut r = Vec::with_capacity(per_round);
                for _ in 0..per_round {
                    let t0 = Instant::now();
                    clients[k].get("k", None).await.unwrap();
                    r.push(t0.elapsed());
                }
                r.sort_unstable();
                medians[k].push(quantile(&r, 0.5));
                lat[k].extend(r);
            }
            deltas.push(medians[1][round] - medians[0][round]);
        }
        println!(
            "| unix socket, unary Range ({rounds} rounds of {per_round}) | p50 µs | p99 µs | \
             median of round medians µs |"
        );
        println!("|---|---:|---:|---:|");
        for (k, name) in ["read plainly", "through LocalAuthority"]
            .iter()
            .enumerate()
        {
            lat[k].sort_unstable();
            medians[k].sort_by(f64::total_cmp);
            println!(
                "| {name} | {:.1} | {:.1} | {:.1} |",
                quantile(&lat[k], 0.5),
                quantile(&lat[k], 0.99),
                medians[k][medians[k].len() / 2]
            );
        }
        deltas.sort_by(f64::total_cmp);
        let q = |p: f64| deltas[((deltas.len() as f64 * p) as usize).min(deltas.len() - 1)];
        println!(
            "\nadapter minus plain, per round (median, quartiles): {:+.2} µs ({:+.2} .. {:+.2})",
            q(0.5),
            q(0.25),
            q(0.75)
        );
    });
}

/// Frames a header block or payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn rewriter(requests: usize) {
    let mut enc = loona_hpack::Encoder::new();
    let mut input = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    input.extend(frame(0x4, 0, 0, &[]));
    for i in 0..requests {
        let timeout = format!("{}u", 4_999_000 + i % 1000);
        let block = enc.encode([
            (&b":method"[..], &b"POST"[..]),
            (b":scheme", b"http"),
            (b":path", b"/etcdserverpb.KV/Range"),
            (b":authority", b"/run/app/tenure.sock"),
            (b"content-type", b"application/grpc"),
            (b"user-agent", b"grpc-go/1.26.0"),
            (b"te", b"trailers"),
            (b"grpc-timeout", timeout.as_bytes()),
        ]);
        let stream = 2 * i as u32 + 1;
        input.extend(frame(0x1, 0x4, stream, &block));
        input.extend(frame(0x0, 0x1, stream, b"\0\0\0\0\x05\x0a\x03key"));
    }
    let t0 = Instant::now();
    let mut rw = authority::Rewriter::default();
    let mut out = Vec::with_capacity(input.len() * 4);
    for piece in input.chunks(16 * 1024) {
        rw.rewrite_all(piece, &mut out).unwrap();
    }
    let ns = t0.elapsed().as_secs_f64() * 1e9 / requests as f64;
    println!(
        "\nrewriter alone: {ns:.0} ns per request (HEADERS + DATA, {} bytes in, {} out, {requests} requests)",
        input.len() / requests,
        out.len() / requests
    );
}

fn hostile_block(times: usize) {
    let block: Vec<u8> = [0x00, 0x81, 0x07, 0x80].repeat(4096);
    let t0 = Instant::now();
    for _ in 0..times {
        let mut fields = 0;
        hpack::Decoder::new(4096)
            .decode(&block, None, |_| {
                fields += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(fields, 4096);
    }
    let ours = t0.elapsed() / times as u32;
    let t0 = Instant::now();
    for _ in 0..times {
        let mut fields = 0;
        loona_hpack::Decoder::new()
            .decode_with_cb(&block, |_, _| fields += 1)
            .unwrap();
        assert_eq!(fields, 4096);
    }
    let theirs = t0.elapsed() / times as u32;
    println!(
        "hostile 16 KiB block (4096 one-byte Huffman fields): ours {ours:.2?}, loona-hpack {theirs:.2?} per block"
    );
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    if bench {
        end_to_end(200, 100);
        rewriter(100_000);
        hostile_block(20);
    } else {
        end_to_end(2, 20);
        rewriter(100);
        hostile_block(1);
    }
}
