//! What a host tells the engine of its run ledger: fingerprints and finished runs (SPEC 4.1).
//!
//! Two calls are "the same call" exactly when their [`Fingerprint`]s match; an engine is started
//! with every finished run of the store's ledger ([`crate::Start`]), so a finished run is never
//! run again after a restart.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::alphabet::ids::{RunId, Seq, SessionId};
use crate::alphabet::input::Submit;
use crate::alphabet::outcome::Outcome;

/// SHA-256 over the length-prefixed session id, prompt and attachments of a submission: two
/// calls are "the same call" (SPEC 4.1) exactly when fingerprints match. Serialised as 64
/// lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a submission.
    #[must_use]
    pub fn of(submit: &Submit) -> Fingerprint {
        let mut h = Sha256::new();
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_be_bytes());
            h.update(bytes);
        };
        field(submit.session.as_str().as_bytes());
        field(submit.prompt.as_bytes());
        field(&(submit.attachments.len() as u64).to_be_bytes());
        for a in &submit.attachments {
            field(a.name.as_bytes());
            field(a.media_type.as_bytes());
            field(a.content.as_bytes());
        }
        Fingerprint(h.finalize().into())
    }

    /// The fingerprint as 64 lower-case hex digits.
    #[must_use]
    pub fn to_hex(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 15)]));
        }
        s
    }

    /// Parses 64 hex digits.
    ///
    /// # Errors
    /// A message saying what is wrong with the text.
    pub fn from_hex(text: &str) -> Result<Fingerprint, String> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return Err(format!("a fingerprint has 64 hex digits, not {}", bytes.len()));
        }
        let digit = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(format!("{:?} is not a hex digit", char::from(c))),
        };
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
        }
        Ok(Fingerprint(out))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", self.to_hex())
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Fingerprint, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Fingerprint::from_hex(&text).map_err(serde::de::Error::custom)
    }
}

/// Serialised as 64 hexadecimal digits.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Fingerprint {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Fingerprint".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 64,
            "maxLength": 64,
            "description": "SHA-256 as 64 hexadecimal digits."
        })
    }
}

/// A finished run as the store's ledger holds it, handed to the engine at start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct KnownRun {
    /// The run.
    pub run_id: RunId,
    /// Its session.
    pub session: SessionId,
    /// Its sequence.
    pub seq: Seq,
    /// The fingerprint of its request.
    pub fingerprint: Fingerprint,
    /// How it ended.
    pub outcome: Outcome,
}
