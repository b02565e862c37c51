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
