//! Real recognition by `tessera_meetings::speech` over PocketSphinx: speech
//! synthesized with espeak-ng (converted with sox), decoded as a live stream.
//! Needs Debian's `pocketsphinx-en-us`, `espeak-ng` and `sox`; without them
//! the tests fail (they never skip).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use tessera_meetings::speech::{Recognizer, SpeechError, SpeechModel, Utterance, pcm_from_le_bytes};

const RATE: usize = 16_000;
/// Chunks fed to the recognizer: 100 ms, as a client streams them.
const CHUNK: usize = RATE / 10;

/// Sentences of common words, as meeting talk.
const SENTENCES: [&str; 7] = [
    "the meeting will start at ten o'clock",
    "please send the report to the team",
    "we need to finish the project by friday",
    "can everyone hear me now",
    "let us talk about the budget for next year",
    "i will call you back after lunch",
    "thank you all for coming today",
];

/// The word error rate of the sentences' stream must stay below this
/// (measured: 0.18, printed by `recognizes_synthesized_speech_in_a_stream`).
const MAX_WER: f64 = 0.40;
/// The same for one long sentence split by the 15 s cap, where a word may be
/// cut in two (measured: 0.28).
const MAX_WER_LONG: f64 = 0.50;

fn model() -> SpeechModel {
    SpeechModel::from_dir(Path::new(SpeechModel::DEBIAN_EN_US_DIR))
        .unwrap_or_else(|e| panic!("{e}: install the Debian package pocketsphinx-en-us"))
}

/// Fails the test, with what to install, when `tool` cannot run.
fn require_tool(tool: &str) {
    let runs = Command::new(tool).arg("--version").output().is_ok_and(|out| out.status.success());
    assert!(
        runs,
        "`{tool}` is needed to synthesize test speech: install it \
         (apt-get install espeak-ng sox)"
    );
}

/// `text` spoken by espeak-ng as 16 kHz mono 16-bit samples.
fn synthesize(dir: &Path, name: &str, text: &str) -> Vec<i16> {
    let wav = dir.join(format!("{name}.wav"));
    let raw = dir.join(format!("{name}.raw"));
    let status = Command::new("espeak-ng")
        .args(["-v", "en-us+edward", "-s", "140", "-w"])
        .arg(&wav)
        .arg(text)
        .status()
        .expect("espeak-ng runs (apt-get install espeak-ng)");
    assert!(status.success(), "espeak-ng failed on {text:?}");
    // `-R`: sox's dither with a fixed seed, so that the audio is the same
    // on every run; `-V1`: no warnings about a few clipped samples.
    let status = Command::new("sox")
        .args(["-V1", "-R"])
        .arg(&wav)
        .args(["-r", "16000", "-c", "1", "-b", "16", "-e", "signed-integer", "-t", "raw"])
        .arg(&raw)
        .status()
        .expect("sox runs (apt-get install sox)");
    assert!(status.success(), "sox failed on {}", wav.display());
    let samples = pcm_from_le_bytes(&std::fs::read(&raw).unwrap()).unwrap();
    assert!(samples.len() > RATE / 2, "espeak-ng produced no speech for {text:?}");
    samples
}

/// The first and last sample above a small amplitude: where the speech is.
fn speech_bounds(samples: &[i16]) -> (usize, usize) {
    let loud = |s: &i16| s.unsigned_abs() > 300;
    let first = samples.iter().position(loud).unwrap();
    let last = samples.iter().rposition(loud).unwrap();
    (first, last + 1)
}

/// Lowercased words without punctuation (an apostrophe stays: "o'clock").
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| w.chars().filter(|c| c.is_alphanumeric() || *c == '\'').collect::<String>().to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word-level Levenshtein distance over the reference's length.
fn word_error_rate(reference: &str, hypothesis: &str) -> f64 {
    let (r, h) = (words(reference), words(hypothesis));
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut row = vec![i + 1; h.len() + 1];
        for (j, hw) in h.iter().enumerate() {
            let substitution = prev[j] + usize::from(rw != hw);
            row[j + 1] = substitution.min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[h.len()] as f64 / r.len().max(1) as f64
}

/// Feeds `stream` in 100 ms chunks, then finishes it: every utterance.
fn recognize(recognizer: &mut Recognizer, stream: &[i16]) -> Vec<Utterance> {
    let mut utterances = Vec::new();
    for chunk in stream.chunks(CHUNK) {
        utterances.extend(recognizer.feed(chunk).unwrap());
    }
    utterances.extend(recognizer.finish().unwrap());
    utterances
}

fn ms(samples: usize) -> u64 {
    (samples * 1000 / RATE) as u64
}

#[test]
fn word_error_rate_counts_edits() {
    assert_eq!(word_error_rate("the cat sat", "The cat, sat."), 0.0);
    assert!((word_error_rate("the cat sat", "the hat sat down") - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(word_error_rate("a b", ""), 1.0);
}

#[test]
fn recognizes_synthesized_speech_in_a_stream() {
    require_tool("espeak-ng");
    require_tool("sox");
    let dir = tempfile::tempdir().unwrap();

    // Half a second of silence, then each sentence followed by a second of
    // silence, except the last: finish() must deliver it.
    let mut stream = vec![0i16; RATE / 2];
    let mut spans = Vec::new();
    for (i, sentence) in SENTENCES.iter().enumerate() {
        let speech = synthesize(dir.path(), &format!("s{i}"), sentence);
        let (first, last) = speech_bounds(&speech);
        spans.push((stream.len() + first, stream.len() + last));
        stream.extend_from_slice(&speech);
        if i + 1 < SENTENCES.len() {
            stream.extend(std::iter::repeat_n(0i16, RATE));
        }
    }

    let loaded = Instant::now();
    let mut recognizer = Recognizer::new(&model()).unwrap();
    let load_secs = loaded.elapsed().as_secs_f64();
    let decoding = Instant::now();
    let utterances = recognize(&mut recognizer, &stream);
    let decode_secs = decoding.elapsed().as_secs_f64();
    let audio_secs = recognizer.audio_secs();
    assert!((audio_secs - stream.len() as f64 / RATE as f64).abs() < 1e-9);

    println!("model load {load_secs:.2} s; {} utterances", utterances.len());
    for u in &utterances {
        println!("  {:>6}-{:>6} ms  conf {:.2}  {:?}", u.start_ms, u.end_ms, u.confidence, u.text);
    }
    // Each sentence's hypothesis: the utterances whose middle is nearest to
    // its speech.
    let mut per_sentence = vec![Vec::new(); SENTENCES.len()];
    for u in &utterances {
        let middle = (u.start_ms + u.end_ms) / 2;
        let distance = |&(first, last): &(usize, usize)| {
            let (first, last) = (ms(first), ms(last));
            first.saturating_sub(middle) + middle.saturating_sub(last)
        };
        let nearest = (0..spans.len()).min_by_key(|&i| distance(&spans[i])).unwrap();
        per_sentence[nearest].push(u);
    }
    for (i, sentence) in SENTENCES.iter().enumerate() {
        let hypothesis = per_sentence[i].iter().map(|u| u.text.as_str()).collect::<Vec<_>>().join(" ");
        let (first, last) = spans[i];
        println!(
            "sentence {i} ({}-{} ms), WER {:.2}\n  ref: {sentence}\n  hyp: {hypothesis}",
            ms(first),
            ms(last),
            word_error_rate(sentence, &hypothesis)
        );
    }
    let reference = SENTENCES.join(" ");
    let hypothesis = utterances.iter().map(|u| u.text.as_str()).collect::<Vec<_>>().join(" ");
    let wer = word_error_rate(&reference, &hypothesis);
    let rtf = decode_secs / audio_secs;
    println!(
        "overall WER {wer:.3} ({} reference words); decode {decode_secs:.2} s for \
         {audio_secs:.2} s of audio: real-time factor {rtf:.3}",
        words(&reference).len()
    );

    assert!(wer < MAX_WER, "word error rate {wer:.3} >= {MAX_WER}");
    // The silences split the stream: one utterance per sentence.
    assert_eq!(utterances.len(), SENTENCES.len(), "one utterance per sentence: {utterances:#?}");
    for (u, &(first, last)) in utterances.iter().zip(&spans) {
        assert!(!u.text.trim().is_empty());
        assert!(u.start_ms < u.end_ms, "{u:?}");
        assert!((0.0..=1.0).contains(&u.confidence), "{u:?}");
        let (first, last) = (ms(first), ms(last));
        assert!(u.start_ms.abs_diff(first) <= 400 && u.end_ms.abs_diff(last) <= 400, "{u:?} is not at the speech's {first}-{last} ms");
    }
    assert!(utterances.windows(2).all(|w| w[0].end_ms <= w[1].start_ms), "utterances are in stream order");
}

#[test]
fn speech_without_pauses_is_split_after_fifteen_seconds() {
    require_tool("espeak-ng");
    require_tool("sox");
    let dir = tempfile::tempdir().unwrap();
    // About 22 s of speech without a pause (no punctuation).
    let text = "we have a lot of work to do this week and the team needs to finish the new \
        website before the end of the month so please make sure that every page is ready and \
        tested and that our customers can find what they need without any trouble and when \
        that is done we can all take a few days off and talk about the plans for the next \
        quarter with the whole company";
    let speech = synthesize(dir.path(), "long", text);
    let (first, last) = speech_bounds(&speech);
    assert!(ms(last - first) > 20_000, "the speech lasts {} ms", ms(last - first));

    let mut recognizer = Recognizer::new(&model()).unwrap();
    let utterances = recognize(&mut recognizer, &speech);
    let hypothesis = utterances.iter().map(|u| u.text.as_str()).collect::<Vec<_>>().join(" ");
    let wer = word_error_rate(text, &hypothesis);
    println!("{utterances:#?}\nWER {wer:.3}");
    assert!(utterances.len() >= 2, "not split: {utterances:#?}");
    for u in &utterances {
        let duration = u.end_ms - u.start_ms;
        assert!(duration <= 15_500, "{u:?} lasts {duration} ms");
    }
    assert!(utterances[0].end_ms - utterances[0].start_ms >= 13_000, "the first utterance ends at the cap, not before: {utterances:#?}");
    assert!(wer < MAX_WER_LONG, "word error rate {wer:.3} >= {MAX_WER_LONG}");
}

#[test]
fn silence_and_low_noise_yield_no_utterance() {
    let model = model();
    // Two recognizers built and run at once, on two threads (a recognizer is
    // Send): the library's process-wide state must not be disturbed.
    let silence = {
        let model = model.clone();
        std::thread::spawn(move || {
            let mut recognizer = Recognizer::new(&model).unwrap();
            recognize(&mut recognizer, &vec![0i16; 5 * RATE])
        })
    };
    let noise = std::thread::spawn(move || {
        let mut recognizer = Recognizer::new(&model).unwrap();
        // Low white noise (about -50 dBFS) from a fixed linear congruential
        // generator.
        let mut state = 0x2545_f491_u32;
        let noise: Vec<i16> = (0..5 * RATE)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                ((state >> 16) as i16) / 320
            })
            .collect();
        recognize(&mut recognizer, &noise)
    });
    let silence = silence.join().unwrap();
    let noise = noise.join().unwrap();
    assert!(silence.is_empty(), "silence recognized as {silence:?}");
    assert!(noise.is_empty(), "low noise recognized as {noise:?}");
}

#[test]
fn pcm_from_le_bytes_takes_whole_samples() {
    assert_eq!(pcm_from_le_bytes(&[]).unwrap(), Vec::<i16>::new());
    assert_eq!(pcm_from_le_bytes(&[0x34, 0x12, 0x00, 0x80, 0xff, 0x7f]).unwrap(), vec![0x1234, i16::MIN, i16::MAX]);
    let err = pcm_from_le_bytes(&[1, 2, 3]).unwrap_err();
    assert!(matches!(err, SpeechError::OddPcmLength(3)), "{err:?}");
    assert!(err.to_string().contains("3 bytes"), "{err}");
}

#[test]
fn a_missing_model_names_the_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let err = SpeechModel::from_dir(&missing).unwrap_err();
    assert!(matches!(err, SpeechError::ModelMissing(_)), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&missing.join("en-us").display().to_string()), "{message}");

    // With the acoustic model present, the next missing file is named.
    std::fs::create_dir_all(missing.join("en-us")).unwrap();
    let message = SpeechModel::from_dir(&missing).unwrap_err().to_string();
    assert!(message.contains("en-us.lm.bin"), "{message}");
    std::fs::write(missing.join("en-us.lm.bin"), b"").unwrap();
    let message = SpeechModel::from_dir(&missing).unwrap_err().to_string();
    assert!(message.contains("cmudict-en-us.dict"), "{message}");
}

#[test]
fn a_recognizer_is_send() {
    fn send<T: Send>() {}
    send::<Recognizer>();
}

#[test]
fn a_corrupt_language_model_is_an_init_error() {
    let dir = tempfile::tempdir().unwrap();
    let lm = dir.path().join("broken.lm.bin");
    std::fs::write(&lm, b"not a language model").unwrap();
    let model = SpeechModel { lm, ..model() };
    let err = Recognizer::new(&model).err().expect("a broken model is refused");
    assert!(matches!(err, SpeechError::Init(_)), "{err:?}");
    assert!(err.to_string().contains("broken.lm.bin"), "{err}");
}
