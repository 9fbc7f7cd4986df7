//! The words of a statement's text, as the listener reads them to tell
//! transaction control and command tags apart (the SQL engine parses it).

/// The first word of a statement, upper-cased (comments skipped).
pub fn first_word(statement: &str) -> String {
    words(statement).next().unwrap_or_default()
}

/// The second word (`START TRANSACTION`).
pub fn second_word(statement: &str) -> String {
    words(statement).nth(1).unwrap_or_default()
}

/// Every word, upper-cased, `--` comment lines skipped.
pub fn words(statement: &str) -> impl Iterator<Item = String> + '_ {
    let code: String = statement.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join(" ");
    code.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_uppercase)
        .collect::<Vec<_>>()
        .into_iter()
}

/// Whether `text` holds nothing but blank and `--` comment lines.
pub fn only_comments(text: &str) -> bool {
    text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with("--"))
}
