//! pltlab-dp: the data plane of pltlab. One binary, one subcommand per role.
//! Every subcommand speaks JSON: configuration in, results/statistics out.
use clap::{Parser, Subcommand};

mod certs;
mod http;
mod link;
mod loader;
mod os;
mod probe;
mod replay;
mod schema;
mod shim;
#[cfg(test)]
mod testutil;

#[derive(Parser)]
#[command(name = "pltlab-dp", version, about = "pltlab data plane")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// User-space link emulator between two TUN devices (JSON config).
    Link(link::Args),
    /// Measurement probes used by `pltlab check` and the tests.
    #[command(subcommand)]
    Probe(probe::Cmd),
    /// Replay server: serves a manifest of recorded responses on every origin.
    Replay(replay::Args),
    /// Built-in browser-like HTTP/1.1 page loader (JSON plan in, timings out).
    Load(loader::Args),
    /// The built-in loader's scheduler driven by a modelled network (JSON lines; `pltlab predict`).
    Schedule(loader::schedule::Args),
    /// Generates a CA and one certificate for every replayed https host.
    Ca(certs::Args),
    /// Writes the LD_PRELOAD TFO shim (for Chromium) to a file.
    Shim(shim::Args),
    /// Prints the JSON Schema of every document read or written (or of one).
    Schema(schema::Args),
}

fn main() {
    // A panic in any thread ends the process at once, as panic = "abort" would: no role limps on
    // with a dead thread (the release profile unwinds so that tests share its build).
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Link(a) => link::run(a),
        Cmd::Probe(c) => probe::run(c),
        Cmd::Replay(a) => replay::run(a),
        Cmd::Load(a) => loader::run(a),
        Cmd::Schedule(a) => loader::schedule::run(a),
        Cmd::Ca(a) => certs::run(a),
        Cmd::Shim(a) => shim::run(a),
        Cmd::Schema(a) => schema::run(a),
    };
    if let Err(e) = res {
        eprintln!("pltlab-dp: error: {e:#}");
        std::process::exit(1);
    }
}
