//! A throwaway PostgreSQL cluster for one run: `initdb` into a fresh temporary
//! directory, `pg_ctl start` listening on a Unix socket in that directory only
//! (`listen_addresses = ''`), with `track_commit_timestamp = on` so that
//! `pg_xact_commit_timestamp(xmin)` gives each row's commit time (PostgreSQL
//! manual, 20.6 "Replication", and 9.27.1 "Transaction ID and Snapshot
//! Information Functions"). Dropping the handle stops the server and removes
//! the directory, on every way out of a run (end, error, Ctrl-C, panic).
//!
//! A run killed with SIGKILL cannot clean up; its directory's name carries
//! the pid of the process that made it, and the next start sweeps away every
//! cluster whose owner is gone (stopping its server first). Clusters of live
//! processes (parallel tests) are left alone.
//!
//! `initdb` refuses to run as root (PostgreSQL manual, 19.2 "Creating a
//! Database Cluster"), so as root the binaries run as the `postgres` user
//! through `runuser`, in a directory that user owns.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Prefix of every cluster directory this module makes in the temp directory.
const PREFIX: &str = "snowleak-pg-";

/// A running throwaway cluster. Dropping it stops the server and removes its directory.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    run_as: Option<String>,
}

/// Where `initdb` and `pg_ctl` live: the PATH first, then Debian's
/// `/usr/lib/postgresql/VERSION/bin` (newest version first), where the
/// `postgresql` package puts them without linking them onto the PATH.
pub fn find_bin_dir() -> Result<PathBuf, String> {
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let version = e.file_name().to_str()?.parse::<u32>().ok()?;
                    Some((version, e.path().join("bin")))
                })
                .collect()
        })
        .unwrap_or_default();
    debian.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    path_dirs
        .into_iter()
        .chain(debian.into_iter().map(|(_, dir)| dir))
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
        .map(|dir| std::fs::canonicalize(&dir).unwrap_or(dir))
        .ok_or_else(|| {
            "cannot find PostgreSQL's initdb and pg_ctl (looked on the PATH and in \
             /usr/lib/postgresql/*/bin); install PostgreSQL (Debian: apt-get install postgresql)"
                .to_string()
        })
}

fn running_as_root() -> bool {
    // The owner of /proc/self is the effective uid of this process.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The uid and gid of a user, from `id` (no libc binding needed for two numbers).
fn user_ids(user: &str) -> Result<(u32, u32), String> {
    let id = |flag: &str| -> Result<u32, String> {
        let out = Command::new("id")
            .args([flag, user])
            .output()
            .map_err(|e| format!("cannot run id: {e}"))?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| {
                format!(
                    "running as root, PostgreSQL must run as the '{user}' user, which does not exist \
                     (create it, or run as an ordinary user)"
                )
            })
    };
    Ok((id("-u")?, id("-g")?))
}

impl Cluster {
    /// Makes and starts a cluster; the server is ready for connections on return.
    pub fn start() -> Result<Cluster, String> {
        Cluster::start_with(&[])
    }

    /// [`Cluster::start`] with more server settings (`NAME`, `VALUE`), such as
    /// `wal_level=logical` for a replication slot.
    pub fn start_with(settings: &[(&str, &str)]) -> Result<Cluster, String> {
        let bin = find_bin_dir()?;
        sweep_stale(&bin);
        let run_as = running_as_root().then(|| "postgres".to_string());
        let dir = super::make_dir(PREFIX, "cluster")?;
        // From here on, dropping `cluster` cleans up whatever was made.
        let cluster = Cluster { dir, bin, run_as };
        if let Some(user) = &cluster.run_as {
            let (uid, gid) = user_ids(user)?;
            std::os::unix::fs::chown(&cluster.dir, Some(uid), Some(gid))
                .map_err(|e| format!("cannot give {} to {user}: {e}", cluster.dir.display()))?;
        }
        let data = cluster.data_dir();
        cluster.pg(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-A".as_ref(),
                "trust".as_ref(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--no-sync".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
            ],
        )?;
        // Unix socket in the cluster's own directory, no TCP at all; small
        // buffers, since several clusters may run at once (parallel tests).
        let mut options = format!(
            "-k {} -c listen_addresses='' -c track_commit_timestamp=on -c shared_buffers=32MB \
             -c max_connections=60",
            cluster.dir.display()
        );
        for (name, value) in settings {
            options.push_str(&format!(" -c {name}={value}"));
        }
        let log = cluster.dir.join("server.log");
        cluster.pg(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "start".as_ref(),
            ],
        )?;
        Ok(cluster)
    }

    /// The directory holding the data directory, the socket and the server log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of the server's binaries (`psql` is there too).
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// A connection configuration for the cluster's superuser over its Unix socket.
    pub fn config(&self) -> tokio_postgres::Config {
        let mut config = tokio_postgres::Config::new();
        config
            .host_path(&self.dir)
            .port(5432)
            .user("postgres")
            .dbname("postgres")
            .application_name("snowleak");
        config
    }

    /// Stops the server fast (`pg_ctl restart -m fast`: clients are
    /// disconnected, a shutdown checkpoint written, replication slots saved
    /// with it) and starts it again with the same options; ready on return.
    pub fn restart(&self) -> Result<(), String> {
        let data = self.data_dir();
        self.pg(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "fast".as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "-l".as_ref(),
                self.dir.join("server.log").as_os_str(),
                "restart".as_ref(),
            ],
        )
    }

    /// Runs one of the cluster's binaries (as `postgres` when we are root).
    fn pg(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
        run_pg(&self.bin, self.run_as.as_deref(), program, args)
    }
}

fn run_pg(
    bin: &Path,
    run_as: Option<&str>,
    program: &str,
    args: &[&std::ffi::OsStr],
) -> Result<(), String> {
    let exe = bin.join(program);
    let mut command = match run_as {
        Some(user) => {
            let mut c = Command::new("runuser");
            c.args(["-u", user, "--"]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    command.args(args).stdin(Stdio::null());
    let out = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message");
    Err(format!("{program} failed ({}): {last}", out.status))
}

fn stop_and_remove(bin: &Path, run_as: Option<&str>, dir: &Path) {
    let data = dir.join("data");
    if data.join("postmaster.pid").exists() {
        // Immediate: a throwaway cluster needs no checkpoint on the way out.
        let result = run_pg(
            bin,
            run_as,
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        );
        if let Err(e) = result {
            tracing::warn!(dir = %dir.display(), "stopping the PostgreSQL cluster: {e}");
        }
    }
    super::remove_dir(dir, "PostgreSQL cluster");
}

/// Removes the clusters of processes that no longer exist (runs killed with SIGKILL).
fn sweep_stale(bin: &Path) {
    let run_as = running_as_root().then_some("postgres");
    for dir in super::stale_dirs(PREFIX) {
        tracing::info!(dir = %dir.display(), "removing a PostgreSQL cluster left by a killed run");
        stop_and_remove(bin, run_as, &dir);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        stop_and_remove(&self.bin, self.run_as.as_deref(), &self.dir);
    }
}

/// Connects to PostgreSQL (no TLS: a Unix socket or a server the user
/// names) and drives the connection on the runtime.
pub async fn connect(config: &tokio_postgres::Config) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect to PostgreSQL: {}", db_error(&e)))?;
    tokio::spawn(connection);
    Ok(client)
}

/// A database error in one line: the server's message when there is one.
pub fn db_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_and_cleans_up() {
        let (cluster, rt) = crate::targets::postgres::testing::start();
        let dir = cluster.dir().to_path_buf();
        let setting: String = rt.block_on(async {
            crate::targets::postgres::testing::connect(&cluster, None)
                .await
                .query_one("SHOW track_commit_timestamp", &[])
                .await
                .unwrap()
                .get(0)
        });
        assert_eq!(setting, "on");
        drop(cluster);
        assert!(!dir.exists(), "the cluster directory is removed");
    }

    #[test]
    fn a_cluster_left_by_a_dead_process_is_swept() {
        let cluster = Cluster::start().expect("PostgreSQL must start for this test");
        // Pretend its owner died: a pid that cannot exist (above pid_max).
        let dir = std::env::temp_dir().join(format!(
            "{PREFIX}4294967295-{}-{}",
            std::process::id(),
            crate::servers::unique()
        ));
        std::fs::rename(cluster.dir(), &dir).unwrap();
        let bin = cluster.bin.clone();
        std::mem::forget(cluster);
        assert!(dir.join("data/postmaster.pid").exists());
        sweep_stale(&bin);
        assert!(!dir.exists(), "the stale cluster is stopped and removed");
    }
}
