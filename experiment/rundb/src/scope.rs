//! Which statuses an endpoint serves: a client polling a local timeline, one
//! author's posts or a home timeline is owed only those, not every status
//! of the truth. `experiment serve --record` writes the scope of each client
//! request (`client_requests.scope`) and the author of each status
//! (`truth_authors`); `analyze` owes a client only the statuses some scope of
//! its requests admits.
//!
//! The text form, one per request: `all`, `local`, `remote`, `none` (an
//! endpoint that serves nothing of the timeline, such as Misskey's
//! `withFiles` on a timeline without files), or `authors:3,5,8` (the posts of
//! those authors: one author's timeline, or a home timeline's follow set),
//! or `account:local:3` / `account:remote:3` (one account's posts: author 3's
//! statuses of one origin, as a Mastodon account is local `user3` or
//! `user3@remote.example`).

use std::collections::BTreeSet;
use std::fmt;

/// The statuses one endpoint serves.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    All,
    /// Statuses posted on the server itself (`truth.origin` not `remote...`).
    Local,
    /// Statuses from other servers (`truth.origin` `remote` or `remote-fetched`).
    Remote,
    None,
    /// The posts of these authors (`truth_authors.author`).
    Authors(BTreeSet<i64>),
    /// One account's posts: `author`'s statuses posted on the server itself
    /// (`remote` false) or arriving from elsewhere (`remote` true).
    Account {
        remote: bool,
        author: i64,
    },
}

impl Scope {
    /// Whether a status of `origin` (the truth's) and `author` (if known) is
    /// served. A status whose author is unknown is outside every `authors:`
    /// scope.
    pub fn admits(&self, origin: &str, author: Option<i64>) -> bool {
        let remote = origin.starts_with("remote");
        match self {
            Scope::All => true,
            Scope::Local => !remote,
            Scope::Remote => remote,
            Scope::None => false,
            Scope::Authors(set) => author.is_some_and(|a| set.contains(&a)),
            Scope::Account {
                remote: of_remote,
                author: of,
            } => *of_remote == remote && author == Some(*of),
        }
    }

    /// Whether it needs each status's author.
    pub fn needs_authors(&self) -> bool {
        matches!(self, Scope::Authors(_) | Scope::Account { .. })
    }

    /// Reads the text form; `None` for anything else.
    pub fn parse(text: &str) -> Option<Scope> {
        Some(match text {
            "all" => Scope::All,
            "local" => Scope::Local,
            "remote" => Scope::Remote,
            "none" => Scope::None,
            _ if text.starts_with("account:") => {
                let (origin, author) = text["account:".len()..].split_once(':')?;
                let remote = match origin {
                    "local" => false,
                    "remote" => true,
                    _ => return None,
                };
                Scope::Account {
                    remote,
                    author: author.parse().ok()?,
                }
            }
            _ => {
                let list = text.strip_prefix("authors:")?;
                let authors = list
                    .split(',')
                    .filter(|a| !a.is_empty())
                    .map(|a| a.parse().ok())
                    .collect::<Option<BTreeSet<i64>>>()?;
                Scope::Authors(authors)
            }
        })
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::All => f.write_str("all"),
            Scope::Local => f.write_str("local"),
            Scope::Remote => f.write_str("remote"),
            Scope::None => f.write_str("none"),
            Scope::Authors(set) => {
                f.write_str("authors:")?;
                for (i, a) in set.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{a}")?;
                }
                Ok(())
            }
            Scope::Account { remote, author } => {
                let origin = if *remote { "remote" } else { "local" };
                write!(f, "account:{origin}:{author}")
            }
        }
    }
}

/// The union of the scopes a client's requests had: what it is owed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scopes(BTreeSet<Scope>);

impl Scopes {
    pub fn add(&mut self, scope: Scope) {
        self.0.insert(scope);
    }

    /// Whether some scope admits the status (an empty union admits nothing).
    pub fn admits(&self, origin: &str, author: Option<i64>) -> bool {
        self.0.iter().any(|s| s.admits(origin, author))
    }

    /// Whether every status is admitted whatever its origin and author.
    pub fn is_all(&self) -> bool {
        self.0.contains(&Scope::All)
    }

    pub fn needs_authors(&self) -> bool {
        !self.is_all() && self.0.iter().any(Scope::needs_authors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_round_trips() {
        for text in [
            "all",
            "local",
            "remote",
            "none",
            "authors:3,5,8",
            "authors:",
            "account:local:3",
            "account:remote:7",
        ] {
            let scope = Scope::parse(text).unwrap();
            assert_eq!(scope.to_string(), text);
        }
        assert_eq!(Scope::parse("authors:8,3"), Scope::parse("authors:3,8"));
        for bad in [
            "",
            "All",
            "authors:x",
            "authors",
            "local,remote",
            "account:3",
            "account:elsewhere:3",
            "account:local:x",
        ] {
            assert_eq!(Scope::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn each_scope_admits_what_its_endpoint_serves() {
        let local = ("local", Some(3));
        let worker = ("gen2", Some(5));
        let remote = ("remote", Some(3));
        let fetched = ("remote-fetched", None);
        let admits = |s: &str, (o, a): (&str, Option<i64>)| Scope::parse(s).unwrap().admits(o, a);
        for status in [local, worker, remote, fetched] {
            assert!(admits("all", status));
            assert!(!admits("none", status));
        }
        assert!(admits("local", local) && admits("local", worker));
        assert!(!admits("local", remote) && !admits("local", fetched));
        assert!(admits("remote", remote) && admits("remote", fetched) && !admits("remote", local));
        assert!(admits("authors:3", local) && admits("authors:3", remote));
        assert!(!admits("authors:3", worker) && !admits("authors:3,5", fetched));
        // An account is one author on one side: local user3 is not user3@remote.example.
        assert!(admits("account:local:3", local) && !admits("account:local:3", remote));
        assert!(admits("account:remote:3", remote) && !admits("account:remote:3", local));
        assert!(!admits("account:local:3", worker) && !admits("account:remote:3", fetched));
    }

    #[test]
    fn a_union_admits_what_any_member_does() {
        let mut scopes = Scopes::default();
        assert!(!scopes.admits("local", Some(1)), "no request: nothing owed");
        scopes.add(Scope::Local);
        scopes.add(Scope::parse("authors:7").unwrap());
        assert!(scopes.admits("local", None));
        assert!(scopes.admits("remote", Some(7)));
        assert!(!scopes.admits("remote", Some(8)));
        assert!(scopes.needs_authors() && !scopes.is_all());
        scopes.add(Scope::All);
        assert!(scopes.is_all() && !scopes.needs_authors());
    }
}
