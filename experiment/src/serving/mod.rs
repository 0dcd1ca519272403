//! What every backend of `experiment serve` shares, below the targets that
//! serve: where it listens and records ([`ListenArgs`]), which backend
//! serves ([`Backend`], chosen by `targets::ServeArgs`), the clients named by their credential
//! ([`client_names`]), and the layer that records every timeline exchange
//! ([`recording`]). Each backend is its target's server face
//! (`targets/*/serve.rs`); `targets/mod.rs` starts the one asked for.

pub mod recording;

use crate::sim::server;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Where `experiment serve` listens and records.
#[derive(clap::Args, Debug, Clone)]
pub struct ListenArgs {
    /// Seed of the simulator's random stream (same seed, same statuses).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Address to listen on. Anything but loopback is reachable by others: a warning is printed.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Record every client's timeline requests and what each was served, with
    /// the truth, in this run database, so that `analyze FILE` judges each
    /// client (docs/judging.md). Clients are told apart by their credential
    /// (kept only as a short hash) or else their User-Agent.
    #[arg(long, value_name = "FILE.db")]
    pub record: Option<PathBuf>,
    /// Name the client whose token is in the environment variable ENV
    /// (repeatable; with --record): its poller is called NAME.
    #[arg(long = "client", value_name = "NAME=ENV")]
    pub clients: Vec<String>,
    /// Print nothing on standard output (`experiment judge`, whose output is
    /// the verdicts; not a flag).
    #[arg(skip)]
    pub quiet: bool,
}

impl ListenArgs {
    /// Listens on `--addr` (a warning when others can reach it); returns the
    /// listener and the address bound (`--addr 127.0.0.1:0` picks a port).
    pub async fn listen(&self) -> Result<(tokio::net::TcpListener, SocketAddr), String> {
        let addr: SocketAddr = self.addr.parse().map_err(|_| {
            format!(
                "bad --addr '{}': expected IP:PORT such as 127.0.0.1:8080",
                self.addr
            )
        })?;
        if !addr.ip().is_loopback() {
            eprintln!(
                "warning: listening on {addr}, which is not a loopback address: other machines can reach the server"
            );
        }
        let listener = server::bind(addr).await?;
        let bound = listener
            .local_addr()
            .map_err(|e| format!("no local address: {e}"))?;
        Ok((listener, bound))
    }

    /// `--client` values as credential -> name, with the names the caller
    /// gives beside them (`experiment judge` names the command it runs);
    /// refused without `--record`.
    pub fn client_names(
        &self,
        names: HashMap<String, String>,
    ) -> Result<HashMap<String, String>, String> {
        if self.record.is_none() && !self.clients.is_empty() {
            return Err("--client names a client of --record: add --record FILE.db".into());
        }
        let mut all = client_names(&self.clients)?;
        all.extend(names);
        Ok(all)
    }
}

/// What serves the timeline of `experiment serve` (and of `judge` without
/// `--log`): each is a target's server face. A database's log judged
/// against a table is no backend: that is `judge --log NAME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The embedded leaky simulator.
    Simulator,
    /// A throwaway PostgreSQL cluster loaded by writers, served in the Mastodon dialect.
    Postgres,
    /// Misskey's Fanout Timeline: a throwaway Redis and PostgreSQL loaded by
    /// note creators, served in the Misskey dialect (docs/misskey-ftt.md).
    MisskeyFtt,
}

impl Backend {
    /// Every backend, in the order `--help` names them.
    pub const ALL: [Backend; 3] = [Backend::Simulator, Backend::Postgres, Backend::MisskeyFtt];

    /// Its name, as `--backend` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Simulator => "simulator",
            Backend::Postgres => "postgres",
            Backend::MisskeyFtt => "misskey-ftt",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Backend, String> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                format!("unknown backend '{s}': expected simulator, postgres or misskey-ftt")
            })
    }
}

/// `--client NAME=ENV` values as credential -> name; the tokens come from
/// the environment, never from the command line.
pub fn client_names(specs: &[String]) -> Result<HashMap<String, String>, String> {
    let mut names = HashMap::new();
    for spec in specs {
        let (name, var) = spec
            .split_once('=')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
            .ok_or_else(|| {
                format!(
                    "bad --client '{spec}': expected NAME=ENV (the variable that holds its token)"
                )
            })?;
        let token = std::env::var(var).map_err(|_| {
            format!("--client {name}={var}: the environment variable {var} is not set")
        })?;
        names.insert(token.trim().to_string(), name.to_string());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_names_come_from_the_environment_and_a_missing_one_is_refused() {
        let err = client_names(&["bot=SNOWLEAK_NO_SUCH_VARIABLE_SET".into()]).unwrap_err();
        assert!(
            err.contains("SNOWLEAK_NO_SUCH_VARIABLE_SET is not set"),
            "{err}"
        );
        let err = client_names(&["no-equals".into()]).unwrap_err();
        assert!(err.starts_with("bad --client"), "{err}");
        assert!(client_names(&[]).unwrap().is_empty());
    }
}
