//! Loop detection (SPEC 4.8).
//!
//! Each step with tool calls has a signature: SHA-256 over, for each call in order, the
//! length-prefixed name, input and output (the paired result's text or error text, "" when
//! missing). Call ids are not part of it. Over the submission's last 10 steps (only once there
//! are 10; a resumed submission starts a new window), more than 5 equal signatures stop the turn.

use std::collections::VecDeque;

use sha2::{Digest, Sha256};

use crate::state::{Call, CallState, LOOP_WINDOW_MAX};

/// More than this many equal signatures in the window is a loop (SPEC 8: "more than 5").
pub(crate) const LOOP_REPEATS_MAX: usize = 5;

/// The signature of a step's calls; `None` for a step without calls.
pub(crate) fn signature(calls: &[Call]) -> Option<[u8; 32]> {
    if calls.is_empty() {
        return None;
    }
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(bytes);
    };
    for c in calls {
        field(c.name.as_bytes());
        field(c.input.as_bytes());
        let output = match &c.state {
            CallState::Reported { output, .. } => output.as_str(),
            _ => "",
        };
        field(output.as_bytes());
    }
    Some(h.finalize().into())
}

/// Pushes a step's signature into the window (dropping the oldest beyond 10) and says whether
/// the window now shows a loop.
pub(crate) fn record(window: &mut VecDeque<Option<[u8; 32]>>, sig: Option<[u8; 32]>) -> bool {
    window.push_back(sig);
    while window.len() > LOOP_WINDOW_MAX {
        window.pop_front();
    }
    if window.len() < LOOP_WINDOW_MAX {
        return false;
    }
    window
        .iter()
        .flatten()
        .any(|s| window.iter().flatten().filter(|o| *o == s).count() > LOOP_REPEATS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alphabet::CallId;

    fn call(name: &str, input: &str, output: &str) -> Call {
        Call {
            id: CallId::new(format!("id-{output}")),
            name: name.to_owned(),
            input: input.to_owned(),
            state: CallState::Reported { output: output.to_owned(), stop: None },
        }
    }

    #[test]
    fn six_equal_signatures_in_ten_steps_are_a_loop_five_are_not() {
        let same = signature(&[call("ls", "{}", "a")]);
        let other = |i: usize| signature(&[call("ls", "{}", &format!("o{i}"))]);
        let mut w = VecDeque::new();
        for i in 0..5 {
            assert!(!record(&mut w, same));
            assert!(!record(&mut w, other(i)));
        }
        assert_eq!(w.len(), 10, "five repeats in a full window are allowed");
        let mut w = VecDeque::new();
        for i in 0..4 {
            record(&mut w, other(i));
        }
        for _ in 0..5 {
            assert!(!record(&mut w, same), "the window is not full yet");
        }
        assert!(record(&mut w, same), "the sixth repeat in ten steps");
    }

    #[test]
    fn call_ids_are_not_part_of_the_signature_but_names_inputs_and_outputs_are() {
        let mut a = call("ls", "{}", "x");
        let b = call("ls", "{}", "x");
        a.id = CallId::new("other");
        assert_eq!(signature(&[a]), signature(std::slice::from_ref(&b)));
        assert_ne!(signature(&[call("ls", "{}", "y")]), signature(std::slice::from_ref(&b)));
        assert_ne!(signature(&[call("ls", "{\"a\":1}", "x")]), signature(std::slice::from_ref(&b)));
        // Length prefixes keep ("ab","c") apart from ("a","bc").
        assert_ne!(signature(&[call("ab", "c", "")]), signature(&[call("a", "bc", "")]));
        assert_eq!(signature(&[]), None);
    }

    #[test]
    fn steps_without_calls_take_a_slot() {
        let same = signature(&[call("ls", "{}", "a")]);
        let mut w = VecDeque::new();
        for _ in 0..4 {
            record(&mut w, None);
        }
        for _ in 0..5 {
            assert!(!record(&mut w, same));
        }
        assert!(record(&mut w, same));
        for _ in 0..4 {
            assert!(record(&mut w, None), "the four leading empty steps leave first");
        }
        assert!(!record(&mut w, None), "then the oldest repeat leaves: five remain");
    }
}
