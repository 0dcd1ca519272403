//! PostgreSQL's log as the commands read it (`logtruth::source::LogSource`):
//! `judge --log postgres` (a throwaway cluster and its slot, judge.rs)
//! and `watch --target postgres:URL` (your slot, watch.rs).

use crate::logtruth::source::{JudgeOpened, LogSource, WatchArgs, WatchOpening};

/// The slot's name unless `--slot` gives one.
pub const DEFAULT_SLOT: &str = "snowleak";

/// PostgreSQL's line in `targets::LOGS`.
pub struct Log;

impl LogSource for Log {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn log(&self) -> &'static str {
        "PostgreSQL's log"
    }

    fn judge_slot(&self, slot: Option<String>) -> Result<Option<String>, String> {
        Ok(Some(slot.unwrap_or_else(|| DEFAULT_SLOT.into())))
    }

    fn judge_check(&self, table: &str, slot: Option<&str>) -> Result<(), String> {
        super::judge::check(table, slot.unwrap_or(DEFAULT_SLOT))
    }

    fn judge_open(
        &self,
        runtime: &tokio::runtime::Runtime,
        table: &str,
        key: &str,
        slot: Option<&str>,
    ) -> Result<JudgeOpened, String> {
        super::judge::open(runtime, table, key, slot.unwrap_or(DEFAULT_SLOT))
    }

    fn watch_example(&self) -> &'static str {
        "postgres:postgresql://USER@HOST/DB"
    }

    fn watch_check(&self, url: &str, args: &WatchArgs) -> Result<WatchOpening, String> {
        let checked = super::watch::check(url, args)?;
        Ok(Box::pin(super::watch::open(checked, args.key.clone())))
    }
}
