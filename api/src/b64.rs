//! Serde helpers for binary payloads: base64 strings in human-readable formats
//! (JSON), raw bytes in binary ones (the MessagePack wire codec).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};

pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    if s.is_human_readable() { s.serialize_str(&STANDARD.encode(bytes)) } else { s.serialize_bytes(bytes) }
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("bytes or a base64 string")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<u8>, E> {
        STANDARD.decode(v).map_err(E::custom)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::new();
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(out)
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    if d.is_human_readable() { d.deserialize_str(BytesVisitor) } else { d.deserialize_byte_buf(BytesVisitor) }
}

/// The same for `Option<Vec<u8>>`.
pub mod option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Wrap(#[serde(with = "super")] Vec<u8>);

    pub fn serialize<S: Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(b) => s.serialize_some(&Wrap(b.clone())),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Blob {
        #[serde(with = "super")]
        data: Vec<u8>,
        #[serde(with = "super::option")]
        maybe: Option<Vec<u8>>,
    }

    #[test]
    fn bytes_round_trip_in_json_and_messagepack() {
        let b = Blob { data: vec![0, 1, 255], maybe: Some(vec![7]) };
        let json = serde_json::to_string(&b).unwrap();
        assert!(json.contains("\"AAH/\""), "{json}");
        assert_eq!(serde_json::from_str::<Blob>(&json).unwrap(), b);
        let mp = crate::codec::encode(&b).unwrap();
        assert_eq!(crate::codec::decode::<Blob>(&mp).unwrap(), b);
        let none = Blob { data: vec![], maybe: None };
        assert_eq!(crate::codec::decode::<Blob>(&crate::codec::encode(&none).unwrap()).unwrap(), none);
    }
}
