//! A small HTTP/3 server for the loader's tests (quinn + h3 on 127.0.0.1, port 0, on a thread
//! of its own): TLS from `certs::quic::quic_server_config` (the test CA's leaf for a.test and
//! b.test, a ticket store that `sessions.clear()` empties, 0-RTT allowed), GET /N answered with
//! N bytes of 'x' (any other path: 100), and how each connection's handshake went.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::tmpdir;
use crate::certs::quic::{handshake_data, HandshakeFacts};
use crate::certs::Sessions;

pub struct H3Server {
    pub addr: SocketAddr,
    /// ca.pem (what plans name as `ca`), hosts.pem, hosts.key.
    pub dir: PathBuf,
    pub sessions: Arc<Sessions>,
    /// Per connection accepted, in order: how its handshake went (early bytes keep growing
    /// while its 0-RTT packets arrive).
    pub conns: Arc<Mutex<Vec<Arc<HandshakeFacts>>>>,
    /// Every request's `:authority` and path, as they arrived.
    pub requests: Arc<Mutex<Vec<(String, String)>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    th: Option<std::thread::JoinHandle<()>>,
    own_dir: bool,
}

impl Drop for H3Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.th.take() {
            let _ = t.join();
        }
        if self.own_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The body of path `p`: /N -> N bytes, else 100.
fn body(p: &str) -> Bytes {
    let n = p.trim_start_matches('/').parse::<usize>().unwrap_or(100);
    Bytes::from(vec![b'x'; n])
}

impl H3Server {
    /// A server with certificates of its own (a fresh CA).
    pub fn start() -> H3Server {
        let dir = tmpdir("h3srv");
        let g = crate::certs::generate(&["a.test".into(), "b.test".into()]).unwrap();
        std::fs::write(dir.join("ca.pem"), &g.ca_pem).unwrap();
        std::fs::write(dir.join("hosts.pem"), &g.leaf_pem).unwrap();
        std::fs::write(dir.join("hosts.key"), &g.leaf_key_pem).unwrap();
        H3Server::start_in(dir, true)
    }

    /// A second server with the certificates of `other` (the same CA: one plan `ca`).
    pub fn beside(other: &H3Server) -> H3Server {
        H3Server::start_in(other.dir.clone(), false)
    }

    fn start_in(dir: PathBuf, own_dir: bool) -> H3Server {
        let sessions = Arc::new(Sessions::default());
        let mut cfg = crate::certs::quic::quic_server_config(
            &dir.join("hosts.pem"),
            &dir.join("hosts.key"),
            sessions.clone(),
            16384,
        )
        .unwrap();
        let mut t = quinn::TransportConfig::default();
        t.mtu_discovery_config(None);
        cfg.transport_config(Arc::new(t));
        let conns: Arc<Mutex<Vec<Arc<HandshakeFacts>>>> = Default::default();
        let requests: Arc<Mutex<Vec<(String, String)>>> = Default::default();
        let (atx, arx) = std::sync::mpsc::channel();
        let (stx, srx) = tokio::sync::oneshot::channel::<()>();
        let (c2, r2) = (conns.clone(), requests.clone());
        let th = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let ep = quinn::Endpoint::server(cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
                atx.send(ep.local_addr().unwrap()).unwrap();
                let accept = ep.clone();
                tokio::spawn(async move {
                    while let Some(incoming) = accept.accept().await {
                        let (c2, r2) = (c2.clone(), r2.clone());
                        tokio::spawn(async move {
                            let Ok(connecting) = incoming.accept() else { return };
                            let Ok((conn, _)) = connecting.into_0rtt() else { return };
                            c2.lock().unwrap().push(handshake_data(&conn).expect("our handshake data").facts);
                            let Ok(mut h3c) =
                                h3::server::builder().build::<_, Bytes>(h3_quinn::Connection::new(conn)).await
                            else {
                                return;
                            };
                            while let Ok(Some(resolver)) = h3c.accept().await {
                                let r2 = r2.clone();
                                tokio::spawn(async move {
                                    let Ok((req, mut s)) = resolver.resolve_request().await else { return };
                                    let host = req.uri().authority().map(|a| a.to_string()).unwrap_or_default();
                                    let path = req.uri().path().to_string();
                                    r2.lock().unwrap().push((host, path.clone()));
                                    let b = body(&path);
                                    let resp = http::Response::builder()
                                        .status(200)
                                        .header("content-type", "text/plain")
                                        .header("content-length", b.len())
                                        .body(())
                                        .unwrap();
                                    if s.send_response(resp).await.is_err() {
                                        return;
                                    }
                                    let _ = s.send_data(b).await;
                                    let _ = s.finish().await;
                                });
                            }
                        });
                    }
                });
                let _ = srx.await;
                ep.close(0u32.into(), b"end");
            });
        });
        let addr = arx.recv().unwrap();
        H3Server { addr, dir, sessions, conns, requests, stop: Some(stx), th: Some(th), own_dir }
    }

    /// How many connections it accepted so far.
    pub fn accepted(&self) -> usize {
        self.conns.lock().unwrap().len()
    }
}

/// A UDP relay in front of `target` delaying every datagram by `delay` each way (a round trip
/// of 2 x `delay`, on 127.0.0.1 where no qdisc can): one upstream socket per client socket, so
/// the server sees each client's 4-tuple apart. Datagrams keep their order.
pub struct DelayProxy {
    pub addr: SocketAddr,
    /// Set: every datagram is dropped (`cut`).
    cut: Arc<std::sync::atomic::AtomicBool>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    th: Option<std::thread::JoinHandle<()>>,
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.th.take() {
            let _ = t.join();
        }
    }
}

type Delayed = tokio::sync::mpsc::UnboundedSender<(tokio::time::Instant, Vec<u8>)>;

/// A task sending each datagram handed to it at its due time, through `send`.
fn delayed<F, Fut>(send: F) -> Delayed
where
    F: Fn(Vec<u8>) -> Fut + 'static + std::marker::Send,
    Fut: std::future::Future<Output = ()> + std::marker::Send,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    tokio::spawn(async move {
        while let Some((due, d)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            send(d).await;
        }
    });
    tx
}

impl DelayProxy {
    pub fn start(target: SocketAddr, delay: std::time::Duration) -> DelayProxy {
        let (atx, arx) = std::sync::mpsc::channel();
        let (stx, mut srx) = tokio::sync::oneshot::channel::<()>();
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cut2 = cut.clone();
        let th = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let front = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
                atx.send(front.local_addr().unwrap()).unwrap();
                let mut ups: std::collections::HashMap<SocketAddr, Delayed> = Default::default();
                let mut buf = vec![0u8; 65536];
                loop {
                    let (n, from) = tokio::select! {
                        _ = &mut srx => break,
                        r = front.recv_from(&mut buf) => match r { Ok(x) => x, Err(_) => continue },
                    };
                    if cut2.load(std::sync::atomic::Ordering::Relaxed) {
                        continue;
                    }
                    let tx = ups.entry(from).or_insert_with(|| {
                        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                        s.connect(target).unwrap();
                        s.set_nonblocking(true).unwrap();
                        let up = Arc::new(tokio::net::UdpSocket::from_std(s).unwrap());
                        let front = front.clone();
                        let back = delayed(move |d| {
                            let front = front.clone();
                            async move {
                                let _ = front.send_to(&d, from).await;
                            }
                        });
                        let up2 = up.clone();
                        tokio::spawn(async move {
                            let mut b = vec![0u8; 65536];
                            while let Ok(n) = up2.recv(&mut b).await {
                                let _ = back.send((tokio::time::Instant::now() + delay, b[..n].to_vec()));
                            }
                        });
                        delayed(move |d| {
                            let up = up.clone();
                            async move {
                                let _ = up.send(&d).await;
                            }
                        })
                    });
                    let _ = tx.send((tokio::time::Instant::now() + delay, buf[..n].to_vec()));
                }
            });
        });
        let addr = arx.recv().unwrap();
        DelayProxy { addr, cut, stop: Some(stx), th: Some(th) }
    }

    /// From now on nothing from the clients gets through.
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
