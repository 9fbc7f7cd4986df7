//! The API's routes: thin adapters that parse, call one service function
//! and shape the answer.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::auth::{self, Caller, ProfileUpdate, Registration, Tokens, User};
use crate::error::{AppError, AppResult};
use crate::meetings::{self, Comment, ListQuery, Meeting, NewComment, NewMeeting, Page, Transcript};
use crate::search::{self, Results, SearchQuery};
use crate::state::AppState;
use crate::{live, orgs, privacy, rate_limit, webhooks};

/// Every route of the API.
pub fn routes(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/api/v1/auth/register", post(register))
        .route("/api/v1/auth/login", post(login))
        .route("/api/v1/auth/refresh", post(refresh))
        .route("/api/v1/auth/logout", post(logout))
        .route("/api/v1/users/me", get(me).put(update_me))
        .route("/api/v1/meetings", get(list_meetings).post(create_meeting))
        .route("/api/v1/meetings/{id}", get(get_meeting))
        .route("/api/v1/meetings/{id}/start", post(start_meeting))
        .route("/api/v1/meetings/{id}/stop", post(stop_meeting))
        .route("/api/v1/meetings/{id}/transcript", get(transcript))
        .route("/api/v1/meetings/{id}/comments", get(list_comments).post(add_comment))
        .route("/api/v1/search", get(search))
        .route("/ws/meeting/{id}", get(meeting_socket))
        .merge(webhooks::routes())
        .merge(orgs::routes())
        .merge(privacy::routes())
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), rate_limit::middleware))
        .with_state(state)
}

async fn not_found() -> AppError {
    AppError::NotFound("no such route".into())
}

async fn health(State(state): State<AppState>) -> Response {
    match state.db.sql("SELECT 1", &[]).await {
        Ok(_) => Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION"), "database": "reachable"})).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unavailable", "version": env!("CARGO_PKG_VERSION"), "database": e.to_string()})),
        )
            .into_response(),
    }
}

async fn register(State(state): State<AppState>, body: Result<Json<Registration>, JsonRejection>) -> AppResult<(StatusCode, Json<User>)> {
    let Json(r) = body?;
    Ok((StatusCode::CREATED, Json(auth::register(&state.db, r).await?)))
}

#[derive(Deserialize)]
struct Credentials {
    email: String,
    password: String,
}

async fn login(State(state): State<AppState>, body: Result<Json<Credentials>, JsonRejection>) -> AppResult<Json<Tokens>> {
    let Json(c) = body?;
    Ok(Json(auth::login(&state, &c.email, &c.password).await?))
}

#[derive(Deserialize)]
struct RefreshBody {
    refresh_token: String,
}

async fn refresh(State(state): State<AppState>, body: Result<Json<RefreshBody>, JsonRejection>) -> AppResult<Json<Tokens>> {
    let Json(r) = body?;
    Ok(Json(auth::refresh(&state, &r.refresh_token).await?))
}

async fn logout(State(state): State<AppState>, caller: Caller) -> AppResult<StatusCode> {
    auth::logout(&state.db, &caller).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn me(caller: Caller) -> Json<User> {
    Json(caller.user)
}

async fn update_me(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<ProfileUpdate>, JsonRejection>,
) -> AppResult<Json<User>> {
    let Json(u) = body?;
    Ok(Json(auth::update_profile(&state.db, &caller, u).await?))
}

async fn list_meetings(
    State(state): State<AppState>,
    caller: Caller,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> AppResult<Json<Page>> {
    let Query(q) = q?;
    Ok(Json(meetings::list(&state.db, &caller, q).await?))
}

async fn create_meeting(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<NewMeeting>, JsonRejection>,
) -> AppResult<(StatusCode, Json<Meeting>)> {
    let Json(m) = body?;
    Ok((StatusCode::CREATED, Json(meetings::create(&state.db, &caller, m).await?)))
}

async fn get_meeting(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> AppResult<Json<Meeting>> {
    Ok(Json(meetings::get(&state.db, &caller, &id).await?))
}

async fn start_meeting(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> AppResult<Json<Meeting>> {
    let meeting = meetings::transition(&state.db, &caller, &id, "scheduled", "active").await?;
    webhooks::emit(&state, &meeting.owner_id, "meeting.started", json!({"meeting": meeting})).await;
    Ok(Json(meeting))
}

async fn stop_meeting(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> AppResult<Json<Meeting>> {
    // With AI_SERVICE_URL, the stop records the summary as pending (in Tessera,
    // for whichever instance's loop claims it) and wakes this instance's loop.
    let summarize = state.config.ai_service_url.is_some();
    let meeting = meetings::stop(&state.db, &caller, &id, summarize).await?;
    if summarize {
        state.summaries.wake.notify_one();
    }
    webhooks::emit(&state, &meeting.owner_id, "meeting.ended", json!({"meeting": meeting})).await;
    let transcript = meetings::transcript(&state.db, &caller, &id).await?;
    webhooks::emit(
        &state,
        &meeting.owner_id,
        "transcript.completed",
        json!({"meeting_id": id, "segments": transcript.segments.len(), "text": transcript.text}),
    )
    .await;
    Ok(Json(meeting))
}

async fn transcript(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> AppResult<Json<Transcript>> {
    Ok(Json(meetings::transcript(&state.db, &caller, &id).await?))
}

async fn list_comments(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> AppResult<Json<Vec<Comment>>> {
    Ok(Json(meetings::comments(&state.db, &caller, &id).await?))
}

async fn add_comment(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Result<Json<NewComment>, JsonRejection>,
) -> AppResult<(StatusCode, Json<Comment>)> {
    let Json(c) = body?;
    Ok((StatusCode::CREATED, Json(meetings::add_comment(&state.db, &caller, &id, c).await?)))
}

async fn search(State(state): State<AppState>, caller: Caller, q: Result<Query<SearchQuery>, QueryRejection>) -> AppResult<Json<Results>> {
    let Query(q) = q?;
    Ok(Json(search::search(&state.db, &caller, q).await?))
}

async fn meeting_socket(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ws: WebSocketUpgrade,
) -> AppResult<Response> {
    let meeting = meetings::get(&state.db, &caller, &id).await?;
    Ok(ws.on_upgrade(move |socket| live::run(state, caller, meeting.id, socket)))
}
