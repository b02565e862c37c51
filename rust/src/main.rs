//! pltlab-dp: the data plane of pltlab. One binary, one subcommand per role.
//! Every subcommand speaks JSON: configuration in, results/statistics out.
use clap::{Parser, Subcommand};

mod link;
mod probe;

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
}

fn main() {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Link(a) => link::run(a),
        Cmd::Probe(c) => probe::run(c),
    };
    if let Err(e) = res {
        eprintln!("pltlab-dp: error: {e:#}");
        std::process::exit(1);
    }
}
