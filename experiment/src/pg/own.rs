//! `--target postgres:postgresql://USER@HOST/DB --table NAME`: the user's own
//! database, polled read-only.

use crate::app::{RunArgs, RunSummary};

pub fn run(_args: RunArgs, _url: &str) -> Result<RunSummary, String> {
    Err("your own database is not supported yet".into())
}
