//! The data of a `COPY … FROM STDIN` as it streams in (`CopyData` messages
//! cut anywhere): PostgreSQL's text and CSV formats read into rows of fields,
//! each text or NULL, which the SQL engine converts to the columns' types.

use tessera_sql::CopyOptions;

/// One row: a field per column, `None` for NULL.
pub type Fields = Vec<Option<String>>;

/// Reads rows out of the bytes of a COPY as they arrive.
pub struct CopyDecoder {
    options: CopyOptions,
    buffer: Vec<u8>,
    /// How far `buffer` was scanned for the end of its first record, and
    /// whether that point is inside a quoted CSV field.
    scanned: usize,
    in_quotes: bool,
    /// Records read so far (the header counts): a failure names its line.
    pub line: u64,
    /// `\.` was read: what follows is ignored.
    ended: bool,
}

impl CopyDecoder {
    /// A decoder for `options`; delimiter, quote and escape must be one byte.
    pub fn new(options: CopyOptions) -> Result<Self, String> {
        for (what, c) in [("delimiter", options.delimiter), ("quote", options.quote), ("escape", options.escape)] {
            if !c.is_ascii() {
                return Err(format!("COPY {what} must be a single one-byte character"));
            }
        }
        Ok(CopyDecoder { options, buffer: Vec::new(), scanned: 0, in_quotes: false, line: 0, ended: false })
    }

    /// Whether the data begins with a header line.
    pub fn header_line(&self) -> bool {
        self.options.header
    }

    /// Bytes of a row not complete yet: what is waiting for its end.
    pub fn pending_bytes(&self) -> usize {
        self.buffer.len()
    }

    /// The rows completed by `data`.
    pub fn feed(&mut self, data: &[u8]) -> Result<Vec<Fields>, String> {
        if self.ended {
            return Ok(Vec::new());
        }
        self.buffer.extend_from_slice(data);
        let mut rows = Vec::new();
        let mut start = 0;
        while let Some(end) = self.record_end(start) {
            let record = self.buffer[start..end].to_vec();
            start = end + 1;
            if let Some(row) = self.record(&record)? {
                rows.push(row);
            }
            if self.ended {
                break;
            }
        }
        self.buffer.drain(..start);
        self.scanned -= start.min(self.scanned);
        Ok(rows)
    }

    /// The last row, when the data does not end with a newline.
    pub fn finish(&mut self) -> Result<Option<Fields>, String> {
        if self.ended || self.buffer.is_empty() {
            return Ok(None);
        }
        if self.in_quotes {
            return Err(format!("line {}: unterminated CSV quoted field", self.line + 1));
        }
        let record = std::mem::take(&mut self.buffer);
        self.record(&record)
    }

    /// Where the record starting at `start` ends (its newline), if it is all here.
    fn record_end(&mut self, start: usize) -> Option<usize> {
        let (quote, escape) = (self.options.quote as u8, self.options.escape as u8);
        let mut i = self.scanned.max(start);
        while i < self.buffer.len() {
            let b = self.buffer[i];
            // An escape as the last byte here: what it escapes is in the next piece.
            let escapes = (self.options.csv && self.in_quotes && b == escape && escape != quote) || (!self.options.csv && b == b'\\');
            if escapes && i + 1 == self.buffer.len() {
                break;
            }
            if self.options.csv {
                if escapes && self.buffer.get(i + 1).is_some_and(|n| *n == quote || *n == escape) {
                    i += 2;
                    continue;
                }
                if b == quote {
                    self.in_quotes = !self.in_quotes;
                }
            } else if escapes {
                // An escaped character (a newline too) belongs to the field.
                i += 2;
                continue;
            }
            if b == b'\n' && !self.in_quotes {
                self.scanned = i + 1;
                return Some(i);
            }
            i += 1;
        }
        self.scanned = i;
        None
    }

    /// One record's fields; `None` for the header and the `\.` end marker.
    fn record(&mut self, record: &[u8]) -> Result<Option<Fields>, String> {
        let record = record.strip_suffix(b"\r").unwrap_or(record);
        self.line += 1;
        if record == b"\\." {
            self.ended = true;
            return Ok(None);
        }
        if self.line == 1 && self.options.header {
            return Ok(None);
        }
        let text = std::str::from_utf8(record).map_err(|_| format!("line {}: invalid byte sequence for encoding \"UTF8\"", self.line))?;
        let fields = if self.options.csv { csv_fields(text, &self.options) } else { text_fields(text, &self.options) };
        fields.map(Some).map_err(|e| format!("line {}: {e}", self.line))
    }
}

/// A line of PostgreSQL's text format: fields split at the delimiter,
/// backslash escapes decoded; a field written as the NULL string is NULL.
/// Octal and hex escapes are bytes (`\303\251` is `é` in UTF-8), as in
/// PostgreSQL; a field whose bytes are not UTF-8 is refused.
fn text_fields(line: &str, o: &CopyOptions) -> Result<Fields, String> {
    let mut fields = Vec::new();
    let (mut raw, mut value) = (String::new(), Vec::new());
    let push = |value: &mut Vec<u8>, c: char| value.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == o.delimiter {
            fields.push(take_field(&mut raw, &mut value, o)?);
            continue;
        }
        raw.push(c);
        if c != '\\' {
            push(&mut value, c);
            continue;
        }
        let Some(e) = chars.next() else { return Err("end-of-copy marker corrupt".into()) };
        raw.push(e);
        match e {
            'b' => value.push(0x08),
            'f' => value.push(0x0c),
            'n' => value.push(b'\n'),
            'r' => value.push(b'\r'),
            't' => value.push(b'\t'),
            'v' => value.push(0x0b),
            // The low eight bits, as PostgreSQL keeps them.
            '0'..='7' => value.push((escaped_number(&mut chars, &mut raw, 8, e.to_digit(8).unwrap_or(0)) & 0xff) as u8),
            'x' if chars.peek().is_some_and(char::is_ascii_hexdigit) => {
                value.push((escaped_number(&mut chars, &mut raw, 16, 0) & 0xff) as u8)
            }
            other => push(&mut value, other),
        }
    }
    fields.push(take_field(&mut raw, &mut value, o)?);
    Ok(fields)
}

/// The value of an escape's digits in `radix`: `start`, then up to two more.
fn escaped_number(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, raw: &mut String, radix: u32, start: u32) -> u32 {
    let mut n = start;
    for _ in 0..2 {
        let Some(d) = chars.peek().and_then(|d| d.to_digit(radix)) else { break };
        raw.extend(chars.next());
        n = n * radix + d;
    }
    n
}

fn take_field(raw: &mut String, value: &mut Vec<u8>, o: &CopyOptions) -> Result<Option<String>, String> {
    let is_null = *raw == o.null;
    raw.clear();
    let bytes = std::mem::take(value);
    if is_null {
        return Ok(None);
    }
    String::from_utf8(bytes).map(Some).map_err(|_| "invalid byte sequence for encoding \"UTF8\"".to_string())
}

/// A record of CSV: quoted fields may hold delimiters, newlines and (doubled,
/// or after the escape character) quotes; an unquoted field written as the
/// NULL string (by default: empty) is NULL, a quoted one never is.
fn csv_fields(record: &str, o: &CopyOptions) -> Result<Fields, String> {
    let mut fields = Vec::new();
    let mut chars = record.chars().peekable();
    let (mut value, mut quoted, mut unquoted_raw) = (String::new(), false, String::new());
    while let Some(c) = chars.next() {
        if c == o.delimiter {
            fields.push(csv_field(std::mem::take(&mut value), quoted, &unquoted_raw, o));
            quoted = false;
            unquoted_raw.clear();
        } else if c == o.quote {
            quoted = true;
            loop {
                match chars.next() {
                    None => return Err("unterminated CSV quoted field".into()),
                    Some(e) if e == o.escape && chars.peek().is_some_and(|n| *n == o.quote || *n == o.escape) => {
                        value.push(chars.next().unwrap_or(e));
                    }
                    Some(q) if q == o.quote => break,
                    Some(other) => value.push(other),
                }
            }
        } else {
            unquoted_raw.push(c);
            value.push(c);
        }
    }
    fields.push(csv_field(value, quoted, &unquoted_raw, o));
    Ok(fields)
}

fn csv_field(value: String, quoted: bool, unquoted_raw: &str, o: &CopyOptions) -> Option<String> {
    (quoted || unquoted_raw != o.null).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(sql: &str) -> CopyOptions {
        tessera_sql::copy_from_stdin(sql).unwrap().unwrap().options
    }

    fn all(sql: &str, chunks: &[&[u8]]) -> Result<Vec<Fields>, String> {
        let mut d = CopyDecoder::new(options(sql))?;
        let mut rows = Vec::new();
        for c in chunks {
            rows.extend(d.feed(c)?);
        }
        rows.extend(d.finish()?);
        Ok(rows)
    }

    fn row(fields: &[Option<&str>]) -> Fields {
        fields.iter().map(|f| f.map(str::to_string)).collect()
    }

    #[test]
    fn text_format_rows_cut_anywhere() {
        let rows =
            all("COPY t FROM STDIN", &[b"1\tbo", b"lt\t\\N\n2\ta\\tb\\\\c\\nd\t\\x41\\101\r\n", b"3\t\t", b"x\n\\.\nignored\n"]).unwrap();
        assert_eq!(
            rows,
            vec![
                row(&[Some("1"), Some("bolt"), None]),
                row(&[Some("2"), Some("a\tb\\c\nd"), Some("AA")]),
                row(&[Some("3"), Some(""), Some("x")])
            ]
        );
        // A backslash ending a piece escapes the first byte of the next.
        let rows = all("COPY t FROM STDIN", &[b"x\\", b"\\\ny\n"]).unwrap();
        assert_eq!(rows, vec![row(&[Some("x\\")]), row(&[Some("y")])]);
        let rows = all("COPY t FROM STDIN", &[b"1\ta\\", b"\nb\n"]).unwrap();
        assert_eq!(rows, vec![row(&[Some("1"), Some("a\nb")])]);
        let rows = all("COPY t FROM STDIN WITH (DELIMITER '|', NULL 'nil')", &[b"1|nil|a\\|b"]).unwrap();
        assert_eq!(rows, vec![row(&[Some("1"), None, Some("a|b")])]);
    }

    #[test]
    fn octal_and_hex_escapes_are_bytes_of_utf8() {
        // `é` is C3 A9 in UTF-8: PostgreSQL's COPY reads the escapes as those bytes.
        let rows = all("COPY t FROM STDIN", &[b"caf\\303\\251\tcaf\\xc3\\xa9\n"]).unwrap();
        assert_eq!(rows, vec![row(&[Some("caf\u{e9}"), Some("caf\u{e9}")])]);
        let err = all("COPY t FROM STDIN", &[b"bad\\377\n"]).unwrap_err();
        assert!(err.contains("line 1") && err.contains("UTF8"), "{err}");
    }

    #[test]
    fn csv_rows_with_quotes_newlines_and_a_header() {
        let data: &[&[u8]] = &[b"id,name,note\n1,\"a, \"\"quoted\"\"", b"\nname\",\n2,\"\",x\r\n3,,\"\"\n"];
        let rows = all("COPY t FROM STDIN WITH (FORMAT csv, HEADER)", data).unwrap();
        assert_eq!(
            rows,
            vec![
                row(&[Some("1"), Some("a, \"quoted\"\nname"), None]),
                row(&[Some("2"), Some(""), Some("x")]),
                row(&[Some("3"), None, Some("")])
            ]
        );
        let rows = all(r"COPY t FROM STDIN WITH (FORMAT csv, ESCAPE '\')", &[br#"1,"a\"b""#]).unwrap();
        assert_eq!(rows, vec![row(&[Some("1"), Some("a\"b")])]);
        // An escape ending a piece, the quote it escapes in the next.
        let rows = all(r"COPY t FROM STDIN WITH (FORMAT csv, ESCAPE '\')", &[b"1,\"a\\", b"\"b\"\n2,c\n"]).unwrap();
        assert_eq!(rows, vec![row(&[Some("1"), Some("a\"b")]), row(&[Some("2"), Some("c")])]);
        // QUOTE alone: ESCAPE follows it, as in PostgreSQL.
        let rows = all("COPY t FROM STDIN WITH (FORMAT csv, QUOTE '''')", &[b"'it''s',\"x\"\n"]).unwrap();
        assert_eq!(rows, vec![row(&[Some("it's"), Some("\"x\"")])]);
        let err = all("COPY t FROM STDIN WITH (FORMAT csv)", &[b"1,ok\n2,\"open\n"]).unwrap_err();
        assert!(err.contains("line 2") && err.contains("unterminated"), "{err}");
    }
}
