//! `pltlab-dp shim --out PATH`: writes the embedded LD_PRELOAD TFO shim
//! (rust/shim/tfo_shim.c, built by rust/build.rs) to PATH.
use anyhow::{Context, Result};
use std::path::PathBuf;

pub static SHIM_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libpltlab_tfo_shim.so"));

#[derive(clap::Args)]
pub struct Args {
    /// Where to write the shared object (e.g. /run/pltlab/libpltlab_tfo_shim.so).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn write(out: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(d) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    // write to a temp name and rename: a running process may have the old one mapped
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, SHIM_SO).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&tmp, out).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(())
}

pub fn run(a: Args) -> Result<()> {
    write(&a.out)?;
    println!("{}", serde_json::json!({"shim": a.out, "bytes": SHIM_SO.len()}));
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::testutil::{tmpdir, Netns};

    #[test]
    fn shim_turns_on_tfo_for_plain_connect() {
        let Some(ns) = Netns::new(3) else { return };
        if std::process::Command::new("python3").arg("-V").output().is_err() {
            eprintln!("skipping: needs python3");
            return;
        }
        let dir = tmpdir("shim");
        let so = dir.join("libpltlab_tfo_shim.so");
        crate::shim::write(&so).unwrap();
        let script = r#"
import socket, threading, sys
srv = socket.socket(); srv.setsockopt(socket.IPPROTO_TCP, 23, 16)
srv.bind(("127.0.0.1", 0)); srv.listen(16); port = srv.getsockname()[1]
def serve():
    for _ in range(3):
        c, _ = srv.accept(); c.sendall(b"ok:" + c.recv(100)); c.close()
t = threading.Thread(target=serve); t.start()
for i in range(3):
    s = socket.socket(); s.connect(("127.0.0.1", port)); s.sendall(b"hi"); assert s.recv(100) == b"ok:hi"; s.close()
t.join()
    "#;
        let run = |preload: bool| {
            let before = ns.counter("TcpExtTCPFastOpenActive");
            let mut c = std::process::Command::new("ip");
            c.args(["netns", "exec", &ns.0, "python3", "-c", script]);
            if preload {
                c.env("LD_PRELOAD", &so);
            }
            let o = c.output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            ns.counter("TcpExtTCPFastOpenActive") - before
        };
        assert_eq!(run(false), 0);
        assert_eq!(run(true), 2, "first connect fetches the cookie, the next two use it");
        std::fs::remove_dir_all(dir).ok();
    }
}
