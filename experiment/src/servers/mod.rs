//! Throwaway servers a run starts from the system's binaries and removes at
//! its end: shared by the targets that need them, so that no target imports
//! another to get one.

pub mod mariadb;
pub mod postgres;
pub mod redis;
