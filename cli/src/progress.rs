//! Progress bars on standard error (indicatif), shown only on a terminal and
//! only for work big enough to wait for.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `total` bytes, hidden below `from_bytes` or off a terminal.
pub fn bytes(total: u64, from_bytes: u64, label: &str) -> ProgressBar {
    if total < from_bytes || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total).with_message(label.to_string());
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// A bar over `total` items (rows, groups), hidden off a terminal.
pub fn items(total: u64, label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total).with_message(label.to_string());
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} eta {eta}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// A spinner with a message the caller updates, hidden off a terminal.
pub fn spinner(label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner().with_message(label.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}
