//! The replica convergence check at the end of a scenario: every replica of
//! every group reaches the same applied index with the same data digest
//! (`GET /api/v1/admin/consistency`), so a divergence is found even when no
//! read happens to touch it.

use std::time::Duration;

use anyhow::{Result, anyhow, bail, ensure};
use serde_json::Value;

use crate::Http;

/// Polls the consistency check until every group is converged and answers the
/// last report. Fails at once when two replicas at the same applied index hold
/// different data (the report is in the error), and at `timeout` with the
/// groups not converged yet.
pub async fn assert_converged(http: &Http, timeout: Duration) -> Result<Value> {
    crate::wait_for(timeout, "every replica of every group at one applied index with one digest", async || {
        let resp = http.get("/api/v1/admin/consistency").await?;
        ensure!(resp.status == 200, "the consistency check answered {resp}");
        let report = resp.json;
        if report["consistent"] != true {
            return Ok(Some(Err(anyhow!("replicas diverged (same applied index, different data): {report:#}"))));
        }
        if report["converged"] == true {
            return Ok(Some(Ok(report)));
        }
        let pending: Vec<&Value> = report["groups"].as_array().into_iter().flatten().filter(|g| g["converged"] != true).collect();
        bail!("not converged yet: {}", serde_json::to_string_pretty(&pending)?)
    })
    .await?
}
