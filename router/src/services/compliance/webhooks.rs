//! Breach webhooks (spec 02 "Breach webhook"): every router with
//! `SERVICE_BREACH_WEBHOOK_URL` looks for incidents whose delivery is due once
//! a second; it claims one in the meta group (one router at a time, for a
//! lease), posts the incident with the configured headers and an HMAC-SHA256
//! signature of the body, retrying with exponential backoff, and records the
//! outcome. A router that dies mid-delivery loses its claim when the lease
//! runs out, and another router delivers: at least once.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response};
use tessera_api::compliance::{Incident, IncidentAnswer, IncidentOp, IncidentQuery};
use tessera_api::http::iso8601_ms;

use crate::cluster::typed::{self, shape};
use crate::error::ApiError;
use crate::state::AppState;

/// Requests per claim at most.
pub const MAX_ATTEMPTS: u32 = 5;
/// The pause before the second attempt; doubled before each later one.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// How long one request may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claim holds: every attempt and pause fit in it.
const CLAIM_LEASE_MS: i64 = 120_000;
/// Environment variables naming extra headers: `SERVICE_BREACH_WEBHOOK_HEADER_X-Api-Key=…`.
const HEADER_ENV_PREFIX: &str = "SERVICE_BREACH_WEBHOOK_HEADER_";

/// Where and how this router posts incidents.
#[derive(Clone)]
pub struct Webhook {
    pub url: String,
    pub secret: Option<String>,
    pub headers: Vec<(String, String)>,
    client: reqwest::Client,
}

impl Webhook {
    /// A webhook posting to `url`, signing with `secret`, adding `headers`.
    pub fn new(url: String, secret: Option<String>, headers: Vec<(String, String)>) -> Option<Webhook> {
        let client = reqwest::Client::builder().timeout(ATTEMPT_TIMEOUT).build().ok()?;
        Some(Webhook { url, secret, headers, client })
    }

    /// The webhook of this router's configuration and environment, if a URL is set.
    pub fn from_config(state: &AppState) -> Option<Webhook> {
        let url = state.config.compliance.breach_webhook_url.clone().filter(|u| !u.trim().is_empty())?;
        let headers = std::env::vars()
            .filter_map(|(k, v)| k.strip_prefix(HEADER_ENV_PREFIX).map(|name| (name.to_string(), v)))
            .filter(|(name, _)| !name.is_empty())
            .collect();
        let secret = state.config.compliance.breach_webhook_secret.as_ref().filter(|s| !s.is_blank()).map(|s| s.expose().to_string());
        Webhook::new(url, secret, headers)
    }
}

/// The body posted for `i`: spec 02's payload and, in the same object, its
/// alternate shape (`event_type: security_breach`, `timestamp`, `breach_type`,
/// `details`, `recommended_action`, `instance_id`: the router that reports it).
pub fn payload(i: &Incident, instance_id: &str) -> Value {
    json!({
        "incident_id": i.incident_id, "detected_at": iso8601_ms(i.detected_at_ms), "type": i.event_type,
        "severity": i.severity, "description": i.description, "affected_subjects": i.affected_subjects,
        "involved_ips": i.involved_ips, "status": "open", "source": i.source,
        "notification_deadline": iso8601_ms(i.notification_deadline_ms),
        "hipaa_notification_deadline": i.hipaa_deadline_ms().map(iso8601_ms),
        "event_type": "security_breach", "timestamp": iso8601_ms(i.detected_at_ms), "breach_type": i.event_type,
        "details": {
            "incident_id": i.incident_id, "description": i.description, "affected_subjects": i.affected_subjects,
            "affected_records_estimate": i.affected_records_estimate(), "involved_ips": i.involved_ips, "source": i.source,
        },
        "recommended_action": tessera_api::compliance::recommended_action(&i.event_type),
        "instance_id": instance_id,
    })
}

/// `sha256=<hex HMAC-SHA256(secret, body)>`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Delivers due incidents once a second while compliance and a webhook URL are configured.
pub async fn deliver_loop(state: AppState) {
    if !state.config.compliance.enabled {
        return;
    }
    let Some(webhook) = Webhook::from_config(&state) else { return };
    tracing::info!(url = %webhook.url, headers = webhook.headers.len(), signed = webhook.secret.is_some(), "breach webhook on");
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        if let Err(e) = deliver_due(&state, &webhook).await {
            tracing::debug!("breach webhook: {e}");
        }
    }
}

/// Claims and delivers every incident whose delivery is due; answers how many were delivered.
pub async fn deliver_due(state: &AppState, webhook: &Webhook) -> Result<usize, ApiError> {
    let answer = state.cluster.meta_read(MetaQuery::Incident(IncidentQuery::List { status: None, severity: None })).await?;
    let IncidentAnswer::List(incidents) = typed::pick(answer, shape!(MetaQueryResult::Incident))? else {
        return Err(ApiError::Internal("unexpected incident answer".into()));
    };
    let now = tessera_api::command::now_ms();
    let mut delivered = 0;
    for due in incidents.iter().rev().filter(|i| i.webhook.due(now)) {
        let claim =
            IncidentOp::ClaimWebhook { id: due.incident_id.clone(), router: state.router_instance.clone(), lease_ms: CLAIM_LEASE_MS };
        let claimed = match state.cluster.meta_write(MetaOp::Incident(claim)).await? {
            Response::Incident(i) => i,
            // Another router claimed it first.
            _ => continue,
        };
        let (ok, attempts, error) = post_with_retries(webhook, &claimed, &state.router_instance).await;
        let record = IncidentOp::RecordWebhook {
            id: claimed.incident_id.clone(),
            router: state.router_instance.clone(),
            delivered: ok,
            attempts,
            error: error.clone(),
        };
        state.cluster.meta_write(MetaOp::Incident(record)).await?;
        if ok {
            delivered += 1;
            tracing::info!(incident = %claimed.incident_id, attempts, "breach incident posted to the webhook");
        } else {
            tracing::warn!(incident = %claimed.incident_id, attempts, "breach webhook delivery failed: {}", error.unwrap_or_default());
        }
    }
    Ok(delivered)
}

/// Posts `i` until a 2xx answer, at most [`MAX_ATTEMPTS`] times with
/// exponential backoff; answers (delivered, attempts, last error).
async fn post_with_retries(webhook: &Webhook, i: &Incident, instance_id: &str) -> (bool, u32, Option<String>) {
    let body = serde_json::to_vec(&payload(i, instance_id)).unwrap_or_default();
    let mut pause = FIRST_BACKOFF;
    let mut last_error = None;
    for attempt in 1..=MAX_ATTEMPTS {
        let mut req = webhook
            .client
            .post(&webhook.url)
            .header("content-type", "application/json")
            .header("x-tessera-event", "breach.detected")
            .header("x-tessera-delivery", i.incident_id.as_str())
            .header("x-tessera-attempt", attempt.to_string());
        for (name, value) in &webhook.headers {
            req = req.header(name.as_str(), value.as_str());
        }
        if let Some(secret) = &webhook.secret {
            req = req.header("x-tessera-signature", signature(secret, &body));
        }
        match req.body(body.clone()).send().await {
            Ok(r) if r.status().is_success() => return (true, attempt, None),
            Ok(r) => last_error = Some(format!("attempt {attempt}: the webhook answered {}", r.status())),
            Err(e) => last_error = Some(format!("attempt {attempt}: {e}")),
        }
        if attempt < MAX_ATTEMPTS {
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }
    (false, MAX_ATTEMPTS, last_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hex_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
