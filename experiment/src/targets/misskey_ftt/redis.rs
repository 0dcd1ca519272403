//! A throwaway `redis-server` for one run, as `servers/postgres.rs` makes a
//! PostgreSQL cluster: the binary found on the PATH or in Debian's places, a
//! fresh temporary directory, a Unix socket in it and no TCP (`port 0`,
//! `unixsocket`), no persistence (`save ""`, `appendonly no`); ready once a
//! connection answers PING (bounded wait). Dropping the handle stops the
//! server and removes the directory, on every way out of a run.
//!
//! A run killed with SIGKILL cannot clean up; its directory's name carries the
//! pid of the process that made it and the server writes its own pid to
//! `redis.pid` in it, so the next start stops every server whose owner is gone
//! and removes its directory. Servers of live processes (parallel tests) are
//! left alone.
//!
//! Configuration directives: redis.io, "Redis configuration" (the
//! self-documented redis.conf): `port 0` disables TCP, `unixsocket` names the
//! socket, `save ""` disables RDB snapshots, `appendonly no` the AOF.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Prefix of every server directory this module makes in the temp directory.
const PREFIX: &str = "snowleak-redis-";
/// How long a fresh server may take to answer PING.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// A running throwaway Redis. Dropping it stops the server and removes its directory.
#[derive(Debug)]
pub struct Redis {
    dir: PathBuf,
    child: Option<Child>,
    version: String,
}

/// Where `redis-server` lives: the PATH, then `/usr/bin` and `/usr/sbin`
/// (Debian's `redis-server` package puts it in `/usr/bin`).
pub fn find_binary() -> Result<PathBuf, String> {
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    path_dirs
        .into_iter()
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("redis-server"))
        .find(|exe| exe.is_file())
        .ok_or_else(|| {
            "cannot find redis-server (looked on the PATH, in /usr/bin and /usr/sbin); \
             install Redis (Debian: apt-get install redis-server)"
                .to_string()
        })
}

impl Redis {
    /// Makes a directory, starts the server in it and waits until it answers PING.
    pub fn start() -> Result<Redis, String> {
        let exe = find_binary()?;
        sweep_stale();
        let dir = crate::servers::make_dir(PREFIX, "Redis")?;
        // From here on, dropping `redis` cleans up whatever was made.
        let mut redis = Redis {
            dir,
            child: None,
            version: String::new(),
        };
        let conf = redis.dir.join("redis.conf");
        std::fs::write(&conf, config_text(&redis.dir))
            .map_err(|e| format!("cannot write {}: {e}", conf.display()))?;
        redis.spawn(&exe)?;
        redis.version = redis.server_version()?;
        Ok(redis)
    }

    /// Runs `redis-server` on the directory's configuration and waits until it answers.
    fn spawn(&mut self, exe: &Path) -> Result<(), String> {
        let child = Command::new(exe)
            .arg(self.dir.join("redis.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        self.child = Some(child);
        self.wait_ready()
    }

    /// Stops the server and starts it again on the same socket and
    /// configuration (`--redis-restart-at`). With no persistence every key is
    /// gone: the lists start empty. Connections to the old server fail from
    /// the stop on; clients connect again. Returns when the server was
    /// stopped and when the new one answered PING (ms since the epoch).
    pub fn restart(&mut self) -> Result<(i64, i64), String> {
        let exe = find_binary()?;
        // As a crash or `SHUTDOWN NOSAVE` leaves it: nothing saved.
        crate::servers::kill(&mut self.child);
        let stopped_ms = crate::clock::now_ms();
        // redis-server replaces a stale socket file itself; removing it here
        // keeps `wait_ready` from connecting to the dead one's path early.
        let _ = std::fs::remove_file(self.socket());
        self.spawn(&exe)?;
        Ok((stopped_ms, crate::clock::now_ms()))
    }

    /// The directory holding the socket, the pid file and the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's Unix socket.
    pub fn socket(&self) -> PathBuf {
        socket_of(&self.dir)
    }

    /// `redis_version` from `INFO server`, e.g. `7.0.15`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// A client for the server's socket (connections are made from it).
    pub fn client(&self) -> Result<redis::Client, String> {
        redis::Client::open(redis::ConnectionAddr::Unix(self.socket()))
            .map_err(|e| format!("cannot make a Redis client: {e}"))
    }

    /// Polls with PING until the server answers, it exits, or the bound passes.
    fn wait_ready(&mut self) -> Result<(), String> {
        let client = self.client()?;
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let mut last = String::from("no answer");
            if self.socket().exists() {
                match client.get_connection() {
                    Ok(mut conn) => match redis::cmd("PING").query::<String>(&mut conn) {
                        Ok(_) => return Ok(()),
                        Err(e) => last = e.to_string(),
                    },
                    Err(e) => last = e.to_string(),
                }
            }
            if let Some(status) = crate::servers::exited(&mut self.child) {
                return Err(format!(
                    "redis-server exited at start ({status}): {}",
                    self.last_log_line()
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "redis-server did not answer PING within {}s ({last}): {}",
                    READY_WITHIN.as_secs(),
                    self.last_log_line()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn server_version(&self) -> Result<String, String> {
        let client = self.client()?;
        let mut conn = client
            .get_connection()
            .map_err(|e| format!("cannot connect to Redis: {e}"))?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut conn)
            .map_err(|e| format!("INFO server failed: {e}"))?;
        Ok(parse_version(&info).unwrap_or("unknown").to_string())
    }

    fn last_log_line(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log"))
            .ok()
            .and_then(|log| {
                log.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "no log".to_string())
    }
}

/// `redis_version:X` from the text of `INFO server` (redis.io, "INFO").
pub fn parse_version(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(str::trim)
}

fn socket_of(dir: &Path) -> PathBuf {
    dir.join("redis.sock")
}

/// The configuration: socket only, nothing written to disk but the log and pid.
fn config_text(dir: &Path) -> String {
    format!(
        "port 0\n\
         unixsocket {socket}\n\
         unixsocketperm 700\n\
         dir {dir}\n\
         pidfile {dir}/redis.pid\n\
         logfile {dir}/redis.log\n\
         daemonize no\n\
         save \"\"\n\
         appendonly no\n",
        socket = socket_of(dir).display(),
        dir = dir.display(),
    )
}

/// Stops the server whose pid is in `dir/redis.pid` if it still runs, then removes `dir`.
fn stop_pid_and_remove(dir: &Path) {
    let pid = std::fs::read_to_string(dir.join("redis.pid"))
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok());
    if let Some(pid) = pid {
        // Only a redis-server: a pid may have been reused since.
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim().starts_with("redis-server") {
            // SAFETY: kill(2) with a pid and a signal number has no memory effects.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
    crate::servers::remove_dir(dir, "Redis");
}

/// Removes the servers of processes that no longer exist (runs killed with SIGKILL).
fn sweep_stale() {
    for dir in crate::servers::stale_dirs(PREFIX) {
        tracing::info!(dir = %dir.display(), "removing a Redis server left by a killed run");
        stop_pid_and_remove(&dir);
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        // No persistence to flush: SIGKILL is as good as SHUTDOWN NOSAVE here.
        crate::servers::kill(&mut self.child);
        crate::servers::remove_dir(&self.dir, "Redis");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_without_persistence_and_cleans_up() {
        let redis = Redis::start().expect("redis-server must start for this test");
        let dir = redis.dir().to_path_buf();
        assert!(
            redis
                .version()
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit()),
            "version {:?}",
            redis.version()
        );
        let mut conn = redis.client().unwrap().get_connection().unwrap();
        let save: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("save")
            .query(&mut conn)
            .unwrap();
        assert_eq!(save, ["save", ""], "no RDB snapshots");
        let port: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("port")
            .query(&mut conn)
            .unwrap();
        assert_eq!(port, ["port", "0"], "no TCP");
        let pushed: i64 = redis::cmd("LPUSH")
            .arg("list:x")
            .arg("a")
            .query(&mut conn)
            .unwrap();
        assert_eq!(pushed, 1);
        drop(conn);
        drop(redis);
        assert!(!dir.exists(), "the directory is removed");
    }

    #[test]
    fn a_server_left_by_a_dead_process_is_swept() {
        let mut redis = Redis::start().expect("redis-server must start for this test");
        let pid: i32 = std::fs::read_to_string(redis.dir().join("redis.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Pretend its owner died: a pid that cannot exist (above pid_max).
        let dir = std::env::temp_dir().join(format!(
            "{PREFIX}4294967295-{}-{}",
            std::process::id(),
            crate::servers::unique()
        ));
        std::fs::rename(redis.dir(), &dir).unwrap();
        let child = redis.child.take().unwrap();
        std::mem::forget(redis);
        sweep_stale();
        assert!(!dir.exists(), "the stale directory is removed");
        // The server was killed: reap it (it is our child) and see it gone.
        let mut child = child;
        let status = child.wait().unwrap();
        assert!(!status.success(), "killed, not exited: {status}");
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn a_restart_keeps_the_socket_and_loses_every_list() {
        let mut redis = Redis::start().expect("redis-server must start for this test");
        let client = redis.client().unwrap();
        let mut conn = client.get_connection().unwrap();
        let _: i64 = redis::cmd("LPUSH")
            .arg("list:x")
            .arg("a")
            .query(&mut conn)
            .unwrap();
        let pid_before = std::fs::read_to_string(redis.dir().join("redis.pid")).unwrap();
        let (stopped, ready) = redis.restart().expect("the server starts again");
        assert!(stopped <= ready);
        assert!(
            redis::cmd("PING").query::<String>(&mut conn).is_err(),
            "a connection to the stopped server fails"
        );
        let mut conn = client.get_connection().unwrap();
        let len: i64 = redis::cmd("LLEN").arg("list:x").query(&mut conn).unwrap();
        assert_eq!(len, 0, "no persistence: the list is gone");
        let pid_after = std::fs::read_to_string(redis.dir().join("redis.pid")).unwrap();
        assert_ne!(pid_before, pid_after, "a new process");
    }

    #[test]
    fn the_version_is_read_from_info() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n";
        assert_eq!(parse_version(info), Some("7.0.15"));
        assert_eq!(parse_version("# Server\r\n"), None);
    }
}
