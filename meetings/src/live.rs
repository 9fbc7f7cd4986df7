//! A meeting's WebSocket, `/ws/meeting/<id>`: participants stream 16 kHz mono
//! signed 16-bit little-endian PCM as binary frames; the server recognizes
//! speech ([`crate::speech`]), records each utterance as a transcript segment
//! and pushes JSON messages to every participant connected to this instance:
//! `participant_joined`, `participant_left`, `transcript_segment`, and
//! `speaker_update` when the connection that carried the audio changes.
//! A text frame `{"type":"flush"}` ends the utterance in progress.
//!
//! Participants of one meeting may be connected to different instances:
//! every message is also published on the Tessera stream `meetings-live`, to
//! which each instance subscribes (the router's WebSocket); an instance
//! passes on the messages other instances published to its own participants.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::extract::ws::{Message, WebSocket};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::auth::Caller;
use crate::clock::{iso, now_ms};
use crate::meetings;
use crate::speech::{Recognizer, Utterance, pcm_from_le_bytes};
use crate::state::AppState;
use crate::webhooks;

/// The Tessera stream every instance publishes its meetings' messages on.
pub const RELAY_CHANNEL: &str = "meetings-live";

/// The live meetings of this instance: one broadcast channel each.
pub struct Hub {
    /// This instance's id in the relayed messages (its own are not passed on twice).
    instance: String,
    meetings: Mutex<HashMap<String, broadcast::Sender<String>>>,
    /// Each live meeting's current speaker (the user whose audio was heard last).
    speakers: Mutex<HashMap<String, String>>,
}

impl Hub {
    fn channel(&self, meeting: &str) -> broadcast::Sender<String> {
        let mut meetings = self.meetings.lock().unwrap_or_else(|e| e.into_inner());
        meetings.retain(|_, tx| tx.receiver_count() > 0);
        meetings.entry(meeting.to_string()).or_insert_with(|| broadcast::channel(256).0).clone()
    }

    /// Sends `message` to every participant of `meeting` connected here.
    fn deliver(&self, meeting: &str, message: &Value) {
        let _ = self.channel(meeting).send(message.to_string());
    }
}

impl Default for Hub {
    fn default() -> Self {
        Hub { instance: uuid::Uuid::new_v4().to_string(), meetings: Mutex::default(), speakers: Mutex::default() }
    }
}

/// Sends `message` to every participant of `meeting`: here at once, and
/// through the relay stream to the other instances (in the background).
pub fn publish(state: &AppState, meeting: &str, message: Value) {
    state.hub.deliver(meeting, &message);
    let state = state.clone();
    let body = json!({"channel": RELAY_CHANNEL, "event_type": "meeting", "data": {"instance": state.hub.instance, "meeting_id": meeting, "message": message}});
    tokio::spawn(async move {
        if let Err(e) = state.db.call(reqwest::Method::POST, "/api/v1/streaming/publish", Some(&body)).await {
            tracing::warn!("relaying a meeting message to the other instances: {e}");
        }
    });
}

/// Passes the messages other instances publish on the relay stream to this
/// instance's participants, for as long as the process runs (reconnecting
/// after the last event it saw).
pub fn spawn_relay(state: AppState) {
    tokio::spawn(async move {
        let create = json!({"name": RELAY_CHANNEL, "retention": "1h"});
        // The channel may exist already (another instance made it): any answer will do.
        let _ = state.db.call(reqwest::Method::POST, "/api/v1/streaming/channels", Some(&create)).await;
        let mut after: Option<u64> = None;
        loop {
            if let Err(e) = relay_once(&state, &mut after).await {
                tracing::warn!("the relay of meeting messages stopped ({e}); reconnecting");
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    });
}

async fn relay_once(state: &AppState, after: &mut Option<u64>) -> anyhow::Result<()> {
    let token = state.db.session_token(false).await?;
    let base = state.db.router().replacen("http", "ws", 1);
    let mut url = format!("{base}/api/v1/streaming/{RELAY_CHANNEL}?token={token}");
    if let Some(a) = after {
        url.push_str(&format!("&after={a}"));
    }
    let (mut socket, _) = match tokio_tungstenite::connect_async(&url).await {
        Ok(s) => s,
        Err(e) => {
            // An expired session: sign in again for the next attempt.
            let _ = state.db.session_token(true).await;
            anyhow::bail!("subscribing to {RELAY_CHANNEL}: {e}");
        }
    };
    while let Some(frame) = futures::StreamExt::next(&mut socket).await {
        let tokio_tungstenite::tungstenite::Message::Text(text) = frame? else { continue };
        let event: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
        if let Some(id) = event["id"].as_u64() {
            *after = Some(id);
        }
        let data = &event["data"];
        if data["instance"] == state.hub.instance.as_str() {
            continue;
        }
        if let Some(meeting) = data["meeting_id"].as_str() {
            state.hub.deliver(meeting, &data["message"]);
        }
    }
    Ok(())
}

/// What the recognizer thread sends back.
enum Heard {
    Utterance(Utterance),
    Failed(String),
}

/// Runs one participant's connection until it closes.
pub async fn run(state: AppState, caller: Caller, meeting_id: String, mut socket: WebSocket) {
    let hub_tx = state.hub.channel(&meeting_id);
    let mut hub_rx = hub_tx.subscribe();
    let participant = json!({"user_id": caller.user.id, "display_name": caller.user.display_name});
    publish(
        &state,
        &meeting_id,
        json!({"type": "participant_joined", "meeting_id": meeting_id, "participant": participant, "at": iso(now_ms())}),
    );
    if let Ok(m) = meetings::get(&state.db, &caller, &meeting_id).await {
        webhooks::emit(&state, &m.owner_id, "participant.joined", json!({"meeting_id": meeting_id, "participant": participant})).await;
    }
    let (audio_tx, mut heard_rx) = start_recognizer(&state);
    let mut audio_tx = audio_tx;
    loop {
        tokio::select! {
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Binary(bytes))) => {
                    let Some(tx) = &audio_tx else {
                        let _ = socket.send(error_message("unavailable", "speech recognition is not available on this server")).await;
                        continue;
                    };
                    match pcm_from_le_bytes(&bytes) {
                        Ok(samples) => { let _ = tx.send(Audio::Samples(samples)); }
                        Err(e) => { let _ = socket.send(error_message("validation_error", &e.to_string())).await; }
                    }
                }
                Some(Ok(Message::Text(text))) => {
                    let command: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                    match command["type"].as_str() {
                        Some("flush") => if let Some(tx) = &audio_tx { let _ = tx.send(Audio::Flush); },
                        Some("ping") => { let _ = socket.send(Message::Text(json!({"type": "pong"}).to_string().into())).await; }
                        _ => { let _ = socket.send(error_message("validation_error", "text frames are {\"type\":\"flush\"} or {\"type\":\"ping\"}; audio goes in binary frames")).await; }
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            heard = heard_rx.recv() => match heard {
                Some(Heard::Utterance(u)) => record(&state, &caller, &meeting_id, u, &mut socket).await,
                Some(Heard::Failed(e)) => {
                    let _ = socket.send(error_message("internal_error", &format!("speech recognition failed: {e}"))).await;
                    audio_tx = None;
                }
                None => {}
            },
            pushed = hub_rx.recv() => match pushed {
                Ok(text) => if socket.send(Message::Text(text.into())).await.is_err() { break },
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
    // The utterance in progress is recognized and recorded before leaving.
    if let Some(tx) = audio_tx.take() {
        let _ = tx.send(Audio::Finish);
        drop(tx);
        while let Some(heard) = heard_rx.recv().await {
            if let Heard::Utterance(u) = heard {
                record_quietly(&state, &caller, &meeting_id, u).await;
            }
        }
    }
    publish(
        &state,
        &meeting_id,
        json!({"type": "participant_left", "meeting_id": meeting_id, "participant": participant, "at": iso(now_ms())}),
    );
    if let Ok(m) = meetings::get(&state.db, &caller, &meeting_id).await {
        webhooks::emit(&state, &m.owner_id, "participant.left", json!({"meeting_id": meeting_id, "participant": participant})).await;
    }
}

fn error_message(code: &str, message: &str) -> Message {
    Message::Text(json!({"type": "error", "error": code, "message": message}).to_string().into())
}

/// Records an utterance as a segment and pushes it; tells the sender when it was not recorded.
async fn record(state: &AppState, caller: &Caller, meeting_id: &str, u: Utterance, socket: &mut WebSocket) {
    if let Err(e) = record_utterance(state, caller, meeting_id, u).await {
        let _ = socket.send(error_message(e.code(), &e.to_string())).await;
    }
}

async fn record_quietly(state: &AppState, caller: &Caller, meeting_id: &str, u: Utterance) {
    if let Err(e) = record_utterance(state, caller, meeting_id, u).await {
        tracing::warn!(meeting_id, "the last utterance was not recorded: {e}");
    }
}

async fn record_utterance(state: &AppState, caller: &Caller, meeting_id: &str, u: Utterance) -> crate::error::AppResult<()> {
    let meeting = meetings::get(&state.db, caller, meeting_id).await?;
    if meeting.status != "active" {
        return Err(crate::error::AppError::Conflict(format!(
            "meeting {meeting_id} is {}: speech is recorded only while it is active",
            meeting.status
        )));
    }
    let segment =
        meetings::add_segment(&state.db, caller, &meeting, &u.text, u.start_ms as i64, u.end_ms as i64, f64::from(u.confidence)).await?;
    let speaker = json!({"user_id": caller.user.id, "display_name": caller.user.display_name});
    if state.hub.swap_speaker(meeting_id, &caller.user.id) {
        publish(state, meeting_id, json!({"type": "speaker_update", "meeting_id": meeting_id, "speaker": speaker, "at": iso(now_ms())}));
    }
    publish(state, meeting_id, json!({"type": "transcript_segment", "meeting_id": meeting_id, "segment": segment}));
    Ok(())
}

impl Hub {
    /// Records `user` as `meeting`'s current speaker; whether that changed it.
    fn swap_speaker(&self, meeting: &str, user: &str) -> bool {
        let mut speakers = self.speakers.lock().unwrap_or_else(|e| e.into_inner());
        speakers.insert(meeting.to_string(), user.to_string()).as_deref() != Some(user)
    }
}

/// Audio for the recognizer thread.
enum Audio {
    Samples(Vec<i16>),
    Flush,
    Finish,
}

/// Starts a recognizer on a blocking thread; `None` when the server has no speech model.
fn start_recognizer(state: &AppState) -> (Option<std::sync::mpsc::Sender<Audio>>, mpsc::UnboundedReceiver<Heard>) {
    let (heard_tx, heard_rx) = mpsc::unbounded_channel();
    let Some(model) = state.speech.clone() else { return (None, heard_rx) };
    let (audio_tx, audio_rx) = std::sync::mpsc::channel::<Audio>();
    tokio::task::spawn_blocking(move || {
        let mut recognizer = match Recognizer::new(&model) {
            Ok(r) => r,
            Err(e) => {
                let _ = heard_tx.send(Heard::Failed(e.to_string()));
                return;
            }
        };
        while let Ok(audio) = audio_rx.recv() {
            let heard = match audio {
                Audio::Samples(samples) => recognizer.feed(&samples),
                Audio::Flush => recognizer.finish().map(|u| u.into_iter().collect()),
                Audio::Finish => {
                    if let Ok(Some(u)) = recognizer.finish() {
                        let _ = heard_tx.send(Heard::Utterance(u));
                    }
                    return;
                }
            };
            match heard {
                Ok(utterances) => utterances.into_iter().for_each(|u| {
                    let _ = heard_tx.send(Heard::Utterance(u));
                }),
                Err(e) => {
                    let _ = heard_tx.send(Heard::Failed(e.to_string()));
                    return;
                }
            }
        }
    });
    (Some(audio_tx), heard_rx)
}
