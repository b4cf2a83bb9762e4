//! Requests etcd refuses or bends, answered as etcd answers them (issue 29, items 10, 11, 12;
//! SPEC E3, E5, E7): each is sent to `tenure serve` and to a real etcd in the same run and the
//! answers compared.
//!
//! `cargo test -p tenure-server --test hostile_requests -- --nocapture` prints what each says.

mod common;

use common::{temp_db, Etcd, Server};
use etcd_client::proto::{PbRangeRequest, PbTxnOpRequest, PbTxnRequest, PbTxnRequestOp};
use etcd_client::{Client, LockOptions};
use prost::bytes::Buf;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Endpoint;
use tonic::{Code, Status};

/// The two servers of one run: `tenure serve` and etcd, both with their defaults.
struct Pair {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    tenure: Server,
    etcd: Etcd,
}

fn pair() -> Pair {
    let (dir, file) = temp_db();
    let tenure = Server::start(&file, &[]);
    let etcd_dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(etcd_dir.path());
    Pair {
        _dirs: (dir, etcd_dir),
        tenure,
        etcd,
    }
}

async fn client(addr: &str) -> Client {
    Client::connect([addr], None).await.unwrap()
}

fn status(e: etcd_client::Error) -> (Code, String) {
    match e {
        etcd_client::Error::GRpcStatus(s) => (s.code(), s.message().to_string()),
        other => panic!("not a gRPC status: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_a_lease_grant_with_ttl_zero_or_less_gets_etcds_minimum_ttl() {
    let p = pair();
    for addr in [&p.tenure.addr, &p.etcd.addr] {
        let mut c = client(addr).await;
        for ttl in [0, -5] {
            let granted = c.lease_grant(ttl, None).await.unwrap();
            assert_eq!(granted.ttl(), 2, "{addr}: TTL {ttl}");
            let live = c.lease_time_to_live(granted.id(), None).await.unwrap();
            assert_eq!(live.granted_ttl(), 2, "{addr}: TTL {ttl}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e5_lock_and_campaign_names_above_max_request_bytes_are_refused_as_etcd_does() {
    let p = pair();
    // Under gRPC's limit (2 MiB), over --max-request-bytes (1.5 MiB): etcd's own refusal.
    let name = vec![b'n'; 1_600 * 1024];
    let mut answers = Vec::new();
    for addr in [&p.tenure.addr, &p.etcd.addr] {
        let mut c = client(addr).await;
        let lease = c.lease_grant(60, None).await.unwrap().id();
        let lock = c
            .lock(name.clone(), Some(LockOptions::new().with_lease(lease)))
            .await
            .map(|_| ())
            .map_err(status);
        let campaign = c
            .campaign(name.clone(), "v", lease)
            .await
            .map(|_| ())
            .map_err(status);
        println!("{addr}: lock {lock:?}, campaign {campaign:?}");
        // etcd's lock and election services return the error itself: code Unknown.
        let too_large = Err((
            Code::Unknown,
            "etcdserver: request is too large".to_string(),
        ));
        assert_eq!(lock, too_large, "{addr}");
        assert_eq!(campaign, too_large, "{addr}");
        // Nothing was written under the name.
        let held = c.get(name.clone(), None).await.unwrap();
        assert_eq!(held.count(), 0, "{addr}");
        answers.push((lock, campaign));
    }
    assert_eq!(answers[0], answers[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e7_a_message_above_grpcs_limit_is_resource_exhausted_with_etcds_text() {
    let p = pair();
    let mut answers = Vec::new();
    for addr in [&p.tenure.addr, &p.etcd.addr] {
        let mut c = client(addr).await;
        let big = vec![b'v'; 2_100 * 1024];
        let (code, text) = status(c.put("k", big, None).await.unwrap_err());
        println!("{addr}: {code:?} {text}");
        assert_eq!(code, Code::ResourceExhausted, "{addr}: {text}");
        answers.push(text);
        // The connection goes on serving.
        c.put("k", "small", None).await.unwrap();
    }
    assert_eq!(answers[0], answers[1]);
    assert!(
        answers[0].starts_with("grpc: received message larger than max ("),
        "{}",
        answers[0]
    );
}

/// Sends a `TxnRequest` and keeps the answer as bytes: a deeply nested txn's response nests as
/// deep, more than this client's own decoder would take.
#[derive(Default)]
struct RawTxn;

struct TxnEncoder;
struct BytesDecoder;

impl Encoder for TxnEncoder {
    type Item = PbTxnRequest;
    type Error = Status;

    fn encode(&mut self, item: PbTxnRequest, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(e.to_string()))
    }
}

impl Decoder for BytesDecoder {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

impl Codec for RawTxn {
    type Encode = PbTxnRequest;
    type Decode = Vec<u8>;
    type Encoder = TxnEncoder;
    type Decoder = BytesDecoder;

    fn encoder(&mut self) -> TxnEncoder {
        TxnEncoder
    }

    fn decoder(&mut self) -> BytesDecoder {
        BytesDecoder
    }
}

/// A txn `depth` levels deep (1: a txn with one range), each level's success branch holding
/// the next.
fn nested(depth: usize) -> PbTxnRequest {
    let mut txn = PbTxnRequest {
        success: vec![PbTxnRequestOp {
            request: Some(PbTxnOpRequest::RequestRange(PbRangeRequest {
                key: b"k".to_vec(),
                ..Default::default()
            })),
        }],
        ..Default::default()
    };
    for _ in 1..depth {
        txn = PbTxnRequest {
            success: vec![PbTxnRequestOp {
                request: Some(PbTxnOpRequest::RequestTxn(txn)),
            }],
            ..Default::default()
        };
    }
    txn
}

async fn send_nested(addr: &str, depth: usize) -> Result<(), (Code, String)> {
    let ch = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut g = tonic::client::Grpc::new(ch);
    g.ready().await.unwrap();
    g.unary(
        tonic::Request::new(nested(depth)),
        tonic::codegen::http::uri::PathAndQuery::from_static("/etcdserverpb.KV/Txn"),
        RawTxn,
    )
    .await
    .map(|_| ())
    .map_err(|s| (s.code(), s.message().to_string()))
}

/// The deepest txn `tenure serve` decodes: prost's 100 levels of recursion, two per txn level.
const DEEPEST: usize = 50;
/// The deepest txn etcd takes when each level holds one op: its budget of 128 ops is shared
/// down the nesting.
const ETCD_DEEPEST: usize = 128;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e7_nested_txns_are_accepted_to_a_depth_and_deeper_ones_are_too_many_operations() {
    let p = pair();
    let too_many = Err((
        Code::InvalidArgument,
        "etcdserver: too many operations in txn request".to_string(),
    ));
    for depth in [
        1,
        10,
        DEEPEST,
        DEEPEST + 1,
        90,
        ETCD_DEEPEST,
        ETCD_DEEPEST + 1,
        1000,
    ] {
        let tenure = send_nested(&p.tenure.addr, depth).await;
        let etcd = send_nested(&p.etcd.addr, depth).await;
        println!("depth {depth}: tenure {tenure:?}, etcd {etcd:?}");
        if depth <= DEEPEST {
            assert_eq!(tenure, Ok(()), "depth {depth}");
        } else {
            assert_eq!(tenure, too_many, "depth {depth}");
        }
        // SPEC E7: between the two depths etcd accepts what tenure refuses.
        if depth <= DEEPEST || depth > ETCD_DEEPEST {
            assert_eq!(tenure, etcd, "depth {depth}");
        } else {
            assert_eq!(etcd, Ok(()), "depth {depth}");
        }
    }
    // The server goes on serving.
    let mut c = client(&p.tenure.addr).await;
    c.put("after", "v", None).await.unwrap();
}
