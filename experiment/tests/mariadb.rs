//! The MariaDB target against a real server started from the system's
//! binaries (Debian: mariadb-server). A test that cannot start it fails,
//! naming the package; none skips.

use mysql_async::prelude::Queryable;
use snowleak::servers::mariadb::{LockMode, Server, settings, sweep_stale};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn start(mode: &str) -> Server {
    Server::start(mode.parse().unwrap()).unwrap_or_else(|e| {
        panic!("MariaDB must start for this test (Debian: mariadb-server): {e}")
    })
}

#[test]
fn the_server_reports_the_lock_mode_it_was_given_and_is_removed() {
    let rt = runtime();
    for mode in ["0", "2"] {
        let server = start(mode);
        let dir = server.dir().to_path_buf();
        let (version, reported, flush, networking) = rt.block_on(async {
            let mut conn = mysql_async::Conn::new(server.opts(None)).await.unwrap();
            let (version, lock) = settings(&mut conn).await.unwrap();
            let (flush, skip): (u8, u8) = conn
                .query_first("SELECT @@innodb_flush_log_at_trx_commit, @@skip_networking")
                .await
                .unwrap()
                .unwrap();
            conn.disconnect().await.unwrap();
            (version, lock, flush, skip)
        });
        assert!(version.contains("MariaDB"), "{version}");
        assert_eq!(reported, mode.parse::<LockMode>().unwrap().value());
        assert_eq!(flush, 1, "durable commits");
        assert_eq!(networking, 1, "a Unix socket only");
        drop(server);
        assert!(!dir.exists(), "the server directory is removed");
    }
}

#[test]
fn a_server_left_by_a_dead_process_is_swept() {
    let server = start("1");
    let name = server
        .dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // Pretend its owner died: a pid that cannot exist (above pid_max).
    let rest = name.strip_prefix("snowleak-mariadb-").unwrap();
    let dir = std::env::temp_dir().join(format!("snowleak-mariadb-4294967295-{rest}"));
    std::fs::rename(server.dir(), &dir).unwrap();
    let pid: i32 = std::fs::read_to_string(dir.join("mariadbd.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The handle's child is reaped by nobody now; the sweep must kill it.
    std::mem::forget(server);
    sweep_stale();
    assert!(!dir.exists(), "the stale server's directory is removed");
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = state.rsplit(')').next().unwrap_or("").trim_start();
    assert!(
        state.is_empty() || state.starts_with('Z'),
        "the stale server is killed: {state}"
    );
}
