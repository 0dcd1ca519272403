//! The machine a planned run ran on, as the run records it: its host name
//! and kernel (uname(2), the same text as `/proc/sys/kernel/hostname` and
//! `osrelease`, proc(5)), the name the scheduler knows its node by
//! (`SLURMD_NODENAME` in a Slurm task, srun(1)/sbatch(1); `NODE_NAME` in the
//! Kubernetes Job the plan writes, from the downward API's `spec.nodeName`),
//! its CPU model (`/proc/cpuinfo`), its cores (those this process may use),
//! the load average when the run started (`/proc/loadavg`) and the boot's
//! id (`/proc/sys/kernel/random/boot_id`, a random UUID drawn at each boot:
//! proc_sys_kernel(5)), which tells a machine restarted or replaced under
//! the same name from the same one. The parsers are pure; [`Machine::here`]
//! reads the system.

use serde::{Deserialize, Serialize};

/// One machine, as a run saw it at its start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The scheduler's name of the node, else the host name: what the merge
    /// groups runs by.
    pub node: String,
    pub host: String,
    pub cpu_model: String,
    pub cores: u32,
    pub kernel: String,
    /// The 1-, 5- and 15-minute load averages when the run started.
    pub load_at_start: [f64; 3],
    /// The boot's id; empty where the kernel has none, and in the records
    /// of runs made before it was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
}

/// The CPU model of `/proc/cpuinfo`'s text: its first `model name` (x86),
/// else its first `Processor`, `cpu model` or `cpu` line (other
/// architectures), else `unknown`.
pub fn cpu_model(cpuinfo: &str) -> String {
    for key in ["model name", "Processor", "cpu model", "cpu"] {
        for line in cpuinfo.lines() {
            if let Some((k, v)) = line.split_once(':')
                && k.trim() == key
                && !v.trim().is_empty()
            {
                return v.trim().to_string();
            }
        }
    }
    "unknown".into()
}

/// The three load averages of `/proc/loadavg`'s text.
pub fn load_averages(loadavg: &str) -> Option<[f64; 3]> {
    let mut fields = loadavg.split_whitespace().map(str::parse::<f64>);
    Some([
        fields.next()?.ok()?,
        fields.next()?.ok()?,
        fields.next()?.ok()?,
    ])
}

/// The node's name: the scheduler's (`SLURMD_NODENAME`, `NODE_NAME`) when
/// it gave one, else the host name.
pub fn node_name(slurm: Option<String>, kubernetes: Option<String>, host: &str) -> String {
    slurm
        .or(kubernetes)
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| host.to_string())
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Machine {
    /// This machine, now.
    pub fn here() -> Machine {
        let host = read("/proc/sys/kernel/hostname").trim().to_string();
        let host = if host.is_empty() {
            "unknown".into()
        } else {
            host
        };
        Machine {
            node: node_name(
                std::env::var("SLURMD_NODENAME").ok(),
                std::env::var("NODE_NAME").ok(),
                &host,
            ),
            cpu_model: cpu_model(&read("/proc/cpuinfo")),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            load_at_start: load_averages(&read("/proc/loadavg")).unwrap_or([0.0; 3]),
            boot_id: read("/proc/sys/kernel/random/boot_id").trim().to_string(),
            host,
        }
    }

    /// `node01: Intel(R) Xeon(R) ..., 32 cores, Linux 6.1.0-18-amd64`.
    pub fn describe(&self) -> String {
        let host = if self.host == self.node {
            String::new()
        } else {
            format!(" (host {})", self.host)
        };
        format!(
            "{}{host}: {}, {} cores, Linux {}",
            self.node, self.cpu_model, self.cores, self.kernel
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_model_and_load_read_from_proc_text() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6230\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6230\n";
        assert_eq!(cpu_model(x86), "Intel(R) Xeon(R) Gold 6230");
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n";
        assert_eq!(cpu_model(arm), "unknown");
        assert_eq!(
            cpu_model("cpu\t\t: POWER9 (raw), altivec supported\n"),
            "POWER9 (raw), altivec supported"
        );
        assert_eq!(
            load_averages("0.52 0.58 0.59 1/467 12345\n"),
            Some([0.52, 0.58, 0.59])
        );
        assert_eq!(load_averages("0.5 x"), None);
    }

    #[test]
    fn the_node_is_the_scheduler_s_name_else_the_host() {
        assert_eq!(node_name(Some("n01".into()), None, "vm"), "n01");
        assert_eq!(
            node_name(None, Some("pool-a-1".into()), "job-0-x"),
            "pool-a-1"
        );
        assert_eq!(node_name(Some(" ".into()), None, "vm"), "vm");
        assert_eq!(node_name(None, None, "vm"), "vm");
    }
}
