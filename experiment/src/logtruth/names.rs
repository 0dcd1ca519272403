//! SQL names as `--table` and the logs write them: bare, or quoted with the
//! quote doubled inside (PostgreSQL's `"`, MariaDB's backquote). Pure.

/// How one database quotes a name, and where a bare name ends.
pub struct Quoting {
    pub quote: char,
    /// The characters that end a bare name.
    pub ends: &'static [char],
    /// `--table`'s second part, for the error: `SCHEMA` or `DATABASE`.
    pub container: &'static str,
}

/// PostgreSQL's, as `test_decoding` prints names (`public.t[bigint]:1`).
pub const POSTGRES: Quoting = Quoting {
    quote: '"',
    ends: &['.', ':', '[', ' ', ','],
    container: "SCHEMA",
};

/// MariaDB's.
pub const MARIADB: Quoting = Quoting {
    quote: '`',
    ends: &['.', '`'],
    container: "DATABASE",
};

impl Quoting {
    /// A name at the start of `s` and the rest; `None` if there is none (an
    /// empty or unclosed quoted name).
    pub fn identifier<'a>(&self, s: &'a str) -> Option<(String, &'a str)> {
        if let Some(body) = s.strip_prefix(self.quote) {
            let mut out = String::new();
            let mut chars = body.char_indices();
            while let Some((i, c)) = chars.next() {
                if c != self.quote {
                    out.push(c);
                } else if body[i + 1..].starts_with(self.quote) {
                    out.push(c);
                    chars.next();
                } else {
                    return (!out.is_empty()).then_some((out, &body[i + 1..]));
                }
            }
            return None;
        }
        let end = s.find(self.ends).unwrap_or(s.len());
        (end > 0).then(|| (s[..end].to_string(), &s[end..]))
    }

    /// `--table T`: (`default`, T), or (C, T) for `C.T`.
    pub fn table(&self, spec: &str, default: &str) -> Result<(String, String), String> {
        let bad = || {
            format!(
                "bad --table '{spec}': expected TABLE or {}.TABLE",
                self.container
            )
        };
        let (first, rest) = self.identifier(spec).ok_or_else(bad)?;
        if rest.is_empty() {
            return Ok((default.into(), first));
        }
        let rest = rest.strip_prefix('.').ok_or_else(bad)?;
        match self.identifier(rest) {
            Some((second, "")) => Ok((first, second)),
            _ => Err(bad()),
        }
    }
}
