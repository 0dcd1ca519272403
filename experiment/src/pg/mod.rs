//! PostgreSQL as a real leak source: a throwaway cluster, schemas whose IDs
//! are taken at transaction start but become visible at commit, writers that
//! load it, and pollers that read it over SQL.

pub mod cluster;
