//! Recording a run into SQLite: the schema and the writer.

pub mod schema;
pub mod writer;

pub use writer::{PollerInfo, RecordSender, Recorder, RequestRow, RunInfo, StatusRow, TruthRow};
