//! Scenario: real transcription. Known sentences, spoken by espeak-ng, are
//! streamed in real time as 16 kHz PCM over a meeting's WebSocket; the app
//! recognizes them offline with PocketSphinx and pushes `transcript_segment`
//! to every participant, with `participant_joined/left` and
//! `speaker_update`. The recognized words are checked against the script
//! (word error rate printed), the transcript is read back and summarized
//! by a text-generation service, audio into a
//! meeting that is not active is refused, participants on two instances
//! hear each other, and an instance killed mid-stream loses none of the
//! segments it had pushed.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use futures::SinkExt;
use serde_json::Value;
use tessera_tests::meetings::{AppUser, MeetingsApp, connect, next_of, register_and_login, speak, stream, word_error_rate};
use tessera_tests::{Cluster, ClusterOptions, json};
use tokio_tungstenite::tungstenite::Message;

const SCRIPT: &[&str] = &[
    "the meeting will start at ten o'clock",
    "please send the report to the team",
    "we need more time to finish the project",
    "thank you for coming today",
];

/// A word error rate that real recognition of espeak-ng's voice meets
/// (PocketSphinx measured 0.18 on similar sentences).
const MAX_WER: f64 = 0.4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meetings_transcription() {
    let cluster = Cluster::start(ClusterOptions::default()).await.expect("cluster start");
    if let Err(e) = scenario(&cluster).await {
        panic!("meetings_transcription scenario failed: {e:?}");
    }
}

async fn new_active_meeting(user: &AppUser, title: &str) -> Result<String> {
    let m = user.http.post("/api/v1/meetings", &json!({"title": title})).await?.ensure_status(201)?;
    let id = m.json["id"].as_str().context("meeting id")?.to_string();
    user.http.post(&format!("/api/v1/meetings/{id}/start"), &json!({})).await?.ensure_status(200)?;
    Ok(id)
}

/// A text-generation service speaking the OpenAI chat-completions shape: it
/// answers how many words the transcript it was sent has.
async fn complete(axum::Json(req): axum::Json<Value>) -> axum::Json<Value> {
    let words = req["messages"][1]["content"].as_str().map_or(0, |t| t.split_whitespace().count());
    axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": format!("A meeting of {words} words.")}}]}))
}

async fn scenario(cluster: &Cluster) -> Result<()> {
    let ai = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let ai_url = format!("http://{}", ai.local_addr()?);
    let ai_server = tokio::spawn(async move {
        let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(complete));
        let _ = axum::serve(ai, app).await;
    });
    let a = MeetingsApp::start(cluster, "meetings", "a", &[("AI_SERVICE_URL", &ai_url)]).await?;
    let ada = register_and_login(&a.http(), "ada@example.com", "correct horse battery", "Ada").await?;
    let speech: Vec<Vec<i16>> = SCRIPT.iter().map(|s| speak(s, cluster.root())).collect::<Result<_>>()?;
    let audio_secs: f64 = speech.iter().map(|s| s.len() as f64 / 16_000.0).sum();

    // A listener joins, then the speaker: the listener sees the speaker join.
    let meeting = new_active_meeting(&ada, "Planning").await?;
    let mut listener = connect(&a, &ada, &meeting).await?;
    let mut seen = Vec::new();
    next_of(&mut listener, "participant_joined", &mut seen, Duration::from_secs(10)).await?;
    let mut speaker = connect(&a, &ada, &meeting).await?;
    let joined = next_of(&mut listener, "participant_joined", &mut seen, Duration::from_secs(10)).await?;
    ensure!(joined["participant"]["user_id"] == ada.id.as_str(), "{joined}");

    // Each sentence streamed in real time is pushed as a segment.
    let started = Instant::now();
    let mut heard = Vec::new();
    for (sentence, samples) in SCRIPT.iter().zip(&speech) {
        stream(&mut speaker, samples).await?;
        let segment = next_of(&mut listener, "transcript_segment", &mut seen, Duration::from_secs(30)).await?;
        let text = segment["segment"]["text"].as_str().unwrap_or_default().to_string();
        eprintln!("[meetings] said {sentence:?}\n           heard {text:?}");
        ensure!(segment["segment"]["user_id"] == ada.id.as_str() && segment["segment"]["speaker"] == "Ada", "{segment}");
        heard.push(text);
    }
    let speaker_updates = seen.iter().filter(|m| m["type"] == "speaker_update").count();
    ensure!(speaker_updates == 1, "one speaker_update (the first speech of the meeting's only speaker): {seen:#?}");
    ensure!(seen.iter().any(|m| m["type"] == "speaker_update" && m["speaker"]["user_id"] == ada.id.as_str()), "{seen:#?}");
    let wer = word_error_rate(&SCRIPT.join(" "), &heard.join(" "));
    eprintln!(
        "[meetings] word error rate {wer:.3} over {} sentences ({audio_secs:.1} s of speech, streamed in {:.1} s)",
        SCRIPT.len(),
        started.elapsed().as_secs_f64()
    );
    ensure!(wer <= MAX_WER, "word error rate {wer:.3} is above {MAX_WER}: heard {heard:?}");

    // The speaker leaves; the listener is told.
    speaker.close(None).await?;
    let left = next_of(&mut listener, "participant_left", &mut seen, Duration::from_secs(10)).await?;
    ensure!(left["participant"]["user_id"] == ada.id.as_str(), "{left}");

    // The transcript holds the segments, in order.
    let transcript = ada.http.get(&format!("/api/v1/meetings/{meeting}/transcript")).await?.ensure_status(200)?;
    let texts: Vec<&str> = transcript.json["segments"].as_array().context("segments")?.iter().filter_map(|s| s["text"].as_str()).collect();
    ensure!(texts == heard.iter().map(String::as_str).collect::<Vec<_>>(), "transcript {texts:?} != pushed {heard:?}");

    // The recognized words are found by search.
    let word = heard.iter().flat_map(|h| h.split_whitespace()).max_by_key(|w| w.len()).context("a recognized word")?.to_string();
    let found = ada.http.get(&format!("/api/v1/search?q={word}&type=transcript")).await?.ensure_status(200)?;
    ensure!(
        found.json["results"].as_array().is_some_and(|r| !r.is_empty() && r.iter().all(|h| h["meeting_id"] == meeting.as_str())),
        "search for {word:?}: {found}"
    );

    // Speech into a meeting that is not active is refused.
    ada.http.post(&format!("/api/v1/meetings/{meeting}/stop"), &json!({})).await?.ensure_status(200)?;
    // With AI_SERVICE_URL, the ended meeting gets a summary from the service.
    let words = heard.iter().map(|h| h.split_whitespace().count()).sum::<usize>();
    let summary = tessera_tests::wait_for(Duration::from_secs(30), "the meeting's summary", async || {
        let m = ada.http.get(&format!("/api/v1/meetings/{meeting}")).await?;
        Ok(m.json["summary"].as_str().map(str::to_string))
    })
    .await?;
    ensure!(summary == format!("A meeting of {words} words."), "{summary}");
    ai_server.abort();
    let mut late = connect(&a, &ada, &meeting).await?;
    stream(&mut late, &speech[0]).await?;
    late.send(Message::Text(json!({"type": "flush"}).to_string().into())).await?;
    let refused = next_of(&mut late, "error", &mut Vec::new(), Duration::from_secs(30)).await?;
    ensure!(refused["error"] == "conflict", "{refused}");

    // The command-line client streams a PCM file and prints what is recognized.
    let meeting_cli = new_active_meeting(&ada, "From the command line").await?;
    let pcm = cluster.root().join("sentence.raw");
    std::fs::write(&pcm, speech[1].iter().flat_map(|s| s.to_le_bytes()).collect::<Vec<u8>>())?;
    let out = tokio::process::Command::new(tessera_tests::binary("tessera-meetings")?)
        .args(["stream", "--url", &a.url.replacen("http://", "ws://", 1), "--token", &ada.access_token, "--meeting", &meeting_cli])
        .arg(&pcm)
        .output()
        .await?;
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    ensure!(
        out.status.success() && printed.starts_with("Ada: "),
        "stream printed {printed:?}, stderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let transcript = ada.http.get(&format!("/api/v1/meetings/{meeting_cli}/transcript")).await?.ensure_status(200)?;
    ensure!(transcript.json["text"].as_str() == Some(printed.trim_end().trim_start_matches("Ada: ")), "{transcript} vs {printed:?}");

    // Participants on two instances: a listener on A hears what a speaker on B
    // says (relayed through a Tessera stream). Then B is killed mid-stream:
    // what it pushed is in Tessera.
    let mut b = MeetingsApp::start(cluster, "meetings", "b", &[]).await?;
    let meeting = new_active_meeting(&ada, "Retro").await?;
    let mut listener = connect(&a, &ada, &meeting).await?;
    next_of(&mut listener, "participant_joined", &mut Vec::new(), Duration::from_secs(10)).await?;
    let mut socket = connect(&b, &ada, &meeting).await?;
    let joined = next_of(&mut listener, "participant_joined", &mut Vec::new(), Duration::from_secs(30)).await?;
    ensure!(joined["participant"]["user_id"] == ada.id.as_str(), "the join on B reaches A: {joined}");
    let mut pushed = Vec::new();
    for samples in &speech[..2] {
        stream(&mut socket, samples).await?;
        let segment = next_of(&mut socket, "transcript_segment", &mut Vec::new(), Duration::from_secs(30)).await?;
        let relayed = next_of(&mut listener, "transcript_segment", &mut Vec::new(), Duration::from_secs(30)).await?;
        ensure!(relayed["segment"] == segment["segment"], "A relays B's segment: {relayed} vs {segment}");
        pushed.push(segment["segment"]["id"].clone());
    }
    // Killed while the third sentence is half streamed.
    let half = &speech[2][..speech[2].len() / 2];
    for chunk in half.chunks(1_600) {
        socket.send(Message::Binary(chunk.iter().flat_map(|s| s.to_le_bytes()).collect::<Vec<u8>>().into())).await?;
    }
    b.kill();
    let transcript = ada.http.get(&format!("/api/v1/meetings/{meeting}/transcript")).await?.ensure_status(200)?;
    let ids: Vec<Value> = transcript.json["segments"].as_array().context("segments")?.iter().map(|s| s["id"].clone()).collect();
    ensure!(ids == pushed, "after the kill the transcript holds {ids:?}, pushed {pushed:?}");
    let still = ada.http.get(&format!("/api/v1/meetings/{meeting}")).await?.ensure_status(200)?;
    ensure!(still.json["status"] == "active", "{still}");
    Ok(())
}
