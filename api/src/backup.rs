//! The record format shared by group exports (node → router) and restores
//! (router → group): `(key, value)` pairs, keys relative to the group, each
//! as `key length (u32 BE) | key | value length (u32 BE) | value`.

/// Appends one pair to `out`.
pub fn push_pair(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(value);
}

/// Encodes `pairs`.
pub fn encode_pairs<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        push_pair(&mut out, k, v);
    }
    out
}

/// Decodes pairs; an error names what is malformed (a truncated record).
pub fn decode_pairs(mut bytes: &[u8]) -> Result<Vec<(&[u8], &[u8])>, String> {
    let mut pairs = Vec::new();
    let take = |bytes: &mut &[u8]| -> Result<usize, String> {
        if bytes.len() < 4 {
            return Err("truncated record length".into());
        }
        let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        *bytes = &bytes[4..];
        if bytes.len() < len {
            return Err("truncated record".into());
        }
        Ok(len)
    };
    while !bytes.is_empty() {
        let klen = take(&mut bytes)?;
        let (key, rest) = bytes.split_at(klen);
        bytes = rest;
        let vlen = take(&mut bytes)?;
        let (value, rest) = bytes.split_at(vlen);
        bytes = rest;
        if key.is_empty() {
            return Err("a record with an empty key".into());
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip_and_truncation_is_refused() {
        let bytes = encode_pairs([(&b"\x01a"[..], &b"1"[..]), (&b"\x02bb"[..], &b""[..])]);
        assert_eq!(decode_pairs(&bytes).unwrap(), vec![(&b"\x01a"[..], &b"1"[..]), (&b"\x02bb"[..], &b""[..])]);
        assert!(decode_pairs(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_pairs(&bytes[..3]).is_err());
    }
}
