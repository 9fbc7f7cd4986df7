//! Byte-level mutations in the manner of libFuzzer's mutators.

use rand::Rng;
use rand::rngs::StdRng;

/// A new input derived from a random corpus entry by 1–8 stacked mutations.
pub fn mutate(rng: &mut StdRng, corpus: &[Vec<u8>], dictionary: &[&str]) -> Vec<u8> {
    let mut data = corpus[rng.gen_range(0..corpus.len())].clone();
    for _ in 0..rng.gen_range(1..=8) {
        mutate_once(rng, &mut data, corpus, dictionary);
    }
    data.truncate(1 << 16);
    data
}

fn mutate_once(rng: &mut StdRng, data: &mut Vec<u8>, corpus: &[Vec<u8>], dictionary: &[&str]) {
    let len = data.len();
    match rng.gen_range(0..9) {
        // Flip one bit.
        0 if len > 0 => {
            let i = rng.gen_range(0..len);
            data[i] ^= 1 << rng.gen_range(0..8);
        }
        // Replace a byte with an interesting value.
        1 if len > 0 => {
            const INTERESTING: &[u8] =
                &[0, 1, 0x7f, 0x80, 0xff, b'\'', b'"', b'\\', b'(', b')', b'{', b'}', b'[', b']', b';', b'-', b'$', b'.'];
            let i = rng.gen_range(0..len);
            data[i] = if rng.gen_bool(0.5) { INTERESTING[rng.gen_range(0..INTERESTING.len())] } else { rng.r#gen() };
        }
        // Insert random bytes.
        2 => {
            let i = rng.gen_range(0..=len);
            let n = rng.gen_range(1..=4);
            for _ in 0..n {
                data.insert(i, rng.r#gen());
            }
        }
        // Delete a range.
        3 if len > 1 => {
            let a = rng.gen_range(0..len);
            let b = rng.gen_range(a..=len.min(a + 16));
            data.drain(a..b);
        }
        // Duplicate a range somewhere else.
        4 if len > 1 => {
            let a = rng.gen_range(0..len);
            let b = rng.gen_range(a..=len.min(a + 32));
            let chunk: Vec<u8> = data[a..b].to_vec();
            let at = rng.gen_range(0..=data.len());
            data.splice(at..at, chunk);
        }
        // Splice with another corpus entry.
        5 if !corpus.is_empty() => {
            let other = &corpus[rng.gen_range(0..corpus.len())];
            let cut = rng.gen_range(0..=len);
            let from = rng.gen_range(0..=other.len());
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
        }
        // Insert or overwrite with a dictionary token.
        6 | 7 if !dictionary.is_empty() => {
            let token = dictionary[rng.gen_range(0..dictionary.len())].as_bytes();
            let at = rng.gen_range(0..=len);
            if rng.gen_bool(0.5) || at + token.len() > len {
                data.splice(at..at, token.iter().copied());
            } else {
                data[at..at + token.len()].copy_from_slice(token);
            }
        }
        // Arithmetic on a byte (lengths, digits).
        _ if len > 0 => {
            let i = rng.gen_range(0..len);
            data[i] = data[i].wrapping_add(rng.gen_range(1..=16)).wrapping_sub(8);
        }
        _ => data.push(rng.r#gen()),
    }
}
