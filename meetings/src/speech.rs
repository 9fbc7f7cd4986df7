//! Offline speech recognition with PocketSphinx (the C library of Debian's
//! `libpocketsphinx3`, 0.8+5prealpha), declared by hand in [`ffi`].
//!
//! A [`Recognizer`] decodes one stream of 16 kHz mono signed 16-bit PCM. The
//! decoder's voice activity detection (VAD) splits the stream into
//! utterances: an utterance ends when speech is followed by ~0.5 s of
//! silence, or when it has lasted [`MAX_UTTERANCE_SECS`]. All `unsafe` of the
//! crate's speech support is in this module.

use std::ffi::{CStr, CString, c_char};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Once;

/// Sample rate the recognizer expects (the en-us acoustic model's).
pub const SAMPLE_RATE: u32 = 16_000;
/// An utterance that has lasted this long is ended even without a pause.
pub const MAX_UTTERANCE_SECS: u64 = 15;

/// Samples per call into the decoder: the granularity of the VAD decisions
/// and so of the utterance boundaries (20 ms).
const BLOCK_SAMPLES: usize = 320;
/// Samples per decoder frame (`-frate 100`: 10 ms).
const SAMPLES_PER_FRAME: u64 = SAMPLE_RATE as u64 / 100;
/// Frames the VAD keeps from before it detects speech (`-vad_prespeech`).
const VAD_PRESPEECH_FRAMES: u64 = 20;
/// Frames of silence after which the VAD declares speech over (`-vad_postspeech`).
const VAD_POSTSPEECH_FRAMES: u64 = 50;
/// Base of the decoder's log probabilities (`-logbase`).
const LOG_BASE: f64 = 1.0001;

/// Paths of a PocketSphinx model: acoustic model dir, language model, dictionary.
#[derive(Debug, Clone)]
pub struct SpeechModel {
    pub hmm: PathBuf,
    pub lm: PathBuf,
    pub dict: PathBuf,
}

impl SpeechModel {
    /// Debian's `pocketsphinx-en-us` model directory.
    pub const DEBIAN_EN_US_DIR: &'static str = "/usr/share/pocketsphinx/model/en-us";

    /// The model under `dir` laid out as Debian's pocketsphinx-en-us
    /// (`dir/en-us`, `dir/en-us.lm.bin`, `dir/cmudict-en-us.dict`); an error
    /// naming the missing file.
    pub fn from_dir(dir: &Path) -> Result<Self, SpeechError> {
        let model = SpeechModel { hmm: dir.join("en-us"), lm: dir.join("en-us.lm.bin"), dict: dir.join("cmudict-en-us.dict") };
        model.check()?;
        Ok(model)
    }

    /// An error naming the first of the model's files that does not exist.
    fn check(&self) -> Result<(), SpeechError> {
        let files = [(&self.hmm, "acoustic model directory", true), (&self.lm, "language model", false), (&self.dict, "dictionary", false)];
        for (path, what, is_dir) in files {
            let ok = if is_dir { path.is_dir() } else { path.is_file() };
            if !ok {
                return Err(SpeechError::ModelMissing(format!(
                    "PocketSphinx {what} {} not found (install Debian's pocketsphinx-en-us)",
                    path.display()
                )));
            }
        }
        Ok(())
    }
}

/// What went wrong in speech recognition.
#[derive(Debug, thiserror::Error)]
pub enum SpeechError {
    /// A file of the model does not exist; the message names it.
    #[error("speech model missing: {0}")]
    ModelMissing(String),
    /// The decoder could not be created from the model.
    #[error("speech recognizer initialization failed: {0}")]
    Init(String),
    /// The decoder failed on the audio.
    #[error("speech decoding failed: {0}")]
    Decode(String),
    /// Audio bytes that are not 16-bit PCM: an odd number of bytes.
    #[error("invalid PCM audio: {0} bytes is not a whole number of 16-bit samples")]
    OddPcmLength(usize),
}

/// One recognized stretch of speech; times are from the stream's start.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Utterance {
    pub text: String,
    pub start_ms: u64,
    pub end_ms: u64,
    /// The mean posterior probability of the recognized words, in `[0, 1]`.
    pub confidence: f32,
}

/// A recognizer for one audio stream of 16 kHz mono signed 16-bit PCM. Not
/// Sync; Send (it owns its decoder). CPU-heavy: callers run it on a blocking
/// thread.
pub struct Recognizer {
    decoder: Decoder,
    /// Samples fed so far: the stream's clock.
    samples_fed: u64,
    /// Stream position (samples) where the decoder's current utterance began.
    utt_started_at: u64,
    /// Stream position (samples) of the audio the utterance in progress
    /// starts with, once the VAD has detected speech in it.
    speech_from: Option<u64>,
}

impl Recognizer {
    /// Loads the model into a new decoder. This parses the acoustic model,
    /// language model and dictionary each time (about half a second of CPU
    /// for Debian's en-us model; the parsed model is not shared, as the
    /// library's reference counts are not thread-safe): create one recognizer
    /// per stream, not per chunk of audio.
    pub fn new(model: &SpeechModel) -> Result<Self, SpeechError> {
        model.check()?;
        let mut decoder = Decoder::new(model)?;
        decoder.start_utt()?;
        Ok(Recognizer { decoder, samples_fed: 0, utt_started_at: 0, speech_from: None })
    }

    /// Feeds samples; answers the utterances that ended within them (speech
    /// followed by silence, from the decoder's voice activity detection).
    /// Also ends an utterance longer than ~15 s ([`MAX_UTTERANCE_SECS`]).
    pub fn feed(&mut self, samples: &[i16]) -> Result<Vec<Utterance>, SpeechError> {
        let mut ended = Vec::new();
        for block in samples.chunks(BLOCK_SAMPLES) {
            self.decoder.process(block)?;
            self.samples_fed += block.len() as u64;
            let in_speech = self.decoder.in_speech();
            match self.speech_from {
                None if in_speech => {
                    // The VAD passes on the frames it kept from before its
                    // decision (but none from before the utterance began).
                    let kept = VAD_PRESPEECH_FRAMES * SAMPLES_PER_FRAME;
                    let from = self.samples_fed.saturating_sub(kept);
                    self.speech_from = Some(from.max(self.utt_started_at));
                }
                Some(from) if !in_speech => {
                    let silence = VAD_POSTSPEECH_FRAMES * SAMPLES_PER_FRAME;
                    let end = self.samples_fed.saturating_sub(silence).max(from);
                    ended.extend(self.end_utterance(from, end)?);
                }
                Some(from) if self.samples_fed - from >= MAX_UTTERANCE_SECS * u64::from(SAMPLE_RATE) => {
                    ended.extend(self.end_utterance(from, self.samples_fed)?);
                }
                _ => {}
            }
        }
        Ok(ended)
    }

    /// Ends the stream: the utterance in progress, if it recognized any
    /// words. The recognizer stays usable: audio fed afterwards continues the
    /// stream's clock.
    pub fn finish(&mut self) -> Result<Option<Utterance>, SpeechError> {
        match self.speech_from {
            Some(from) => self.end_utterance(from, self.samples_fed),
            None => {
                // Audio without detected speech: nothing to recognize, but
                // restart so that the next utterance starts afresh.
                self.decoder.end_utt()?;
                self.decoder.start_utt()?;
                self.utt_started_at = self.samples_fed;
                Ok(None)
            }
        }
    }

    /// Seconds of audio fed so far.
    pub fn audio_secs(&self) -> f64 {
        self.samples_fed as f64 / f64::from(SAMPLE_RATE)
    }

    /// Ends the decoder's utterance, whose audio begins at sample `from` and
    /// whose speech ended near sample `end` (used when the decoder has no
    /// word timings), and starts the next one.
    fn end_utterance(&mut self, from: u64, end: u64) -> Result<Option<Utterance>, SpeechError> {
        self.speech_from = None;
        self.decoder.end_utt()?;
        let result = self.decoder.result();
        self.decoder.start_utt()?;
        self.utt_started_at = self.samples_fed;
        let Some(result) = result else {
            return Ok(None);
        };
        let (start, end) = match result.frames {
            Some((first, last)) => (first * SAMPLES_PER_FRAME, (last + 1) * SAMPLES_PER_FRAME),
            None => (from, end),
        };
        let start = start.min(self.samples_fed);
        let end = end.clamp(start, self.samples_fed);
        let ms = |samples: u64| samples * 1000 / u64::from(SAMPLE_RATE);
        Ok(Some(Utterance { text: result.text, start_ms: ms(start), end_ms: ms(end), confidence: result.confidence }))
    }
}

/// Little-endian 16-bit PCM bytes (a WebSocket binary frame) to samples; an
/// odd trailing byte is an error.
pub fn pcm_from_le_bytes(bytes: &[u8]) -> Result<Vec<i16>, SpeechError> {
    if !bytes.len().is_multiple_of(2) {
        return Err(SpeechError::OddPcmLength(bytes.len()));
    }
    Ok(bytes.chunks_exact(2).map(|pair| i16::from_le_bytes([pair[0], pair[1]])).collect())
}

/// A linear probability from the decoder's log probability, in `[0, 1]`.
fn prob_from_log(log_prob: i32) -> f32 {
    (f64::from(log_prob) * LOG_BASE.ln()).exp().clamp(0.0, 1.0) as f32
}

/// Whether a segment's word is a real word, not silence (`<sil>`), a
/// sentence boundary (`<s>`, `</s>`), a filler (`[NOISE]`) or `(NULL)`.
fn is_word(word: &str) -> bool {
    !(word.is_empty() || word.starts_with('<') || word.starts_with('[') || word == "(NULL)")
}

/// What the decoder recognized in an ended utterance.
struct DecodeResult {
    text: String,
    /// First and last (inclusive) frame of the words, counted from the
    /// stream's start (the decoder numbers frames across utterances, silence
    /// included), when the decoder has a word segmentation.
    frames: Option<(u64, u64)>,
    confidence: f32,
}

/// Sphinxbase logs to stderr by default. Its other outlet, `-logfn`, swaps a
/// process-wide `FILE*` and closes the previous one on every decoder
/// creation, a use-after-close when two decoders are created at once, so
/// logging is turned off once, before the first decoder exists.
fn silence_library_logging() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `err_set_logfp(NULL)` only sets sphinxbase's global log
        // stream to "disabled"; it runs once, before any decoder is created in
        // this process (every creation goes through here first), so no other
        // thread is logging through the stream it replaces. The previous
        // stream is stderr (the initial value), which it does not close.
        unsafe { ffi::err_set_logfp(std::ptr::null_mut()) };
    });
}

/// An owned PocketSphinx decoder: the one owner of the `ps_decoder_t`.
struct Decoder {
    ps: NonNull<ffi::PsDecoder>,
}

// SAFETY: the decoder is used only through `&mut self` (or dropped) by its
// one owner, so it is never touched by two threads at once. PocketSphinx keeps
// a decoder's state in the decoder (no thread-local storage), so it may be
// used from, and freed on, any thread; the process-wide state it touches
// (logging) is set once before any decoder exists. Not `Sync`.
unsafe impl Send for Decoder {}

impl Decoder {
    fn new(model: &SpeechModel) -> Result<Self, SpeechError> {
        silence_library_logging();
        let c_path = |path: &Path| {
            let text = path.to_str().ok_or_else(|| SpeechError::Init(format!("model path {} is not UTF-8", path.display())))?;
            CString::new(text).map_err(|_| SpeechError::Init(format!("model path {} contains a NUL byte", path.display())))
        };
        let hmm = c_path(&model.hmm)?;
        let lm = c_path(&model.lm)?;
        let dict = c_path(&model.dict)?;
        let number = |n: u64| CString::new(n.to_string()).expect("a number has no NUL byte");
        let prespeech = number(VAD_PRESPEECH_FRAMES);
        let postspeech = number(VAD_POSTSPEECH_FRAMES);
        let args = ffi::ps_args();
        // SAFETY: `cmd_ln_init` reads name/value pairs of NUL-terminated
        // strings up to the terminating null pointer (all `*const c_char`,
        // as its varargs expect); every string is a live `CStr` for the whole
        // call, and it copies them (`ckd_salloc`) before returning. `args` is
        // PocketSphinx's static argument table. It answers an owned
        // configuration or null.
        let config = unsafe {
            ffi::cmd_ln_init(
                std::ptr::null_mut(),
                args,
                1,
                c"-hmm".as_ptr(),
                hmm.as_ptr(),
                c"-lm".as_ptr(),
                lm.as_ptr(),
                c"-dict".as_ptr(),
                dict.as_ptr(),
                c"-samprate".as_ptr(),
                c"16000".as_ptr(),
                c"-logbase".as_ptr(),
                c"1.0001".as_ptr(),
                c"-bestpath".as_ptr(),
                c"yes".as_ptr(),
                c"-vad_prespeech".as_ptr(),
                prespeech.as_ptr(),
                c"-vad_postspeech".as_ptr(),
                postspeech.as_ptr(),
                std::ptr::null::<c_char>(),
            )
        };
        if config.is_null() {
            return Err(SpeechError::Init("PocketSphinx rejected the decoder configuration".into()));
        }
        // SAFETY: `config` is the live configuration made above. `ps_init`
        // takes its own reference to it (`cmd_ln_retain`) and answers an owned
        // decoder or null (having freed what it built).
        let ps = unsafe { ffi::ps_init(config) };
        // SAFETY: drops this function's reference to `config`, which it owns
        // and uses no more; the decoder, if any, holds its own.
        unsafe { ffi::cmd_ln_free_r(config) };
        let ps = NonNull::new(ps).ok_or_else(|| {
            SpeechError::Init(format!(
                "PocketSphinx could not load the model (acoustic model {}, language model {}, \
                 dictionary {}): a file is unreadable or not in PocketSphinx's format",
                model.hmm.display(),
                model.lm.display(),
                model.dict.display()
            ))
        })?;
        Ok(Decoder { ps })
    }

    fn start_utt(&mut self) -> Result<(), SpeechError> {
        // SAFETY: `self.ps` is a live decoder owned by `self`.
        let rc = unsafe { ffi::ps_start_utt(self.ps.as_ptr()) };
        check(rc, "ps_start_utt")
    }

    fn end_utt(&mut self) -> Result<(), SpeechError> {
        // SAFETY: `self.ps` is a live decoder owned by `self`.
        let rc = unsafe { ffi::ps_end_utt(self.ps.as_ptr()) };
        check(rc, "ps_end_utt")
    }

    fn process(&mut self, samples: &[i16]) -> Result<(), SpeechError> {
        // SAFETY: `self.ps` is a live decoder owned by `self`; the decoder
        // reads exactly `samples.len()` `int16`s from `samples.as_ptr()` during
        // the call and keeps no pointer to them.
        let rc = unsafe { ffi::ps_process_raw(self.ps.as_ptr(), samples.as_ptr(), samples.len(), 0, 0) };
        check(rc, "ps_process_raw")
    }

    /// Whether the VAD considers the audio fed last to be speech.
    fn in_speech(&mut self) -> bool {
        // SAFETY: `self.ps` is a live decoder owned by `self`.
        unsafe { ffi::ps_get_in_speech(self.ps.as_ptr()) != 0 }
    }

    /// The ended utterance's hypothesis, `None` when it has no words.
    fn result(&mut self) -> Option<DecodeResult> {
        let mut score = 0;
        // SAFETY: `self.ps` is a live decoder owned by `self`; `score` is a
        // valid `int32` to write. The string answered (or null) belongs to the
        // decoder and stays valid until its next call, so it is copied at once.
        let text = unsafe {
            let hyp = ffi::ps_get_hyp(self.ps.as_ptr(), &mut score);
            (!hyp.is_null()).then(|| CStr::from_ptr(hyp).to_string_lossy().into_owned())
        };
        let text = text?.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() {
            return None;
        }
        let mut first: Option<u64> = None;
        let mut last = 0u64;
        let mut probs = Vec::new();
        // SAFETY: `self.ps` is a live decoder owned by `self`. The iterator is
        // owned here: `ps_seg_next` frees it when it answers null, and it is
        // advanced to the end (never abandoned), so it is freed exactly once.
        // The word string is read before the iterator advances; the out
        // parameters are valid locals.
        unsafe {
            let mut seg = ffi::ps_seg_iter(self.ps.as_ptr());
            while !seg.is_null() {
                let word = ffi::ps_seg_word(seg);
                let word = if word.is_null() { "" } else { CStr::from_ptr(word).to_str().unwrap_or("") };
                if is_word(word) {
                    let (mut sf, mut ef) = (0, 0);
                    ffi::ps_seg_frames(seg, &mut sf, &mut ef);
                    let (mut ascr, mut lscr, mut lback) = (0, 0, 0);
                    probs.push(ffi::ps_seg_prob(seg, &mut ascr, &mut lscr, &mut lback));
                    let sf = u64::try_from(sf).unwrap_or(0);
                    let ef = u64::try_from(ef).unwrap_or(0).max(sf);
                    first.get_or_insert(sf);
                    last = last.max(ef);
                }
                seg = ffi::ps_seg_next(seg);
            }
        }
        let confidence = if probs.is_empty() {
            // SAFETY: `self.ps` is a live decoder owned by `self`.
            prob_from_log(unsafe { ffi::ps_get_prob(self.ps.as_ptr()) })
        } else {
            probs.iter().map(|&p| prob_from_log(p)).sum::<f32>() / probs.len() as f32
        };
        Some(DecodeResult { text, frames: first.map(|first| (first, last)), confidence })
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: `self.ps` is the live decoder this value owns; nothing uses
        // it after this (no segment iterator outlives `result`).
        unsafe { ffi::ps_free(self.ps.as_ptr()) };
    }
}

/// An error for a PocketSphinx call that answered a negative status.
fn check(rc: i32, call: &str) -> Result<(), SpeechError> {
    if rc < 0 { Err(SpeechError::Decode(format!("{call} failed ({rc})"))) } else { Ok(()) }
}

/// The few functions of `libpocketsphinx` and `libsphinxbase` (0.8+5prealpha)
/// used here, from `pocketsphinx.h`, `sphinxbase/cmd_ln.h` and
/// `sphinxbase/err.h`. `int32` and `int` are `i32`, `int16` is `i16`, `uint8`
/// is `u8`; the library is linked by `build.rs`.
mod ffi {
    use std::ffi::{c_char, c_int, c_void};
    use std::marker::{PhantomData, PhantomPinned};

    /// `ps_decoder_t`.
    #[repr(C)]
    pub struct PsDecoder {
        _data: [u8; 0],
        _marker: PhantomData<(*mut u8, PhantomPinned)>,
    }

    /// `cmd_ln_t`.
    #[repr(C)]
    pub struct CmdLn {
        _data: [u8; 0],
        _marker: PhantomData<(*mut u8, PhantomPinned)>,
    }

    /// `arg_t`.
    #[repr(C)]
    pub struct Arg {
        _data: [u8; 0],
        _marker: PhantomData<(*mut u8, PhantomPinned)>,
    }

    /// `ps_seg_t`.
    #[repr(C)]
    pub struct PsSeg {
        _data: [u8; 0],
        _marker: PhantomData<(*mut u8, PhantomPinned)>,
    }

    unsafe extern "C" {
        /// The static table of the decoder's arguments.
        pub safe fn ps_args() -> *const Arg;
        pub fn cmd_ln_init(inout: *mut CmdLn, defn: *const Arg, strict: i32, ...) -> *mut CmdLn;
        pub fn cmd_ln_free_r(cmdln: *mut CmdLn) -> c_int;
        /// `stream` is a `FILE*`; null disables logging.
        pub fn err_set_logfp(stream: *mut c_void);

        pub fn ps_init(config: *mut CmdLn) -> *mut PsDecoder;
        pub fn ps_free(ps: *mut PsDecoder) -> c_int;
        pub fn ps_start_utt(ps: *mut PsDecoder) -> c_int;
        pub fn ps_process_raw(ps: *mut PsDecoder, data: *const i16, n_samples: usize, no_search: c_int, full_utt: c_int) -> c_int;
        pub fn ps_get_in_speech(ps: *mut PsDecoder) -> u8;
        pub fn ps_end_utt(ps: *mut PsDecoder) -> c_int;
        pub fn ps_get_hyp(ps: *mut PsDecoder, out_best_score: *mut i32) -> *const c_char;
        pub fn ps_get_prob(ps: *mut PsDecoder) -> i32;

        pub fn ps_seg_iter(ps: *mut PsDecoder) -> *mut PsSeg;
        pub fn ps_seg_next(seg: *mut PsSeg) -> *mut PsSeg;
        pub fn ps_seg_word(seg: *mut PsSeg) -> *const c_char;
        pub fn ps_seg_frames(seg: *mut PsSeg, out_sf: *mut c_int, out_ef: *mut c_int);
        pub fn ps_seg_prob(seg: *mut PsSeg, out_ascr: *mut i32, out_lscr: *mut i32, out_lback: *mut i32) -> i32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_probabilities_become_linear() {
        assert_eq!(prob_from_log(0), 1.0);
        assert!((prob_from_log(-6932) - 0.5).abs() < 0.001);
        assert!(prob_from_log(-1_000_000) < 1e-6);
        assert_eq!(prob_from_log(5), 1.0);
    }

    #[test]
    fn fillers_are_not_words() {
        for filler in ["<s>", "</s>", "<sil>", "[NOISE]", "(NULL)", ""] {
            assert!(!is_word(filler), "{filler}");
        }
        assert!(is_word("meeting"));
        assert!(is_word("the(2)"));
    }

    #[test]
    fn pcm_bytes_are_little_endian() {
        assert_eq!(pcm_from_le_bytes(&[0x01, 0x00, 0xff, 0xff, 0x00, 0x80]).unwrap(), vec![1, -1, i16::MIN]);
        assert!(matches!(pcm_from_le_bytes(&[0, 0, 7]), Err(SpeechError::OddPcmLength(3))));
    }
}
