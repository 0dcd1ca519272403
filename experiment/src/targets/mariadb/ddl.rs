//! The statements of MariaDB's binary log that change a table without
//! naming its rows, read just enough for the truth (pure): `TRUNCATE
//! [TABLE] t`, `ALTER TABLE t ...` (which of its clauses drop or rename a
//! column, rename the table or drop a partition's rows), `DROP TABLE`,
//! `RENAME TABLE` and `CREATE OR REPLACE TABLE`. Everything else is
//! [`Ddl::Other`].
//!
//! With `binlog_format=ROW` a DDL statement is written as its text in a
//! query event (MariaDB KB "Binary Log Formats": "DDL statements are always
//! logged as statements"), as the client sent it, with the session's current
//! database beside it; so a name is read as SQL writes it (MariaDB KB
//! "Identifier Names"): bare, or in backquotes with a backquote doubled
//! inside, optionally `db.` before it, and comments are skipped (an
//! executable comment's text, `/*! ... */` and `/*M! ... */`, is read as
//! SQL, as the server runs it). Double quotes are read as a name too (they
//! quote names under `sql_mode=ANSI_QUOTES`; a string is never where a
//! table name is). Column names are compared without case, as MariaDB
//! compares them (MariaDB KB "Identifier Case-sensitivity").

/// A table as a statement names it: `db.t`, or `t` in the session's database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    pub schema: Option<String>,
    pub table: String,
}

impl Name {
    /// The name with the session's database `default` if it names none.
    pub fn resolve(&self, default: &str) -> (String, String) {
        (
            self.schema.clone().unwrap_or_else(|| default.to_string()),
            self.table.clone(),
        )
    }
}

/// What one clause of an `ALTER TABLE` does, as much as the truth needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Clause {
    /// `DROP [COLUMN] [IF EXISTS] c`.
    DropColumn(String),
    /// `CHANGE [COLUMN] [IF EXISTS] old new ...` or `RENAME COLUMN old TO new`
    /// (`from` may equal `to`: a CHANGE that keeps the name).
    RenameColumn { from: String, to: String },
    /// `RENAME [TO | AS] name`.
    RenameTable(Name),
    /// Rows deleted without a row event: `DROP PARTITION`, `TRUNCATE
    /// PARTITION`, `EXCHANGE PARTITION` (the words, for the message).
    DropsRows(String),
    /// Anything else: a column added or modified, an index, options.
    Other,
}

/// A statement of the log, read for the truth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ddl {
    Truncate(Name),
    Alter {
        table: Name,
        clauses: Vec<Clause>,
    },
    Drop(Vec<Name>),
    /// `RENAME TABLE a TO b, ...`: each pair.
    Rename(Vec<(Name, Name)>),
    /// `CREATE OR REPLACE TABLE t ...`: the table dropped and made again.
    Replace(Name),
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// A bare word: a keyword or a name.
    Word(String),
    /// A name in backquotes (or double quotes).
    Quoted(String),
    /// A string literal in single quotes.
    Str,
    Punct(char),
}

impl Token {
    fn is(&self, keyword: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(keyword))
    }

    fn name(&self) -> Option<String> {
        match self {
            Token::Word(w) | Token::Quoted(w) => Some(w.clone()),
            _ => None,
        }
    }
}

/// The statement's tokens; `None` if it does not read (an unclosed quote or
/// comment).
fn tokens(sql: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = sql.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let rest = &sql[i..];
        if c.is_whitespace() || c == ';' && chars.peek().is_none() {
            continue;
        }
        if rest.starts_with("/*!") || rest.starts_with("/*M!") {
            // An executable comment: its version digits skipped, its text read.
            let skip = if rest.starts_with("/*!") { 2 } else { 3 };
            for _ in 0..skip {
                chars.next();
            }
            while chars.peek().is_some_and(|(_, c)| c.is_ascii_digit()) {
                chars.next();
            }
            continue;
        }
        if rest.starts_with("*/") {
            // The end of an executable comment.
            chars.next();
            continue;
        }
        if let Some(body) = rest.strip_prefix("/*") {
            let end = body.find("*/")? + 4;
            while chars.peek().is_some_and(|(j, _)| *j < i + end) {
                chars.next();
            }
            continue;
        }
        if c == '#' || rest.starts_with("-- ") || rest.starts_with("--\t") || rest == "--" {
            while chars.peek().is_some_and(|(_, c)| *c != '\n') {
                chars.next();
            }
            continue;
        }
        match c {
            '`' | '"' | '\'' => {
                let mut text = String::new();
                loop {
                    let (_, d) = chars.next()?;
                    if d == '\\' && c == '\'' {
                        // A backslash escapes in a string (not with
                        // NO_BACKSLASH_ESCAPES; a name never needs it here).
                        text.push(chars.next()?.1);
                    } else if d != c {
                        text.push(d);
                    } else if chars.peek().is_some_and(|(_, e)| *e == c) {
                        text.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(if c == '\'' {
                    Token::Str
                } else {
                    Token::Quoted(text)
                });
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let mut word = String::from(c);
                while let Some(&(_, d)) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' || d == '$' {
                        word.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Token::Word(word));
            }
            c => out.push(Token::Punct(c)),
        }
    }
    Some(out)
}

/// A cursor over a statement's tokens.
struct Cursor<'a> {
    tokens: &'a [Token],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    /// Takes `keyword` if it is next.
    fn eat(&mut self, keyword: &str) -> bool {
        let hit = self.peek().is_some_and(|t| t.is(keyword));
        self.at += usize::from(hit);
        hit
    }

    fn eat_punct(&mut self, p: char) -> bool {
        let hit = self.peek() == Some(&Token::Punct(p));
        self.at += usize::from(hit);
        hit
    }

    /// `IF EXISTS` or `IF NOT EXISTS`, if next.
    fn eat_if_exists(&mut self) {
        if self.eat("IF") {
            self.eat("NOT");
            self.eat("EXISTS");
        }
    }

    /// `WAIT n` or `NOWAIT`, if next.
    fn wait(&mut self) {
        if self.eat("WAIT") {
            self.at += 1;
        }
        self.eat("NOWAIT");
    }

    fn ident(&mut self) -> Option<String> {
        let name = self.peek()?.name()?;
        self.at += 1;
        Some(name)
    }

    /// `name` or `db.name`.
    fn table(&mut self) -> Option<Name> {
        let first = self.ident()?;
        if self.eat_punct('.') {
            let table = self.ident()?;
            return Some(Name {
                schema: Some(first),
                table,
            });
        }
        Some(Name {
            schema: None,
            table: first,
        })
    }

    /// Comma-separated items, each read by `item`.
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let mut out = vec![item(self)?];
        while self.eat_punct(',') {
            out.push(item(self)?);
        }
        Some(out)
    }
}

/// Reads one statement of a query event. A statement that does not read as
/// one of those above is [`Ddl::Other`].
pub fn parse(sql: &str) -> Ddl {
    tokens(sql)
        .and_then(|tokens| {
            statement(&mut Cursor {
                tokens: &tokens,
                at: 0,
            })
        })
        .unwrap_or(Ddl::Other)
}

fn statement(c: &mut Cursor) -> Option<Ddl> {
    if c.eat("TRUNCATE") {
        c.eat("TABLE");
        return Some(Ddl::Truncate(c.table()?));
    }
    if c.eat("ALTER") {
        c.eat("ONLINE");
        c.eat("IGNORE");
        if !c.eat("TABLE") {
            return Some(Ddl::Other);
        }
        c.eat_if_exists();
        let table = c.table()?;
        c.wait();
        let clauses = split(&c.tokens[c.at..])
            .into_iter()
            .map(|tokens| clause(&mut Cursor { tokens, at: 0 }).unwrap_or(Clause::Other))
            .collect();
        return Some(Ddl::Alter { table, clauses });
    }
    if c.eat("DROP") {
        if c.eat("TEMPORARY") || !(c.eat("TABLE") || c.eat("TABLES")) {
            // A temporary table is the session's own, not the judged one.
            return Some(Ddl::Other);
        }
        c.eat_if_exists();
        return Some(Ddl::Drop(c.list(Cursor::table)?));
    }
    if c.eat("RENAME") {
        if !(c.eat("TABLE") || c.eat("TABLES")) {
            return Some(Ddl::Other);
        }
        let pairs = c.list(|c| {
            c.eat_if_exists();
            let from = c.table()?;
            c.wait();
            if !c.eat("TO") {
                return None;
            }
            Some((from, c.table()?))
        })?;
        return Some(Ddl::Rename(pairs));
    }
    if c.eat("CREATE") && c.eat("OR") && c.eat("REPLACE") {
        if c.eat("TEMPORARY") || !c.eat("TABLE") {
            return Some(Ddl::Other);
        }
        return Some(Ddl::Replace(c.table()?));
    }
    Some(Ddl::Other)
}

/// The clauses of an ALTER TABLE: its tokens split at the commas outside
/// parentheses.
fn split(tokens: &[Token]) -> Vec<&[Token]> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Token::Punct('(') => depth += 1,
            Token::Punct(')') => depth -= 1,
            Token::Punct(',') if depth == 0 => {
                out.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&tokens[start..]);
    out
}

/// What `DROP` is followed by when it is not a column.
const NOT_A_COLUMN: [&str; 11] = [
    "INDEX",
    "KEY",
    "PRIMARY",
    "FOREIGN",
    "CONSTRAINT",
    "CHECK",
    "UNIQUE",
    "FULLTEXT",
    "SPATIAL",
    "SYSTEM",
    "PERIOD",
];

fn clause(c: &mut Cursor) -> Option<Clause> {
    let partition = |c: &mut Cursor, what: &str| {
        Some(if c.peek()?.is("PARTITION") {
            Clause::DropsRows(format!("{what} PARTITION"))
        } else {
            Clause::Other
        })
    };
    if c.eat("DROP") {
        if c.peek()?.is("PARTITION") {
            return partition(c, "DROP");
        }
        if !c.eat("COLUMN")
            && NOT_A_COLUMN
                .iter()
                .any(|k| c.peek().is_some_and(|t| t.is(k)))
        {
            return Some(Clause::Other);
        }
        c.eat_if_exists();
        return Some(Clause::DropColumn(c.ident()?));
    }
    if c.eat("TRUNCATE") {
        return partition(c, "TRUNCATE");
    }
    if c.eat("EXCHANGE") {
        return partition(c, "EXCHANGE");
    }
    if c.eat("CHANGE") {
        c.eat("COLUMN");
        c.eat_if_exists();
        let from = c.ident()?;
        let to = c.ident()?;
        return Some(Clause::RenameColumn { from, to });
    }
    if c.eat("RENAME") {
        if c.eat("COLUMN") {
            c.eat_if_exists();
            let from = c.ident()?;
            if !c.eat("TO") {
                return None;
            }
            let to = c.ident()?;
            return Some(Clause::RenameColumn { from, to });
        }
        if c.peek()?.is("INDEX") || c.peek()?.is("KEY") {
            return Some(Clause::Other);
        }
        if !c.eat("TO") {
            c.eat("AS");
        }
        return Some(Clause::RenameTable(c.table()?));
    }
    Some(Clause::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(schema: Option<&str>, table: &str) -> Name {
        Name {
            schema: schema.map(str::to_string),
            table: table.into(),
        }
    }

    #[test]
    fn truncate_with_or_without_table_bare_quoted_or_qualified() {
        assert_eq!(parse("TRUNCATE TABLE t"), Ddl::Truncate(name(None, "t")));
        assert_eq!(parse("truncate t;"), Ddl::Truncate(name(None, "t")));
        assert_eq!(
            parse("  /* why */ TRUNCATE `my db`.`out``box`"),
            Ddl::Truncate(name(Some("my db"), "out`box"))
        );
        assert_eq!(
            parse("TRUNCATE TABLE app . outbox WAIT 5"),
            Ddl::Truncate(name(Some("app"), "outbox"))
        );
        assert_eq!(
            parse("TRUNCATE \"outbox\""),
            Ddl::Truncate(name(None, "outbox"))
        );
        assert_eq!(parse("TRUNCATE `unclosed"), Ddl::Other);
    }

    #[test]
    fn alter_table_clauses_that_touch_a_column_or_the_table_name() {
        let Ddl::Alter { table, clauses } = parse(
            "ALTER ONLINE TABLE IF EXISTS app.`outbox` ADD COLUMN note text DEFAULT 'a, b', \
             DROP COLUMN IF EXISTS body, DROP `id`, DROP INDEX i, DROP PRIMARY KEY, \
             CHANGE COLUMN old new bigint, MODIFY id varchar(10), RENAME COLUMN a TO b, \
             ADD INDEX (x, y), RENAME INDEX i TO j, ALGORITHM=INPLACE",
        ) else {
            panic!("an ALTER TABLE");
        };
        assert_eq!(table, name(Some("app"), "outbox"));
        let rename = |from: &str, to: &str| Clause::RenameColumn {
            from: from.into(),
            to: to.into(),
        };
        assert_eq!(
            clauses,
            [
                Clause::Other,
                Clause::DropColumn("body".into()),
                Clause::DropColumn("id".into()),
                Clause::Other,
                Clause::Other,
                rename("old", "new"),
                Clause::Other,
                rename("a", "b"),
                Clause::Other,
                Clause::Other,
                Clause::Other,
            ]
        );
        assert_eq!(
            parse("ALTER TABLE t RENAME TO u"),
            Ddl::Alter {
                table: name(None, "t"),
                clauses: vec![Clause::RenameTable(name(None, "u"))]
            }
        );
        assert_eq!(
            parse("alter table t rename as db.u"),
            Ddl::Alter {
                table: name(None, "t"),
                clauses: vec![Clause::RenameTable(name(Some("db"), "u"))]
            }
        );
        assert_eq!(
            parse("ALTER TABLE t DROP PARTITION p0, TRUNCATE PARTITION p1"),
            Ddl::Alter {
                table: name(None, "t"),
                clauses: vec![
                    Clause::DropsRows("DROP PARTITION".into()),
                    Clause::DropsRows("TRUNCATE PARTITION".into())
                ]
            }
        );
        assert_eq!(
            parse("ALTER DATABASE app CHARACTER SET utf8mb4"),
            Ddl::Other
        );
        assert_eq!(parse("ALTER USER u IDENTIFIED BY 'x'"), Ddl::Other);
    }

    #[test]
    fn drop_rename_and_replace_name_their_tables() {
        assert_eq!(
            parse("DROP TABLE IF EXISTS `t` /* generated by server */"),
            Ddl::Drop(vec![name(None, "t")])
        );
        assert_eq!(
            parse("DROP TABLE a, db.b CASCADE"),
            Ddl::Drop(vec![name(None, "a"), name(Some("db"), "b")])
        );
        assert_eq!(parse("DROP TEMPORARY TABLE t"), Ddl::Other);
        assert_eq!(parse("DROP DATABASE app"), Ddl::Other);
        assert_eq!(
            parse("RENAME TABLE t TO t_old, t_new TO t"),
            Ddl::Rename(vec![
                (name(None, "t"), name(None, "t_old")),
                (name(None, "t_new"), name(None, "t"))
            ])
        );
        assert_eq!(
            parse("/*!40000 CREATE OR REPLACE TABLE t (id int) */"),
            Ddl::Replace(name(None, "t"))
        );
        assert_eq!(parse("CREATE TABLE t (id int)"), Ddl::Other);
        assert_eq!(parse("INSERT INTO t VALUES (1)"), Ddl::Other);
        assert_eq!(
            parse("-- a comment\nTRUNCATE t"),
            Ddl::Truncate(name(None, "t"))
        );
        assert_eq!(
            parse("# a comment\nTRUNCATE t"),
            Ddl::Truncate(name(None, "t"))
        );
    }
}
