//! The node's newest log lines, kept in memory so `GET /api/v1/admin/nodes/{id}/logs`
//! can read them from this node over gRPC. A second formatting layer of the
//! node's subscriber writes each event here (without colour codes); the oldest
//! lines are dropped past [`CAPACITY`].

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// Lines kept.
pub const CAPACITY: usize = 5_000;

/// The shared buffer of the newest lines.
#[derive(Clone, Default)]
pub struct LogRing {
    lines: Arc<Mutex<VecDeque<String>>>,
}

impl LogRing {
    /// The process's ring, which the node's subscriber writes to.
    pub fn global() -> &'static LogRing {
        static RING: OnceLock<LogRing> = OnceLock::new();
        RING.get_or_init(LogRing::default)
    }

    /// Appends `text`, one entry per line.
    fn push(&self, text: &str) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if lines.len() == CAPACITY {
                lines.pop_front();
            }
            lines.push_back(line.to_string());
        }
    }

    /// The newest `n` lines, oldest first.
    pub fn tail(&self, n: usize) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().skip(lines.len().saturating_sub(n)).cloned().collect()
    }
}

/// One event being formatted; pushed to the ring when the layer drops it.
pub struct LineWriter {
    ring: LogRing,
    buf: Vec<u8>,
}

impl Write for LineWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        self.ring.push(&String::from_utf8_lossy(&self.buf));
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogRing {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> LineWriter {
        LineWriter { ring: self.clone(), buf: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_lines_oldest_first() {
        let ring = LogRing::default();
        for i in 0..CAPACITY + 3 {
            ring.push(&format!("line {i}\n"));
        }
        assert_eq!(ring.tail(2), vec![format!("line {}", CAPACITY + 1), format!("line {}", CAPACITY + 2)]);
        assert_eq!(ring.tail(usize::MAX).len(), CAPACITY);
        assert_eq!(ring.tail(usize::MAX)[0], "line 3");
    }

    #[test]
    fn an_event_written_in_pieces_is_one_line() {
        let ring = LogRing::default();
        {
            let mut w = tracing_subscriber::fmt::MakeWriter::make_writer(&ring);
            write!(w, "INFO ").unwrap();
            writeln!(w, "node started").unwrap();
        }
        assert_eq!(ring.tail(10), vec!["INFO node started".to_string()]);
    }
}
