//! A throwaway MariaDB server for one run: `mariadb-install-db` into a fresh
//! temporary directory, `mariadbd` started from the system's binaries on a
//! Unix socket in that directory only (`--skip-networking`), with durable
//! commits (`innodb_flush_log_at_trx_commit=1`, the InnoDB default: the log
//! is written and flushed at each commit) and the AUTO_INCREMENT lock mode
//! the run asks for (`innodb_autoinc_lock_mode` 0, 1 or 2, MariaDB KB
//! "AUTO_INCREMENT Handling in InnoDB"; MariaDB's default is 1). Dropping the
//! handle kills the server and removes the directory, on every way out of a
//! run (end, error, Ctrl-C, panic).
//!
//! A run killed with SIGKILL cannot clean up; its directory's name carries
//! the pid of the process that made it, and the next start sweeps away every
//! directory whose owner is gone, killing its server first (the server's pid
//! is in `mariadbd.pid` there). Servers of live processes (parallel tests)
//! are left alone.
//!
//! `mariadbd` refuses to run as root unless told to (`--user=root`, MariaDB
//! KB "mariadbd Options"), so as root it is told to: the directory is ours
//! and thrown away. The root account is made with
//! `--auth-root-authentication-method=normal` (no password), so the client
//! logs in over the socket without the `unix_socket` plugin.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Prefix of every server directory this module makes in the temp directory.
const PREFIX: &str = "snowleak-mariadbd-";

/// The Debian package that has the binaries, named in the error without them.
pub const PACKAGE: &str = "mariadb-server";

/// How long a fresh server may take to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// `innodb_autoinc_lock_mode`: 0 traditional, 1 consecutive (MariaDB's
/// default), 2 interleaved (MySQL 8's default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LockMode(u8);

impl LockMode {
    /// MariaDB's default, 1 ("consecutive").
    pub const DEFAULT: LockMode = LockMode(1);

    pub fn value(self) -> u8 {
        self.0
    }
}

impl std::str::FromStr for LockMode {
    type Err = String;

    fn from_str(s: &str) -> Result<LockMode, String> {
        match s {
            "0" => Ok(LockMode(0)),
            "1" => Ok(LockMode(1)),
            "2" => Ok(LockMode(2)),
            _ => Err(format!(
                "bad innodb_autoinc_lock_mode '{s}': expected 0 (traditional), 1 (consecutive) or 2 (interleaved)"
            )),
        }
    }
}

impl std::fmt::Display for LockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where the two binaries are.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub server: PathBuf,
    pub install_db: PathBuf,
}

/// `mariadbd` and `mariadb-install-db`: on the PATH, or in `/usr/sbin` and
/// `/usr/bin`, where Debian's `mariadb-server` puts them (`/usr/sbin` is not
/// on an ordinary user's PATH).
pub fn find_binaries() -> Result<Binaries, String> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/bin"].map(PathBuf::from));
    let find = |name: &str| dirs.iter().map(|d| d.join(name)).find(|p| p.is_file());
    match (find("mariadbd"), find("mariadb-install-db")) {
        (Some(server), Some(install_db)) => Ok(Binaries { server, install_db }),
        _ => Err(format!(
            "cannot find mariadbd and mariadb-install-db (looked on the PATH, in /usr/sbin and /usr/bin); \
             install MariaDB (Debian: apt-get install {PACKAGE})"
        )),
    }
}

fn running_as_root() -> bool {
    // The owner of /proc/self is the effective uid of this process.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A running throwaway server. Dropping it kills the server and removes its directory.
#[derive(Debug)]
pub struct Server {
    dir: PathBuf,
    child: Option<Child>,
    lock_mode: LockMode,
    /// How the server was started, to start it again ([`Server::restart`]).
    command: Option<(PathBuf, Vec<std::ffi::OsString>)>,
}

impl Server {
    /// Makes and starts a server; it accepts connections on return.
    pub fn start(lock_mode: LockMode) -> Result<Server, String> {
        Server::start_with(lock_mode, &[])
    }

    /// [`Server::start`] with more of `mariadbd`'s options (`--name=value`),
    /// such as the binary log's for `judge --log mariadb`.
    pub fn start_with(lock_mode: LockMode, options: &[&str]) -> Result<Server, String> {
        let bin = find_binaries()?;
        sweep_stale();
        let dir = crate::servers::make_dir(PREFIX, "server")?;
        // From here on, dropping `server` cleans up whatever was made.
        let mut server = Server {
            dir,
            child: None,
            lock_mode,
            command: None,
        };
        let root = running_as_root();
        let data = server.dir.join("data");
        // A temporary directory of its own: bootstraps started at once that
        // share /tmp fail now and then ("Unknown table 'mysql.tmp_user_sys'"
        // after "Could not remove temporary table '/tmp/#sql-temptable-...'"),
        // as thirteen runs started side by side showed.
        let tmp = server.dir.join("tmp");
        std::fs::create_dir(&tmp).map_err(|e| format!("cannot make {}: {e}", tmp.display()))?;
        let mut install = Command::new(&bin.install_db);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db");
        if root {
            install.arg("--user=root");
        }
        run_quietly(install, "mariadb-install-db")?;
        let log = server.dir.join("server.log");
        let mut command = Command::new(&bin.server);
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--socket={}", server.socket().display()))
            .arg(format!(
                "--pid-file={}",
                server.dir.join("mariadbd.pid").display()
            ))
            .arg(format!("--log-error={}", log.display()))
            .arg("--skip-networking")
            .arg("--innodb-flush-log-at-trx-commit=1")
            .arg(format!("--innodb-autoinc-lock-mode={lock_mode}"))
            // Small, since several servers may run at once (parallel tests).
            .arg("--innodb-buffer-pool-size=64M")
            .arg("--max-connections=100")
            .args(options)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if root {
            command.arg("--user=root");
        }
        server.command = Some((
            bin.server.clone(),
            command.get_args().map(|a| a.to_os_string()).collect(),
        ));
        server.spawn()?;
        Ok(server)
    }

    /// Starts `mariadbd` as it was configured, and waits until it is ready.
    fn spawn(&mut self) -> Result<(), String> {
        let (program, args) = self.command.clone().ok_or("the server was never started")?;
        let child = Command::new(&program)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        self.child = Some(child);
        let log = self.dir.join("server.log");
        self.wait_ready(&log)
    }

    /// Stops the server cleanly (SIGTERM: a normal shutdown, MariaDB KB
    /// "mariadbd Options"/"Shutdown") and starts it again with the same
    /// options; ready on return. What committed is in the binary log, which
    /// the server starts a new file of.
    pub fn restart(&mut self) -> Result<(), String> {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on our own child, not yet reaped.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            child
                .wait()
                .map_err(|e| format!("cannot wait for mariadbd to stop: {e}"))?;
        }
        self.spawn()
    }

    /// The directory holding the data directory, the socket and the server log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The Unix socket the server listens on.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("mariadbd.sock")
    }

    /// The lock mode the server was started with (read it back with [`settings`]).
    pub fn lock_mode(&self) -> LockMode {
        self.lock_mode
    }

    /// Connection options for the server's root account over its socket, in `db`.
    pub fn opts(&self, db: Option<&str>) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .socket(Some(self.socket().to_string_lossy().into_owned()))
            .user(Some("root"))
            .db_name(db)
            .into()
    }

    /// Waits until the server greets a connection on its socket, within
    /// [`READY_WITHIN`]; fails at once if the server exits.
    fn wait_ready(&mut self, log: &Path) -> Result<(), String> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = crate::servers::exited(&mut self.child) {
                return Err(format!(
                    "mariadbd exited at start ({status}): {}",
                    last_error_line(log)
                ));
            }
            if greets(&self.socket()) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "mariadbd did not accept connections within {} s: {}",
                    READY_WITHIN.as_secs(),
                    last_error_line(log)
                ));
            }
            // A poll, not a synchronisation: each round connects afresh.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether a server answers on `socket` with the protocol's greeting (its
/// first packet: a 4-byte header, then protocol version 10; MariaDB KB
/// "Connection" / "Initial Handshake Packet").
fn greets(socket: &Path) -> bool {
    let Ok(mut stream) = std::os::unix::net::UnixStream::connect(socket) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut header = [0u8; 5];
    stream.read_exact(&mut header).is_ok() && header[4] == 10
}

/// The server's version and its `innodb_autoinc_lock_mode`, as it reports them.
pub async fn settings(conn: &mut mysql_async::Conn) -> Result<(String, u8), String> {
    use mysql_async::prelude::Queryable;
    let row: Option<(String, u8)> = conn
        .query_first("SELECT VERSION(), @@innodb_autoinc_lock_mode")
        .await
        .map_err(|e| format!("cannot read the server's settings: {e}"))?;
    row.ok_or_else(|| "the server returned no settings".to_string())
}

fn run_quietly(mut command: Command, name: &str) -> Result<(), String> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {name}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    Err(format!("{name} failed ({}): {}", out.status, cause(&text)))
}

/// The line of a failed tool's output that says why: the first error that is
/// not the closing "[ERROR] Aborting", else the last line written.
fn cause(text: &str) -> &str {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines
        .clone()
        .find(|l| l.contains("ERROR") && !l.ends_with("Aborting"))
        .or_else(|| lines.next_back())
        .unwrap_or("no message")
}

fn last_error_line(log: &Path) -> String {
    std::fs::read_to_string(log)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| l.contains("[ERROR]"))
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("see {}", log.display()))
}

/// Kills the server whose pid file is in `dir` (if that process is a
/// `mariadbd` of this directory) and removes the directory.
fn kill_and_remove(dir: &Path) {
    let pid = std::fs::read_to_string(dir.join("mariadbd.pid"))
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok());
    if let Some(pid) = pid {
        // Only a mariadbd whose command line names this directory's unique
        // part (the name after the owner's pid): a pid reused by something
        // else is left alone.
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let unique_part = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('-'))
            .map_or("", |(_, u)| u);
        let ours = cmdline.contains("mariadbd")
            && !unique_part.is_empty()
            && cmdline.contains(unique_part);
        if ours {
            // SAFETY: kill(2) with a pid and a signal number has no memory effects.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            wait_gone(pid);
        }
    }
    crate::servers::remove_dir(dir, "MariaDB server");
}

/// Waits (bounded) until a killed process that is not our child is gone.
fn wait_gone(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    while Instant::now() < deadline {
        let zombie_or_gone = std::fs::read_to_string(proc_dir.join("stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if zombie_or_gone {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes the servers of processes that no longer exist (runs killed with SIGKILL).
pub fn sweep_stale() {
    // Only directories this module made: a data directory inside.
    for dir in crate::servers::stale_dirs(PREFIX) {
        if dir.join("data").is_dir() {
            tracing::info!(dir = %dir.display(), "removing a MariaDB server left by a killed run");
            kill_and_remove(&dir);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        crate::servers::kill(&mut self.child);
        crate::servers::remove_dir(&self.dir, "MariaDB server");
    }
}

/// A MariaDB error in one line: the server's message when there is one.
pub fn db_error(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => s.message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_modes_parse() {
        for m in ["0", "1", "2"] {
            assert_eq!(m.parse::<LockMode>().unwrap().to_string(), m);
        }
        let err = "3".parse::<LockMode>().unwrap_err();
        assert!(err.starts_with("bad innodb_autoinc_lock_mode '3'"), "{err}");
    }

    #[test]
    fn a_failed_bootstrap_names_its_error_not_the_abort() {
        // mariadb-install-db's own words when it failed (10.11.19, stderr then stdout).
        let text = "2026-11-26  2:06:00 1 [Warning] Could not remove temporary table\n\
                    ERROR: 1051  Unknown table 'mysql.tmp_user_sys'\n\
                    2026-11-26  2:06:00 0 [ERROR] Aborting\n\
                    Installation of system tables failed!  Examine the logs\n";
        assert_eq!(
            cause(text),
            "ERROR: 1051  Unknown table 'mysql.tmp_user_sys'"
        );
        assert_eq!(cause("first\n\nlast\n"), "last");
        assert_eq!(cause(""), "no message");
    }
}
