//! What tests of several files and roles share, so that no test module takes helpers from
//! another: scratch directories, throwaway network namespaces, hex digests (here); a replay
//! server to load from (`replay`); plans and loads (`loader`); encoded bodies (`encode`); an HTTP/3 client (`h3`).
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub mod encode;
pub mod h3;
pub mod loader;
pub mod replay;

/// A small HTTP/3 server (quinn + h3) for the loader's QUIC tests.
pub mod h3_server;

/// SHA-256 of `b`, lower-case hex (as manifests' `body_sha256`).
pub fn sha256(b: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, b).as_ref().iter().map(|x| format!("{x:02x}")).collect()
}

/// A fresh directory under the system's temp dir (the caller removes it).
pub fn tmpdir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!("pltlab-rp-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Relaxed)));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A throwaway network namespace (deleted on drop), lo up, given tcp_fastopen.
pub struct Netns(pub String);
impl Netns {
    pub fn new(tfo: u32) -> Option<Netns> {
        use std::process::Command;
        if unsafe { libc::geteuid() } != 0 || Command::new("ip").arg("-V").output().is_err() {
            eprintln!("skipping: needs root + ip");
            return None;
        }
        static N: AtomicU64 = AtomicU64::new(0);
        let ns = Netns(format!("pltrp-t{}-{}", std::process::id(), N.fetch_add(1, Relaxed)));
        assert!(Command::new("ip").args(["netns", "add", &ns.0]).status().unwrap().success());
        ns.run(&["ip", "link", "set", "lo", "up"]);
        ns.run(&["sysctl", "-qw", &format!("net.ipv4.tcp_fastopen={tfo}")]);
        Some(ns)
    }
    pub fn run(&self, args: &[&str]) -> String {
        let o = std::process::Command::new("ip").args(["netns", "exec", &self.0]).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    }
    pub fn counter(&self, name: &str) -> u64 {
        counter_in(&self.0, name)
    }
    /// Runs `f` on a thread that entered the namespace (threads it spawns inherit it).
    pub fn enter<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let nsf = std::fs::File::open(format!("/run/netns/{}", self.0)).unwrap();
        std::thread::spawn(move || {
            nix::sched::setns(nsf, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            f()
        })
        .join()
        .unwrap()
    }
}
/// A kernel counter (nstat) of the namespace named `ns`: usable inside `Netns::enter`.
pub fn counter_in(ns: &str, name: &str) -> u64 {
    let o = std::process::Command::new("ip").args(["netns", "exec", ns, "nstat", "-azs", name]).output().unwrap();
    assert!(o.status.success(), "nstat: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|x| x.parse().ok())
        .expect("nstat output")
}
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}
