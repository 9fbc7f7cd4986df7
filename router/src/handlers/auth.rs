//! `POST /api/v1/auth/login` and `POST /api/v1/auth/logout`.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use tessera_api::command::{MetaOp, Operation, Query, QueryResult, now_ms};
use tessera_api::http::{LoginRequest, LoginResponse, UserView, iso8601_ms};
use tessera_api::meta::SessionRecord;

use super::JsonBody;
use crate::auth::{Caller, new_token, token_hash, users_exist, verify_password};
use crate::error::ApiError;
use crate::state::AppState;

/// Checks the password (Argon2id) and opens a session stored in the meta group.
pub async fn login(State(state): State<AppState>, JsonBody(req): JsonBody<LoginRequest>) -> Result<Json<LoginResponse>, ApiError> {
    if !users_exist(&state).await? {
        return Err(ApiError::NotProvisioned);
    }
    let user = match state.cluster.meta_read(&Query::UserByName { username: req.username.clone() }).await? {
        QueryResult::User(u) => u,
        other => return Err(ApiError::Internal(format!("unexpected meta reply {other:?}"))),
    };
    // Verify against a dummy hash for unknown users too, so timing does not tell them apart.
    let phc = user.as_ref().map(|u| u.password_hash.clone());
    let password = req.password;
    let ok = tokio::task::spawn_blocking(move || match phc {
        Some(phc) => verify_password(&password, &phc),
        None => {
            let _ = crate::auth::hash_password(&password);
            false
        }
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    let user = match (ok, user) {
        (true, Some(u)) => u,
        _ => return Err(ApiError::Unauthorized("invalid username or password".into())),
    };
    let token = new_token();
    let now = now_ms();
    let expires_at_ms = now + (state.config.auth.session_timeout as i64) * 1000;
    let session = SessionRecord { user_id: user.id.clone(), created_at_ms: now, expires_at_ms };
    state.cluster.meta_write(&Operation::Meta(MetaOp::CreateSession { token_hash: token_hash(&token), session })).await?;
    Ok(Json(LoginResponse { token, user: UserView::from(&user), expires_at: iso8601_ms(expires_at_ms) }))
}

/// Removes the caller's session: the token stops working on every router.
pub async fn logout(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let Caller::User { token_hash, .. } = caller else {
        return Err(ApiError::Unauthorized("not logged in".into()));
    };
    state.cluster.meta_write(&Operation::Meta(MetaOp::DeleteSession { token_hash })).await?;
    Ok(Json(json!({"success": true})))
}
