//! MariaDB's binary log as the commands read it
//! (`logtruth::source::LogSource`): `judge --log mariadb` (a throwaway
//! server, its binlog read as a replica reads it, judge.rs) and `watch
//! --target mariadb:URL` (your binlog, watch.rs).

use crate::logtruth::source::{JudgeOpened, LogSource, WatchArgs, WatchOpening};

/// MariaDB's line in `targets::LOGS`.
pub struct Log;

impl LogSource for Log {
    fn name(&self) -> &'static str {
        "mariadb"
    }

    fn log(&self) -> &'static str {
        "MariaDB's binary log"
    }

    fn judge_slot(&self, slot: Option<String>) -> Result<Option<String>, String> {
        match slot {
            Some(_) => Err(
                "--slot names PostgreSQL's replication slot: MariaDB's binary log has none".into(),
            ),
            None => Ok(None),
        }
    }

    fn judge_check(&self, table: &str, _slot: Option<&str>) -> Result<(), String> {
        super::judge::check(table)
    }

    fn judge_open(
        &self,
        runtime: &tokio::runtime::Runtime,
        table: &str,
        key: &str,
        _slot: Option<&str>,
    ) -> Result<JudgeOpened, String> {
        super::judge::open(runtime, table, key)
    }

    fn watch_example(&self) -> &'static str {
        "mariadb:mysql://USER@HOST/DB"
    }

    fn watch_check(&self, url: &str, args: &WatchArgs) -> Result<WatchOpening, String> {
        let checked = super::watch::check(url, args)?;
        Ok(Box::pin(super::watch::open(checked, args.key.clone())))
    }
}
