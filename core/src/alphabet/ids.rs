//! Identifiers and time (SPEC section 3 vocabulary).
//!
//! Every identifier is a newtype so that a sequence cannot be passed where a turn is expected.
//! All are totally ordered, because the core orders its outputs by them (SPEC section 7).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A point in the host's virtual or real time, in milliseconds since an arbitrary epoch.
///
/// The core never reads a clock: every input carries the current `Millis`, and it must never go
/// backwards (the engine answers [`crate::alphabet::error::HostError::TimeWentBackwards`]).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    /// `self + ms`, saturating: a deadline never wraps around.
    #[must_use]
    pub fn plus_ms(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }
}

/// The engine-wide acceptance sequence of a submission (SPEC 3).
///
/// Strictly increasing in acceptance order, continuing above the ledger's maximum after a
/// restart. It is assigned exactly once, at acceptance, and never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct Seq(pub u64);

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A string identifier that is cheap to clone and move (one pointer: outputs repeat ids often)
/// and cheap to compare (maps are keyed by them): shared, immutable, with a precomputed FNV-1a
/// hash that orders ids first, so most comparisons never look at the bytes. The order is
/// deterministic (no random seed) but not alphabetical; nothing in the core outputs depends on
/// it.
macro_rules! shared_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name(Arc<IdText>);

        /// `clone_from` leaves an id that is already the same one alone: copying a state into
        /// another (the model checker's copies) then touches no reference count.
        impl Clone for $name {
            fn clone(&self) -> $name {
                $name(Arc::clone(&self.0))
            }

            fn clone_from(&mut self, source: &$name) {
                if !Arc::ptr_eq(&self.0, &source.0) {
                    self.0 = Arc::clone(&source.0);
                }
            }
        }

        impl $name {
            /// Builds the id from anything string-like.
            #[must_use]
            pub fn new(id: impl AsRef<str>) -> $name {
                let text: Box<str> = Box::from(id.as_ref());
                $name(Arc::new(IdText { hash: fnv1a(text.as_bytes()), text }))
            }

            /// The id as a string.
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0.text
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0.text)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), &*self.0.text)
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                Arc::ptr_eq(&self.0, &other.0) || (self.0.hash == other.0.hash && self.0.text == other.0.text)
            }
        }

        impl Eq for $name {}

        impl Ord for $name {
            fn cmp(&self, other: &$name) -> std::cmp::Ordering {
                if Arc::ptr_eq(&self.0, &other.0) {
                    return std::cmp::Ordering::Equal;
                }
                self.0.hash.cmp(&other.0.hash).then_with(|| self.0.text.cmp(&other.0.text))
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &$name) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.0.text.hash(state);
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0.text)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Ok($name::new(text))
            }
        }

        /// Serialised as its text.
        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string" })
            }
        }
    };
}

/// The shared text of an identifier with its hash.
struct IdText {
    hash: u64,
    text: Box<str>,
}

/// 64-bit FNV-1a: a fixed, seedless hash (determinism forbids a random seed).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

shared_id!(
    /// A session's id, chosen by the caller. A submission to an unknown top-level id creates it.
    ///
    /// An id of the form `<assistant message id>$$<tool call id>` names a sub-agent session
    /// (SPEC 4.11) and cannot be submitted to from outside.
    SessionId
);

impl SessionId {
    /// True when the id parses as a sub-agent session id: splitting on `$$` gives exactly two
    /// parts (SPEC 4.11).
    #[must_use]
    pub fn is_child(&self) -> bool {
        // Same as `split("$$").count() == 2`, without building a string searcher.
        let b = self.0.text.as_bytes();
        let (mut parts, mut i) = (1, 0);
        while i + 1 < b.len() {
            if b[i] == b'$' && b[i + 1] == b'$' {
                parts += 1;
                i += 2;
            } else {
                i += 1;
            }
        }
        parts == 2
    }
}

shared_id!(
    /// A caller-chosen, engine-wide idempotency key of a submission (SPEC 4.1).
    RunId
);

/// The id of a message the core asks the host to write.
///
/// Engine-wide and strictly increasing; the engine starts above the store's maximum
/// ([`crate::Start::next_message`]), so ids stay unique across restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct MessageId(pub u64);

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{}", self.0)
    }
}

/// One activation of the agent loop (SPEC 3 "Turn"). Engine-wide, strictly increasing within
/// one run of the engine; replies name it so that a reply for an older turn is stale (I13).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct TurnId(pub u64);

/// A timer the core asked the host to arm. Engine-wide, strictly increasing, never reused, so
/// a firing for a cancelled timer is recognisably stale (I13).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct TimerId(pub u64);

shared_id!(
    /// A tool call's id as the provider chose it (unique within a turn; a repeat is ignored).
    CallId
);

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::SessionId;

    #[test]
    fn child_ids_split_on_double_dollar_into_exactly_two_parts() {
        for (id, child) in [
            ("m1$$call", true),
            ("a$$$b", true),
            ("plain", false),
            ("a$$b$$c", false),
            ("$$", true),
            ("$", false),
        ] {
            assert_eq!(SessionId::new(id).is_child(), child, "{id}");
            assert_eq!(id.split("$$").count() == 2, child, "reference for {id}");
        }
    }

    #[test]
    fn ids_compare_by_content_not_by_allocation() {
        assert_eq!(SessionId::new("s"), SessionId::new(String::from("s")));
        assert_ne!(SessionId::new("s"), SessionId::new("t"));
        let json = serde_json::to_string(&SessionId::new("a\"b")).expect("json");
        assert_eq!(json, r#""a\"b""#);
        assert_eq!(
            serde_json::from_str::<SessionId>(&json).expect("parse"),
            SessionId::new("a\"b")
        );
    }
}
