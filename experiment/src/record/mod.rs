//! Recording a run into SQLite: the schema and the writer.

pub mod schema;
