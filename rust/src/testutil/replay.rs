//! A replay server for tests (replay's own, and the loader's loads against it): http and https
//! on 127.0.0.1 (port 0), its certificates in a scratch directory, run on a thread of its own.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use super::tmpdir;
use crate::replay::manifest::Manifest;
use crate::replay::shared::{build_shared, Shared};

pub struct TestServer {
    pub http: SocketAddr,
    pub https: SocketAddr,
    pub addrs: Vec<SocketAddr>,
    pub shared: Arc<Shared>,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    th: Option<std::thread::JoinHandle<()>>,
    pub dir: PathBuf,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.th.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts a replay server (http + https on 127.0.0.1, port 0) for `responses`.
pub fn start_server(responses: serde_json::Value, think_time: bool) -> TestServer {
    let listen =
        serde_json::json!([{"ip": "127.0.0.1", "port": 0, "tls": false}, {"ip": "127.0.0.1", "port": 0, "tls": true}]);
    start_server_on(listen, responses, think_time)
}

/// The same with these `listen` entries (`http`/`https`: the first two addresses, `addrs`: all).
pub fn start_server_on(listen: serde_json::Value, responses: serde_json::Value, think_time: bool) -> TestServer {
    start_server_with(listen, responses, serde_json::json!({"think_time": think_time}))
}

/// The same with more manifest fields (`extra`: an object).
pub fn start_server_with(
    listen: serde_json::Value,
    responses: serde_json::Value,
    extra: serde_json::Value,
) -> TestServer {
    let dir = tmpdir("srv");
    let g = crate::certs::generate(&["a.test".into(), "b.test".into()]).unwrap();
    std::fs::write(dir.join("ca.pem"), &g.ca_pem).unwrap();
    std::fs::write(dir.join("hosts.pem"), &g.leaf_pem).unwrap();
    std::fs::write(dir.join("hosts.key"), &g.leaf_key_pem).unwrap();
    let mut m = serde_json::json!({
        "listen": listen,
        "tls": {"cert": dir.join("hosts.pem"), "key": dir.join("hosts.key")},
        "responses": responses,
    });
    for (k, v) in extra.as_object().expect("extra manifest fields: an object") {
        m[k] = v.clone();
    }
    let m: Manifest = serde_json::from_value(m).unwrap();
    let shared = build_shared(&m).unwrap();
    let (atx, arx) = std::sync::mpsc::channel();
    let (stx, srx) = tokio::sync::oneshot::channel::<()>();
    let sh2 = shared.clone();
    let th = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let srv = crate::replay::start(&m, sh2).unwrap();
            atx.send(srv.addrs.clone()).unwrap();
            let _ = srx.await;
        });
    });
    let addrs = arx.recv().unwrap();
    let addrs: Vec<SocketAddr> = addrs.into_iter().map(|a| a.0).collect();
    TestServer {
        http: addrs[0],
        https: addrs[addrs.len().min(2) - 1],
        addrs,
        shared,
        stop: Some(stx),
        th: Some(th),
        dir,
    }
}
