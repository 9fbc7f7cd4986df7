//! Full-text search over transcripts, meetings and comments, ranked with
//! Okapi BM25 (k1 = 1.2, b = 0.75) from an inverted index kept in Tessera:
//!
//! - `search_docs`: one row per indexed text (a transcript segment, a
//!   meeting's title and description, a comment) with its owner (the
//!   meeting's owner), type, time and length in terms;
//! - `search_postings`: one row per (term, document) with the term's
//!   frequency, indexed by term, so a query reads only the postings of its
//!   terms (an index scan per term, never a scan of the texts);
//! - `search_stats`: per owner, the document count and total length (BM25's
//!   N and average document length), kept by the same transaction that adds
//!   a document.
//!
//! A document and its postings are written in the same SQL request (one
//! transaction) as the text they index, so a search never sees half of one. Terms are lower-cased
//! alphanumeric words of 2 to 64 characters, minus English stop words; there
//! is no stemming. A caller searches the meetings they own.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::clock::{iso, parse_iso};
use crate::db::Db;
use crate::error::{AppError, AppResult};

/// The tables this service owns.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS search_docs (id TEXT PRIMARY KEY, doc_type TEXT NOT NULL, owner_id TEXT NOT NULL, meeting_id TEXT NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL, at BIGINT NOT NULL, length BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS search_postings (id TEXT PRIMARY KEY, term TEXT NOT NULL, doc_id TEXT NOT NULL, owner_id TEXT NOT NULL, tf BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS search_postings_term ON search_postings (term)",
    "CREATE TABLE IF NOT EXISTS search_stats (owner_id TEXT PRIMARY KEY, docs BIGINT NOT NULL, total_len BIGINT NOT NULL)",
];

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The kinds of indexed documents (the `type` query parameter).
pub const TYPES: &[&str] = &["transcript", "meeting", "comment"];

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such",
    "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
];

/// The index terms of `text` and how often each occurs.
pub fn terms(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let word = word.to_lowercase();
        if (2..=64).contains(&word.chars().count()) && !STOP_WORDS.contains(&word.as_str()) {
            *out.entry(word).or_insert(0) += 1;
        }
    }
    out
}

/// A document to index.
pub struct Doc<'a> {
    /// The id of what it indexes (segment, meeting or comment id).
    pub id: &'a str,
    pub doc_type: &'a str,
    pub owner_id: &'a str,
    pub meeting_id: &'a str,
    /// The meeting's title, shown with the hit.
    pub title: &'a str,
    /// The indexed text.
    pub body: &'a str,
    pub at_ms: i64,
}

/// The statements that add `doc` to the index (the document, its postings and
/// the owner's statistics), with placeholders numbered after the `offset`
/// parameters of the statements they are sent with: a caller appends them to
/// its own write, so the text and its index entries commit together.
pub fn index_sql(doc: &Doc<'_>, offset: usize) -> (String, Vec<Value>) {
    let terms = terms(doc.body);
    let length: u64 = terms.values().sum();
    let mut params = vec![
        json!(doc.id),
        json!(doc.doc_type),
        json!(doc.owner_id),
        json!(doc.meeting_id),
        json!(doc.title),
        json!(doc.body),
        json!(doc.at_ms),
        json!(length),
    ];
    let p = |i: usize| format!("${}", offset + i);
    let mut sql = format!(
        "INSERT INTO search_docs (id, doc_type, owner_id, meeting_id, title, body, at, length) VALUES ({}, {}, {}, {}, {}, {}, {}, {}) ON CONFLICT (id) DO NOTHING;\n\
         INSERT INTO search_stats (owner_id, docs, total_len) VALUES ({}, 1, {}) \
         ON CONFLICT (owner_id) DO UPDATE SET docs = search_stats.docs + 1, total_len = search_stats.total_len + {}",
        p(1),
        p(2),
        p(3),
        p(4),
        p(5),
        p(6),
        p(7),
        p(8),
        p(3),
        p(8),
        p(8)
    );
    if !terms.is_empty() {
        let mut values = Vec::new();
        for (term, tf) in &terms {
            let n = params.len();
            values.push(format!("({}, {}, {}, {}, {})", p(n + 1), p(n + 2), p(1), p(3), p(n + 3)));
            params.push(json!(format!("{}:{term}", doc.id)));
            params.push(json!(term));
            params.push(json!(tf));
        }
        sql.push_str(";\nINSERT INTO search_postings (id, term, doc_id, owner_id, tf) VALUES ");
        sql.push_str(&values.join(", "));
        sql.push_str(" ON CONFLICT (id) DO NOTHING");
    }
    (sql, params)
}

/// Runs `write` (with `params`) and adds `doc` to the index in the same transaction.
pub async fn write_indexed(db: &Db, write: &str, mut params: Vec<Value>, doc: &Doc<'_>) -> AppResult<crate::db::Rows> {
    let (index, more) = index_sql(doc, params.len());
    params.extend(more);
    Ok(db.sql(&format!("{write};\n{index}"), &params).await?)
}

/// Removes every document of `owner` from the index (account deletion).
pub async fn forget_owner(db: &Db, owner: &str) -> AppResult<()> {
    db.sql(
        "DELETE FROM search_postings WHERE owner_id = $1; DELETE FROM search_docs WHERE owner_id = $1; DELETE FROM search_stats WHERE owner_id = $1",
        &[json!(owner)],
    )
    .await?;
    Ok(())
}

/// `GET /api/v1/search` query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    pub q: Option<String>,
    #[serde(rename = "type")]
    pub doc_type: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub limit: Option<u64>,
}

/// One hit.
#[derive(Debug, Serialize)]
pub struct Hit {
    #[serde(rename = "type")]
    pub doc_type: String,
    pub id: String,
    pub meeting_id: String,
    pub title: String,
    pub text: String,
    pub score: f64,
    pub at: String,
}

/// The answer.
#[derive(Debug, Serialize)]
pub struct Results {
    pub query: String,
    pub results: Vec<Hit>,
    /// Documents that matched at least one term (before `limit`).
    pub total: usize,
    pub took_ms: u64,
}

/// Ranks the caller's documents against `q.q`.
pub async fn search(db: &Db, caller: &Caller, q: SearchQuery) -> AppResult<Results> {
    let started = Instant::now();
    let text = q.q.unwrap_or_default();
    let query_terms: Vec<String> = terms(&text).into_keys().collect();
    if text.trim().is_empty() {
        return Err(AppError::Validation("q: a search text is required".into()));
    }
    if text.chars().count() > 500 || query_terms.len() > 32 {
        return Err(AppError::Validation("q: at most 500 characters and 32 terms".into()));
    }
    if let Some(t) = &q.doc_type
        && !TYPES.contains(&t.as_str())
    {
        return Err(AppError::Validation(format!("type: one of {}", TYPES.join(", "))));
    }
    let time = |v: &Option<String>, name: &str| -> AppResult<Option<i64>> {
        v.as_deref()
            .map(|s| parse_iso(s).ok_or_else(|| AppError::Validation(format!("{name}: not an ISO 8601 date or date-time"))))
            .transpose()
    };
    let (from, to) = (time(&q.from, "from")?, time(&q.to, "to")?);
    let limit = q.limit.unwrap_or(20);
    if !(1..=100).contains(&limit) {
        return Err(AppError::Validation("limit: 1 to 100".into()));
    }
    if query_terms.is_empty() {
        // Only stop words or one-letter words: nothing can match.
        return Ok(Results { query: text, results: Vec::new(), total: 0, took_ms: started.elapsed().as_millis() as u64 });
    }
    let stats = db.sql("SELECT docs, total_len FROM search_stats WHERE owner_id = $1", &[json!(caller.user.id)]).await?;
    let (n_docs, total_len) = stats.rows.first().map_or((0, 0), |r| (r[0].as_i64().unwrap_or(0), r[1].as_i64().unwrap_or(0)));
    let avg_len = if n_docs > 0 { total_len as f64 / n_docs as f64 } else { 1.0 };
    // Per term: its postings among the caller's documents, with each document's length.
    let mut scores: HashMap<String, f64> = HashMap::new();
    let mut docs: HashMap<String, serde_json::Map<String, Value>> = HashMap::new();
    for term in &query_terms {
        let rows = db
            .sql(
                "SELECT p.doc_id AS doc_id, p.tf AS tf, d.length AS length, d.doc_type AS doc_type, d.meeting_id AS meeting_id, d.title AS title, d.body AS body, d.at AS at \
                 FROM search_postings p JOIN search_docs d ON d.id = p.doc_id WHERE p.term = $1 AND p.owner_id = $2",
                &[json!(term), json!(caller.user.id)],
            )
            .await?;
        let postings = rows.objects();
        let df = postings.len() as f64;
        let idf = (1.0 + (n_docs as f64 - df + 0.5) / (df + 0.5)).ln();
        for p in postings {
            let doc_id = p.get("doc_id").and_then(Value::as_str).unwrap_or_default().to_string();
            let tf = p.get("tf").and_then(Value::as_f64).unwrap_or(0.0);
            let len = p.get("length").and_then(Value::as_f64).unwrap_or(0.0);
            *scores.entry(doc_id.clone()).or_default() += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len));
            docs.entry(doc_id).or_insert(p);
        }
    }
    let mut hits: Vec<Hit> = scores
        .into_iter()
        .filter_map(|(id, score)| {
            let d = docs.get(&id)?;
            let text = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let at = d.get("at").and_then(Value::as_i64).unwrap_or(0);
            let doc_type = text("doc_type");
            let keep = q.doc_type.as_ref().is_none_or(|t| *t == doc_type) && from.is_none_or(|f| at >= f) && to.is_none_or(|t| at <= t);
            keep.then(|| Hit { doc_type, id, meeting_id: text("meeting_id"), title: text("title"), text: text("body"), score, at: iso(at) })
        })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    let total = hits.len();
    hits.truncate(limit as usize);
    Ok(Results { query: text, results: hits, total, took_ms: started.elapsed().as_millis() as u64 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_lower_cased_words_without_stop_words() {
        let t = terms("The Budget, the budget and THE plan: Q4 a-b");
        assert_eq!(t, BTreeMap::from([("budget".to_string(), 2), ("plan".to_string(), 1), ("q4".to_string(), 1)]));
        assert!(terms("a I to").is_empty());
    }
}
