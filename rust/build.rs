//! Builds the LD_PRELOAD TFO shim (rust/shim/tfo_shim.c) as a shared object in
//! OUT_DIR; pltlab-dp embeds it (`pltlab-dp shim --out PATH` writes it out).
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = PathBuf::from("rust/shim/tfo_shim.c");
    println!("cargo:rerun-if-changed=rust/shim/tfo_shim.c");
    println!("cargo:rerun-if-changed=rust/build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("libpltlab_tfo_shim.so");
    let compiler = cc::Build::new().opt_level(2).pic(true).get_compiler();
    let mut cmd: Command = compiler.to_command();
    cmd.args(["-shared", "-fPIC", "-O2", "-Wall", "-o"]).arg(&out).arg(&src).arg("-ldl");
    let status = cmd.status().expect("running the C compiler for the TFO shim");
    assert!(status.success(), "building the TFO shim failed: {cmd:?}");
}
