//! Figures for the simulator (not a test: it prints, it asserts nothing).
//!
//!     cargo bench -p experiment --bench sim
//!
//! 1. the part-2 calibration (twitter profile, seed 1): leaks and skews;
//! 2. one simulated hour of the twitter profile, advanced second by second;
//! 3. one simulated hour at 6,000 statuses/s, with the peak RSS (VmHWM);
//! 4. server throughput: pages of 200 over loopback, 2 concurrent clients.

use snowleak::sim::calibration::{Part2Setup, percentile, run_part2};
use snowleak::sim::server::{RateLimits, RunningServer, router_with_clock};
use snowleak::sim::{SimConfig, Simulator};
use std::sync::{Arc, Mutex};
use std::time::Instant;

const START: i64 = 1_700_000_000_000;

fn main() {
    // SIM_BENCH_ONLY=busy runs only the 6,000/s hour (for profiling).
    if std::env::var("SIM_BENCH_ONLY").as_deref() == Ok("busy") {
        let mut busy = SimConfig::profile("twitter").unwrap();
        busy.rate_per_s = 6000.0;
        hour("twitter profile at 6,000/s", busy);
        return;
    }
    if std::env::var("SIM_BENCH_ONLY").as_deref() == Ok("server") {
        if let Err(e) = server_throughput() {
            println!("server throughput: failed: {e}");
        }
        return;
    }
    if std::env::var("SIM_BENCH_ONLY").as_deref() == Ok("profiles") {
        profile_table();
        return;
    }
    for profile in SimConfig::PROFILES {
        calibration(profile);
    }
    hour(
        "twitter profile (default rate)",
        SimConfig::profile("twitter").unwrap(),
    );
    let mut busy = SimConfig::profile("twitter").unwrap();
    busy.rate_per_s = 6000.0;
    hour("twitter profile at 6,000/s", busy);
    println!(
        "peak RSS (VmHWM): {}",
        vm_hwm().unwrap_or_else(|| "unknown".into())
    );
    if let Err(e) = server_throughput() {
        println!("server throughput: failed: {e}");
    }
}

/// Every parameter of every profile, as a Markdown table (SIM_BENCH_ONLY=profiles).
fn profile_table() {
    let tables: Vec<toml::Table> = SimConfig::PROFILES
        .iter()
        .map(
            |p| match toml::Value::try_from(SimConfig::profile(p).unwrap()) {
                Ok(toml::Value::Table(t)) => t,
                _ => toml::Table::new(),
            },
        )
        .collect();
    println!("| parameter | {} |", SimConfig::PROFILES.join(" | "));
    println!("|---|{}", "---|".repeat(tables.len()));
    for key in tables[0].keys() {
        let values: Vec<String> = tables.iter().map(|t| t[key].to_string()).collect();
        println!("| `{key}` | {} |", values.join(" | "));
    }
}

fn calibration(profile: &str) {
    let t = Instant::now();
    let run = run_part2(SimConfig::profile(profile).unwrap(), &Part2Setup::hour(1));
    println!(
        "part 2 ({profile}, seed 1, 1 h, every 1 s, k=1s): {} statuses; naive {} requests, {} leaks; k=1s {} requests, {} leaks ({:.2} s)",
        run.statuses,
        run.naive.requests,
        run.naive.leaks.len(),
        run.compensated.requests,
        run.compensated.leaks.len(),
        t.elapsed().as_secs_f64()
    );
    for (name, leaks) in [
        ("naive", &run.naive.leaks),
        ("k=1s", &run.compensated.leaks),
    ] {
        let skew: Vec<i64> = leaks.iter().map(|l| l.id_skew_ms).collect();
        let k: Vec<i64> = leaks.iter().map(|l| l.required_k_ms).collect();
        let over_1s = k.iter().filter(|&&k| k > 1000).count();
        println!(
            "  {name} leaks: id_skew_ms p50 {:?} p90 {:?} max {:?}; required_k_ms p50 {:?} p90 {:?} max {:?}; required_k > 1 s: {over_1s}",
            percentile(&skew, 50),
            percentile(&skew, 90),
            percentile(&skew, 100),
            percentile(&k, 50),
            percentile(&k, 90),
            percentile(&k, 100),
        );
    }
}

fn hour(name: &str, config: SimConfig) {
    let t = Instant::now();
    let mut sim = Simulator::new(config, 1, START);
    let mut statuses = 0usize;
    for second in 1..=3600 {
        sim.advance(START + second * 1000);
        statuses += sim.take_truth().len();
    }
    println!(
        "one simulated hour, {name}: {statuses} statuses in {:.3} s wall ({} visible at the end)",
        t.elapsed().as_secs_f64(),
        sim.visible_len()
    );
}

fn vm_hwm() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
}

fn server_throughput() -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let mut config = SimConfig::profile("twitter").unwrap();
        config.rate_per_s = 100.0;
        let mut sim = Simulator::new(config, 1, START);
        sim.set_truth_recording(false);
        let now = START + 600_000;
        sim.advance(now);
        let sim = Arc::new(Mutex::new(sim));
        let app = router_with_clock(sim, RateLimits::default(), Arc::new(move || now));
        let server = RunningServer::start(app).await?;
        let per_client = 5000;
        let t = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let http = reqwest::Client::builder().build().map_err(|e| e.to_string())?;
            let url = server.url("/1.1/lists/statuses.json?count=200");
            tasks.push(tokio::spawn(async move {
                let mut bytes = 0usize;
                for _ in 0..per_client {
                    let body = http.get(&url).send().await.map_err(|e| e.to_string())?;
                    bytes += body.bytes().await.map_err(|e| e.to_string())?.len();
                }
                Ok::<usize, String>(bytes)
            }));
        }
        let mut bytes = 0;
        for task in tasks {
            bytes += task.await.map_err(|e| e.to_string())??;
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "server throughput: {} requests of 200 tweets ({:.1} KiB each) in {secs:.2} s = {:.0} requests/s (2 clients)",
            2 * per_client,
            bytes as f64 / (2 * per_client) as f64 / 1024.0,
            (2 * per_client) as f64 / secs
        );
        server.stop().await
    })
}
