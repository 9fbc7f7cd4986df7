//! Meeting summaries, made when `AI_SERVICE_URL` is set: once a meeting is
//! stopped, its transcript is sent to the text-generation service as an
//! OpenAI-compatible chat completion (`POST {AI_SERVICE_URL}/v1/chat/completions`,
//! model `AI_MODEL`, default `default`) and the answer is kept in the
//! meeting's `summary`. Without the variable no summary is made and nothing
//! else changes. A summary is made in the background by the instance that
//! stopped the meeting; one that fails (or is cut short by that instance's
//! end) is logged and left out.

use std::time::Duration;

use serde_json::{Value, json};

use crate::state::AppState;

/// The instruction sent with every transcript.
const INSTRUCTION: &str = "Summarize this meeting transcript in a few sentences: decisions, action items and open questions.";

/// Summarizes meeting `id` (its transcript `text`) in the background, if a service is configured.
pub fn spawn_summary(state: &AppState, id: &str, text: String) {
    let Some(url) = state.config.ai_service_url.clone() else { return };
    if text.trim().is_empty() {
        return;
    }
    let (state, id) = (state.clone(), id.to_string());
    tokio::spawn(async move {
        match summarize(&url, &state.config.ai_model, &text).await {
            Ok(summary) => {
                if let Err(e) = state.db.sql("UPDATE meetings SET summary = $2 WHERE id = $1", &[json!(id), json!(summary)]).await {
                    tracing::warn!(meeting = id, "keeping the meeting's summary: {e}");
                }
            }
            Err(e) => tracing::warn!(meeting = id, "the text-generation service made no summary: {e}"),
        }
    });
}

async fn summarize(url: &str, model: &str, transcript: &str) -> anyhow::Result<String> {
    let body = json!({
        "model": model,
        "messages": [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": transcript}],
    });
    let http = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
    let answer: Value = http
        .post(format!("{}/v1/chat/completions", url.trim_end_matches('/')))
        .json(&body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    answer["choices"][0]["message"]["content"]
        .as_str()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| anyhow::anyhow!("no choices[0].message.content in {answer}"))
}
