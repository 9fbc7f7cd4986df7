//! The vault's duties that need the whole router: unsealing at start with
//! `SERVICE_VAULT_PASSPHRASE`, and raising a security alert when an unseal
//! fails. The vault itself (`super`) knows nothing of the router's state.

use tessera_api::security::NewAlert;

use super::{Actor, VaultError};
use crate::state::AppState;

/// Raises a security alert for a failed unseal.
pub async fn alert_unseal_failure(state: &AppState, actor: &Actor, source_ip: Option<String>) {
    let alert = NewAlert {
        kind: "vault_unseal_failed".into(),
        severity: "high".into(),
        source_ip,
        username: actor.subject.as_ref().map(|s| s.username.clone()),
        message: format!("a vault unseal by {} on router {} failed: wrong passphrase", actor.name, state.vault.router),
    };
    crate::services::security::raise(state, alert).await;
}

/// Unseals this router at start with `SERVICE_VAULT_PASSPHRASE`, retrying while
/// the meta group is unreachable. Logs the outcome, never the passphrase.
pub async fn unseal_at_start(state: AppState) {
    let configured = state.config.vault.passphrase.as_ref();
    let Some(passphrase) = crate::secrets::SecretString::env_or("SERVICE_VAULT_PASSPHRASE", configured) else { return };
    let actor = Actor::environment();
    loop {
        match state.vault.unseal(&*state.cluster, passphrase.expose(), &actor).await {
            Ok(u) => {
                tracing::info!(created = u.created, "vault unsealed with SERVICE_VAULT_PASSPHRASE");
                return;
            }
            Err(VaultError::Cluster(e)) => {
                tracing::debug!("vault unseal at start: cluster not ready ({e}); retrying");
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            Err(VaultError::WrongPassphrase) => {
                tracing::warn!("SECURITY: SERVICE_VAULT_PASSPHRASE does not unseal the existing vault; it stays sealed");
                alert_unseal_failure(&state, &actor, None).await;
                return;
            }
            Err(e) => {
                tracing::warn!("vault stays sealed: SERVICE_VAULT_PASSPHRASE did not unseal it: {e}");
                return;
            }
        }
    }
}
