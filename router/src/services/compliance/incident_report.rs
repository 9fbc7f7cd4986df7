//! A breach incident's report (`GET /api/v1/compliance/breaches/{id}/report`):
//! the incident, its timeline, its notification duties and the security
//! events around it, typed (answered as JSON) or laid out as a PDF document.

use pdf_writer::{Content, Finish, Name, Pdf, Rect, Ref, Str};
use serde::Serialize;
use serde_json::Value;
use tessera_api::compliance::Incident;
use tessera_api::http::iso8601_ms;
use tessera_api::security::SecurityEvent;

/// Security events this close to the detection (before or after) are listed as related.
pub const RELATED_WINDOW_MS: i64 = 3_600_000;

/// A breach incident's report.
#[derive(Serialize, schemars::JsonSchema)]
pub struct IncidentReport {
    /// `RPT-<incident id>`.
    pub report_id: String,
    pub generated_at: String,
    pub incident: ReportedIncident,
    /// Detection, acknowledgement, resolution and webhook notice, in time order.
    pub timeline: Vec<TimelineEntry>,
    pub notification: NotificationDuties,
    /// Security events within an hour of the detection, from the incident's
    /// addresses or about its subjects, newest first.
    pub related_security_events: Vec<SecurityEventView>,
}

/// The incident, as its report states it.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ReportedIncident {
    pub incident_id: String,
    /// The breach event type.
    #[serde(rename = "type")]
    pub event_type: String,
    pub severity: String,
    pub status: String,
    pub description: String,
    pub detected_at: String,
    pub source: String,
    pub affected_subjects: Vec<String>,
    pub involved_ips: Vec<String>,
    pub remediation_steps_taken: Vec<String>,
}

/// One step of an incident's life.
#[derive(Serialize, schemars::JsonSchema)]
pub struct TimelineEntry {
    pub at: String,
    /// `detected`, `acknowledged`, `resolved`, `false_positive` or `webhook_notified`.
    pub event: String,
    pub by: Option<String>,
    pub details: Option<String>,
}

/// What must be notified, by when, and whether it was.
#[derive(Serialize, schemars::JsonSchema)]
pub struct NotificationDuties {
    /// GDPR: detection + 72 h.
    pub gdpr_deadline: String,
    /// Not ended and past the GDPR deadline.
    pub overdue: bool,
    pub affected_subject_count: usize,
    /// HIPAA: notice to the media and the Secretary within 60 days when 500 or more are affected.
    pub hipaa_media_notice_required: bool,
    pub hipaa_deadline: Option<String>,
    pub hipaa_overdue: bool,
    pub webhook: WebhookNotice,
}

/// The incident's delivery to the breach webhook.
#[derive(Serialize, schemars::JsonSchema)]
pub struct WebhookNotice {
    /// `pending`, `delivering`, `delivered` or `failed`; empty for incidents older than the webhook.
    pub status: String,
    pub attempts: u32,
    pub last_error: Option<String>,
}

/// A recorded security event.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SecurityEventView {
    /// `evt-<12 digits>`, increasing.
    pub event_id: String,
    pub event_type: String,
    /// `low`, `medium`, `high` or `critical`.
    pub severity: String,
    pub timestamp: String,
    pub source_ip: Option<String>,
    /// The user name involved, if any.
    pub user_id: Option<String>,
    pub description: String,
}

impl From<SecurityEvent> for SecurityEventView {
    fn from(e: SecurityEvent) -> SecurityEventView {
        SecurityEventView {
            event_id: e.id,
            event_type: e.event_type,
            severity: e.severity,
            timestamp: iso8601_ms(e.at_ms),
            source_ip: e.source_ip,
            user_id: e.username,
            description: e.description,
        }
    }
}

/// The report of `i` generated at `now`, with the `related` security events.
pub fn report(i: &Incident, related: Vec<SecurityEvent>, now: i64) -> IncidentReport {
    let step = |at: i64, event: &str, by: Option<String>, details: Option<String>| TimelineEntry {
        at: iso8601_ms(at),
        event: event.to_string(),
        by,
        details,
    };
    let mut timeline = vec![step(i.detected_at_ms, "detected", Some("detector".into()), Some(i.source.clone()))];
    if let Some(at) = i.acknowledged_at_ms {
        timeline.push(step(at, "acknowledged", i.acknowledged_by.clone(), i.notes.clone()));
    }
    if let Some(at) = i.resolved_at_ms {
        timeline.push(step(at, &i.status, i.resolved_by.clone(), i.resolution_notes.clone()));
    }
    if let Some(at) = i.webhook.delivered_at_ms {
        timeline.push(step(at, "webhook_notified", Some("router".into()), Some(format!("{} attempt(s)", i.webhook.attempts))));
    }
    timeline.sort_by(|a, b| a.at.cmp(&b.at));
    let ended = i.status == "resolved" || i.status == "false_positive";
    IncidentReport {
        report_id: format!("RPT-{}", i.incident_id),
        generated_at: iso8601_ms(now),
        incident: ReportedIncident {
            incident_id: i.incident_id.clone(),
            event_type: i.event_type.clone(),
            severity: i.severity.clone(),
            status: i.status.clone(),
            description: i.description.clone(),
            detected_at: iso8601_ms(i.detected_at_ms),
            source: i.source.clone(),
            affected_subjects: i.affected_subjects.clone(),
            involved_ips: i.involved_ips.clone(),
            remediation_steps_taken: i.remediation_steps.clone(),
        },
        timeline,
        notification: NotificationDuties {
            gdpr_deadline: iso8601_ms(i.notification_deadline_ms),
            overdue: !ended && now > i.notification_deadline_ms,
            affected_subject_count: i.affected_subjects.len(),
            hipaa_media_notice_required: i.hipaa_deadline_ms().is_some(),
            hipaa_deadline: i.hipaa_deadline_ms().map(iso8601_ms),
            hipaa_overdue: !ended && i.hipaa_deadline_ms().is_some_and(|d| now > d),
            webhook: WebhookNotice {
                status: i.webhook.status.clone(),
                attempts: i.webhook.attempts,
                last_error: i.webhook.last_error.clone(),
            },
        },
        related_security_events: related.into_iter().map(SecurityEventView::from).collect(),
    }
}

/// The report as text lines, in reading order.
fn lines(report: &Value) -> Vec<String> {
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let i = &report["incident"];
    let mut out = vec![
        format!("Breach incident report {}", s(&report["report_id"])),
        format!("Generated {}", s(&report["generated_at"])),
        String::new(),
    ];
    for field in [
        "incident_id",
        "type",
        "severity",
        "status",
        "detected_at",
        "description",
        "source",
        "affected_subjects",
        "involved_ips",
        "remediation_steps_taken",
    ] {
        out.push(format!("{field}: {}", s(&i[field])));
    }
    out.push(String::new());
    out.push("Notification".into());
    let n = &report["notification"];
    for field in ["gdpr_deadline", "overdue", "affected_subject_count", "hipaa_media_notice_required", "hipaa_deadline"] {
        out.push(format!("  {field}: {}", s(&n[field])));
    }
    out.push(format!("  webhook: {} ({} attempts)", s(&n["webhook"]["status"]), s(&n["webhook"]["attempts"])));
    out.push(String::new());
    out.push("Timeline".into());
    for t in report["timeline"].as_array().into_iter().flatten() {
        out.push(format!("  {}  {} by {}: {}", s(&t["at"]), s(&t["event"]), s(&t["by"]), s(&t["details"])));
    }
    out.push(String::new());
    out.push("Related security events".into());
    for e in report["related_security_events"].as_array().into_iter().flatten() {
        out.push(format!(
            "  {}  {} ({}) {}: {}",
            s(&e["timestamp"]),
            s(&e["event_type"]),
            s(&e["severity"]),
            s(&e["source_ip"]),
            s(&e["description"])
        ));
    }
    out
}

/// Lines per A4 page at 10 pt with 13 pt leading.
const LINES_PER_PAGE: usize = 56;
/// Characters per line before it wraps.
const LINE_CHARS: usize = 95;

/// The report as a PDF document (A4 pages of Helvetica text).
pub fn pdf(report: &IncidentReport) -> Vec<u8> {
    let report = &serde_json::to_value(report).unwrap_or_default();
    // Helvetica's standard encoding covers ASCII: anything else prints as '?'.
    let mut wrapped: Vec<String> = Vec::new();
    for line in lines(report) {
        let ascii: String = line.chars().map(|c| if c.is_ascii() && !c.is_ascii_control() { c } else { '?' }).collect();
        let chars: Vec<char> = ascii.chars().collect();
        if chars.is_empty() {
            wrapped.push(String::new());
        }
        for chunk in chars.chunks(LINE_CHARS) {
            wrapped.push(chunk.iter().collect());
        }
    }
    let pages: Vec<&[String]> = wrapped.chunks(LINES_PER_PAGE).collect();
    let mut pdf = Pdf::new();
    let (catalog, tree, font) = (Ref::new(1), Ref::new(2), Ref::new(3));
    let font_name = Name(b"F1");
    pdf.catalog(catalog).pages(tree);
    let page_ids: Vec<Ref> = (0..pages.len()).map(|n| Ref::new(4 + 2 * n as i32)).collect();
    pdf.pages(tree).kids(page_ids.iter().copied()).count(pages.len() as i32);
    for (n, page_lines) in pages.iter().enumerate() {
        let (page_id, content_id) = (page_ids[n], Ref::new(5 + 2 * n as i32));
        let mut page = pdf.page(page_id);
        page.media_box(Rect::new(0.0, 0.0, 595.0, 842.0));
        page.parent(tree);
        page.contents(content_id);
        page.resources().fonts().pair(font_name, font);
        page.finish();
        let mut content = Content::new();
        content.begin_text();
        content.set_font(font_name, 10.0);
        content.set_leading(13.0);
        content.next_line(50.0, 792.0);
        for line in page_lines.iter() {
            content.show(Str(line.as_bytes()));
            content.next_line_using_leading();
        }
        content.end_text();
        pdf.stream(content_id, &content.finish());
    }
    pdf.type1_font(font).base_font(Name(b"Helvetica"));
    pdf.finish()
}
