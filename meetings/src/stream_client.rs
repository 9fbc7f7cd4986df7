//! `tessera-meetings stream`: sends 16 kHz mono signed 16-bit little-endian
//! PCM from standard input (or a file) to a meeting's WebSocket at real-time
//! pace, 100 ms per frame, and prints each transcript segment the server
//! pushes back. At the end of the audio it asks the server to finish the
//! utterance in progress and waits for its last segments.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::Message;

/// Bytes of 100 ms of audio.
const FRAME_BYTES: usize = 3_200;
/// How long to wait for the last segments once the audio has ended.
const TAIL: Duration = Duration::from_secs(5);

/// Streams `input` (`-` for standard input) to meeting `meeting` on `url`
/// (`ws://host:port`), authenticated by `token`.
pub async fn run(url: &str, token: &str, meeting: &str, input: &str) -> Result<()> {
    let mut reader: Box<dyn tokio::io::AsyncRead + Unpin> = if input == "-" {
        Box::new(tokio::io::stdin())
    } else {
        Box::new(tokio::fs::File::open(input).await.with_context(|| format!("opening {input}"))?)
    };
    let target = format!("{}/ws/meeting/{meeting}?access_token={token}", url.trim_end_matches('/'));
    let (socket, _) = tokio_tungstenite::connect_async(&target).await.with_context(|| format!("connecting to {url}"))?;
    let (mut tx, mut rx) = socket.split();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut frame = vec![0u8; FRAME_BYTES];
    loop {
        let mut filled = 0;
        while filled < FRAME_BYTES {
            let n = reader.read(&mut frame[filled..]).await?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            break;
        }
        let even = filled - filled % 2;
        // Real-time pace; segments that arrive meanwhile are printed.
        loop {
            tokio::select! {
                _ = tick.tick() => break,
                msg = rx.next() => print_message(msg)?,
            }
        }
        tx.send(Message::Binary(frame[..even].to_vec().into())).await?;
        if filled < FRAME_BYTES {
            break;
        }
    }
    tx.send(Message::Text(json!({"type": "flush"}).to_string().into())).await?;
    while let Ok(msg) = tokio::time::timeout(TAIL, rx.next()).await {
        if msg.is_none() {
            break;
        }
        print_message(msg)?;
    }
    let _ = tx.send(Message::Close(None)).await;
    Ok(())
}

fn print_message(msg: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>) -> Result<()> {
    match msg {
        Some(Ok(Message::Text(text))) => {
            let v: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
            match v["type"].as_str() {
                Some("transcript_segment") => {
                    println!("{}: {}", v["segment"]["speaker"].as_str().unwrap_or("?"), v["segment"]["text"].as_str().unwrap_or(""))
                }
                Some("error") => eprintln!("server: {} ({})", v["message"].as_str().unwrap_or(""), v["error"].as_str().unwrap_or("")),
                _ => {}
            }
            Ok(())
        }
        Some(Ok(_)) => Ok(()),
        Some(Err(e)) => Err(e.into()),
        None => bail!("the server closed the connection"),
    }
}
