//! SQL injection screening of user SQL. The text is tokenized (string literals,
//! quoted identifiers, numbers, words, comments), so keywords inside literals never
//! match; then each rule looks for a shape that legitimate hand-written or
//! generated SQL rarely has. A finding flags the query and records an alert; it
//! never blocks it (the statement runs as sent). Rules:
//!
//! - `tautology`: `OR` followed by two identical constants compared with `=`
//!   (`OR 1=1`, `OR 'a'='a'`, `OR ('x'='x')`), or `OR TRUE`.
//! - `stacked_query`: `;` then a schema-destroying statement (DROP, TRUNCATE,
//!   ALTER, GRANT, REVOKE, SHUTDOWN, EXEC) after a statement that ends in a string
//!   literal, or a SELECT ending in a constant (`… WHERE id = 5; DROP TABLE t`).
//! - `comment_after_quote`: a comment glued to a string literal (`'admin'--`,
//!   `'x'/*`), a comment containing a quote (`-- '`), or an inline comment
//!   splitting a word (`UN/**/ION`).
//! - `union_probe`: `UNION [ALL] SELECT` whose select list is only NULLs and
//!   numbers, or a UNION that reads a system catalog (information_schema,
//!   pg_catalog, sqlite_master, mysql.user).
//! - `time_delay`: SLEEP(, PG_SLEEP(, BENCHMARK(, WAITFOR DELAY, DBMS_LOCK.SLEEP.

/// One rule match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A word, upper-cased (keywords, identifiers, function names).
    Word(String),
    Num(String),
    /// A string literal's content (also an unterminated one).
    Str(String),
    /// A comment; `glued` when no space separates it from the token before it.
    Comment {
        text: String,
        glued: bool,
        block: bool,
    },
    Semi,
    /// Any other punctuation or operator.
    Op(String),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    /// No whitespace between this token and the one before.
    glued: bool,
}

fn lex(sql: &str) -> Vec<Token> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out: Vec<Token> = Vec::new();
    let mut i = 0;
    let mut glued = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            glued = false;
            i += 1;
            continue;
        }
        let start_glued = glued && !out.is_empty();
        glued = true;
        let tok = if c == '\'' {
            let mut s = String::new();
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        s.push('\'');
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                s.push(chars[i]);
                i += 1;
            }
            Tok::Str(s)
        } else if c == '"' || c == '`' {
            let mut s = String::new();
            i += 1;
            while i < chars.len() && chars[i] != c {
                s.push(chars[i]);
                i += 1;
            }
            i += 1;
            Tok::Word(s.to_uppercase())
        } else if c == '-' && chars.get(i + 1) == Some(&'-') || c == '#' {
            let skip = if c == '#' { 1 } else { 2 };
            let mut s = String::new();
            i += skip;
            while i < chars.len() && chars[i] != '\n' {
                s.push(chars[i]);
                i += 1;
            }
            Tok::Comment { text: s, glued: start_glued, block: false }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            let mut s = String::new();
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                s.push(chars[i]);
                i += 1;
            }
            i += 2;
            Tok::Comment { text: s, glued: start_glued, block: true }
        } else if c.is_ascii_digit() {
            let mut s = String::new();
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                s.push(chars[i]);
                i += 1;
            }
            Tok::Num(s)
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let mut s = String::new();
            while i < chars.len() && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '$' | '.')) {
                s.push(chars[i]);
                i += 1;
            }
            Tok::Word(s.to_uppercase())
        } else if c == ';' {
            i += 1;
            Tok::Semi
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            if matches!(two.as_str(), "<>" | "!=" | "<=" | ">=" | "==" | "||") {
                i += 2;
                Tok::Op(two)
            } else {
                i += 1;
                Tok::Op(c.to_string())
            }
        };
        out.push(Token { tok, glued: start_glued });
        // A token directly after a block comment is glued to it.
    }
    out
}

fn is_word(t: &Tok, w: &str) -> bool {
    matches!(t, Tok::Word(x) if x == w)
}

fn is_const(t: &Tok) -> bool {
    matches!(t, Tok::Num(_) | Tok::Str(_))
}

const DESTRUCTIVE: &[&str] = &["DROP", "TRUNCATE", "ALTER", "GRANT", "REVOKE", "SHUTDOWN", "EXEC", "EXECUTE"];
const CATALOGS: &[&str] = &["INFORMATION_SCHEMA", "PG_CATALOG", "SQLITE_MASTER", "SQLITE_SCHEMA", "MYSQL.USER", "SYS.", "MASTER.."];

/// Screens `sql`; an empty result means nothing suspicious.
pub fn screen(sql: &str) -> Vec<Finding> {
    let all = lex(sql);
    let mut found: Vec<Finding> = Vec::new();
    let mut add = |rule: &'static str, detail: String| {
        if !found.iter().any(|f| f.rule == rule) {
            found.push(Finding { rule, detail });
        }
    };

    // Comment tricks (need the comments themselves).
    for (i, t) in all.iter().enumerate() {
        if let Tok::Comment { text, glued, block } = &t.tok {
            let prev = i.checked_sub(1).map(|p| &all[p].tok);
            if *glued && matches!(prev, Some(Tok::Str(_))) {
                add("comment_after_quote", "a comment directly after a string literal".into());
            } else if text.contains('\'') {
                add("comment_after_quote", "a comment hiding a quote".into());
            } else if *block
                && matches!(prev, Some(Tok::Word(_)))
                && *glued
                && all.get(i + 1).is_some_and(|n| n.glued && matches!(n.tok, Tok::Word(_)))
            {
                add("comment_after_quote", "an inline comment splitting a word".into());
            }
        }
    }

    // The other rules look at the code without comments.
    let toks: Vec<&Tok> = all.iter().map(|t| &t.tok).filter(|t| !matches!(t, Tok::Comment { .. })).collect();
    for i in 0..toks.len() {
        let t = toks[i];
        // Tautologies.
        if is_word(t, "OR") {
            let mut j = i + 1;
            while toks.get(j).is_some_and(|t| matches!(t, Tok::Op(o) if o == "(")) {
                j += 1;
            }
            match (toks.get(j), toks.get(j + 1), toks.get(j + 2)) {
                (Some(a), Some(Tok::Op(op)), Some(b)) if is_const(a) && (op == "=" || op == "==") && a == b => {
                    add("tautology", format!("OR {} = {}", show(a), show(b)));
                }
                (Some(Tok::Word(w)), next, _) if w == "TRUE" && !matches!(next, Some(Tok::Op(o)) if o == "=") => {
                    add("tautology", "OR TRUE".into());
                }
                _ => {}
            }
        }
        // Stacked queries.
        if matches!(t, Tok::Semi)
            && let Some(Tok::Word(next)) = toks.get(i + 1)
            && DESTRUCTIVE.contains(&next.as_str())
        {
            let stmt_start = toks[..i].iter().rposition(|t| matches!(t, Tok::Semi)).map_or(0, |p| p + 1);
            let prev = &toks[stmt_start..i];
            let ends_str = matches!(prev.last(), Some(Tok::Str(_)));
            let select_const = prev.first().is_some_and(|t| is_word(t, "SELECT")) && prev.last().is_some_and(|t| is_const(t));
            if ends_str || select_const {
                add("stacked_query", format!("; {next} after a statement ending in a constant"));
            }
        }
        // UNION probes.
        if is_word(t, "UNION") {
            let mut j = i + 1;
            if toks.get(j).is_some_and(|t| is_word(t, "ALL") || is_word(t, "DISTINCT")) {
                j += 1;
            }
            if toks.get(j).is_some_and(|t| is_word(t, "SELECT")) {
                let list: Vec<&Tok> = toks[j + 1..]
                    .iter()
                    .take_while(|t| !is_word(t, "FROM") && !matches!(t, Tok::Semi) && !is_word(t, "UNION"))
                    .copied()
                    .collect();
                let only_fillers = !list.is_empty()
                    && list.iter().all(|t| is_word(t, "NULL") || matches!(t, Tok::Num(_)) || matches!(t, Tok::Op(o) if o == ","));
                if only_fillers {
                    add("union_probe", "UNION SELECT of only NULLs/numbers (column-count probe)".into());
                }
                let rest_reads_catalog = toks[j + 1..]
                    .iter()
                    .take_while(|t| !matches!(t, Tok::Semi))
                    .any(|t| matches!(t, Tok::Word(w) if CATALOGS.iter().any(|c| w.starts_with(c))));
                if rest_reads_catalog {
                    add("union_probe", "UNION SELECT from a system catalog".into());
                }
            }
        }
        // Time delays.
        if let Tok::Word(w) = t {
            let call = toks.get(i + 1).is_some_and(|t| matches!(t, Tok::Op(o) if o == "("));
            if call && matches!(w.as_str(), "SLEEP" | "PG_SLEEP" | "BENCHMARK" | "DBMS_LOCK.SLEEP" | "PG_SLEEP_FOR") {
                add("time_delay", format!("{w}() call"));
            }
            if w == "WAITFOR" && toks.get(i + 1).is_some_and(|t| is_word(t, "DELAY") || is_word(t, "TIME")) {
                add("time_delay", "WAITFOR DELAY".into());
            }
        }
    }
    found
}

fn show(t: &Tok) -> String {
    match t {
        Tok::Str(s) => format!("'{s}'"),
        Tok::Num(n) => n.clone(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::screen;

    fn rules(sql: &str) -> Vec<&'static str> {
        screen(sql).into_iter().map(|f| f.rule).collect()
    }

    #[test]
    fn tautologies() {
        assert_eq!(rules("SELECT * FROM users WHERE name = '' OR '1'='1'"), ["tautology"]);
        assert_eq!(rules("SELECT * FROM users WHERE id = 5 OR 1=1"), ["tautology"]);
        assert_eq!(rules("select * from t where a = 'x' or ('a' = 'a')"), ["tautology"]);
        assert_eq!(rules("SELECT * FROM t WHERE a = 1 OR TRUE"), ["tautology"]);
        // An unterminated injected literal still matches.
        assert_eq!(rules("SELECT * FROM t WHERE name = 'x' OR 'a'='a"), ["tautology"]);
    }

    #[test]
    fn stacked_queries() {
        assert_eq!(rules("SELECT * FROM t WHERE name = 'x'; DROP TABLE t"), ["stacked_query"]);
        assert_eq!(rules("SELECT * FROM t WHERE id = 5; drop table users"), ["stacked_query"]);
        assert_eq!(rules("UPDATE t SET a = 'x'; TRUNCATE t"), ["stacked_query"]);
    }

    #[test]
    fn comment_tricks() {
        assert_eq!(rules("SELECT * FROM users WHERE name = 'admin'--' AND password = 'x'"), ["comment_after_quote"]);
        assert_eq!(rules("SELECT * FROM users WHERE name = 'admin'/* hidden */"), ["comment_after_quote"]);
        assert_eq!(rules("SELECT * FROM users WHERE name = 'a' -- ' AND pw = 'b'"), ["comment_after_quote"]);
        assert_eq!(rules("SELECT a FROM t UN/**/ION SELECT b FROM u"), ["comment_after_quote"]);
    }

    #[test]
    fn union_probes() {
        assert_eq!(rules("SELECT name FROM t WHERE id = 1 UNION SELECT NULL, NULL"), ["union_probe"]);
        assert_eq!(rules("SELECT a FROM t UNION ALL SELECT 1,2,3"), ["union_probe"]);
        assert_eq!(rules("SELECT a FROM t UNION SELECT table_name FROM information_schema.tables"), ["union_probe"]);
    }

    #[test]
    fn time_delays() {
        assert_eq!(rules("SELECT * FROM t WHERE id = 1 AND SLEEP(5)"), ["time_delay"]);
        assert_eq!(rules("SELECT pg_sleep(10)"), ["time_delay"]);
        assert_eq!(rules("SELECT BENCHMARK(1000000, MD5('x'))"), ["time_delay"]);
        assert_eq!(rules("SELECT 1; WAITFOR DELAY '0:0:5'"), ["time_delay"]);
    }

    #[test]
    fn legitimate_sql_is_not_flagged() {
        for sql in [
            "SELECT * FROM users WHERE name = 'O''Brien' OR name = 'Smith'",
            "SELECT * FROM t WHERE 1=1 AND a = 2",
            "SELECT * FROM t WHERE a = 1 OR b = 1",
            "SELECT * FROM t WHERE a = b OR c = 'x'",
            "BEGIN; INSERT INTO t VALUES (1, 'a'); UPDATE t SET b = 'c' WHERE a = 1; COMMIT",
            "BEGIN; SELECT * FROM t WHERE id = 1; DELETE FROM t WHERE id = 1; COMMIT",
            "CREATE TABLE t (a INT); INSERT INTO t VALUES (1); DROP TABLE t",
            "SELECT a FROM t UNION SELECT a FROM u",
            "SELECT a FROM t UNION ALL SELECT b FROM u WHERE c = 2",
            "SELECT 'it''s -- not a comment', '/* nor this */' FROM t",
            "SELECT 'OR 1=1; DROP TABLE t; UNION SELECT NULL' AS text",
            "-- list the users\nSELECT * FROM users WHERE active = TRUE",
            "SELECT a /* the key */ FROM t WHERE b = 'x' -- trailing note",
            "SELECT * FROM sleep_log WHERE sleep_hours > 8",
            "SELECT COUNT(*) FROM t WHERE a = 'x' OR a = 'y'",
            "ALTER TABLE t ADD COLUMN c INT; ALTER TABLE t DROP COLUMN d",
            "SELECT * FROM t WHERE flag = TRUE OR other = FALSE",
        ] {
            assert_eq!(rules(sql), Vec::<&str>::new(), "flagged: {sql}");
        }
    }
}
