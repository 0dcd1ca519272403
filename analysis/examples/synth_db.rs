//! Writes a small synthetic run database, to try `analyze` by hand:
//!
//!     cargo run -p analysis --example synth_db -- /tmp/synth.db [TICKS] [--incomplete]
//!
//! Three pollers (naive, compensated k=1s and k=10s) poll a simulated
//! timeline in which 5% of statuses become visible 0.2 to 5 s late.

use analysis::synth::{SimSpec, simulate_to_db};
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first().map(PathBuf::from) else {
        eprintln!("usage: synth_db PATH [TICKS] [--incomplete]");
        std::process::exit(2);
    };
    let ticks = args.get(1).and_then(|t| t.parse().ok()).unwrap_or(300);
    let complete = !args.iter().any(|a| a == "--incomplete");
    let _ = std::fs::remove_file(&path);
    let spec = SimSpec {
        ticks,
        ..SimSpec::default()
    };
    let run = simulate_to_db(&path, &spec, complete).expect("write the run");
    println!("wrote run {run} to {}", path.display());
}
