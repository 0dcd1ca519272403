//! Recording a run into SQLite: the schema and the writer.

pub use rundb::schema;
mod checkpoint;
pub mod truth;
pub mod writer;

pub use writer::{
    PollerRow, RecordSender, Recorder, RequestRecord, RunRow, StatusRecord, TruthRow,
};
