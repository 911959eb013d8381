//! Copies that reuse the allocations of the value they overwrite (`Clone::clone_from`).
//!
//! The model checker steps every explored transition in a copy of the core and its checkers
//! (SPEC 10), millions of times a run, and most copies live for one transition. A derived
//! `clone_from` drops the old value and allocates a new one, field by field; the copies here
//! write into the `String`s, `Vec`s and map entries already there. What a copy holds is the
//! same either way: only where its memory comes from changes.

use std::collections::BTreeMap;
#[cfg(any(feature = "checker", test))]
use std::collections::VecDeque;

/// `Clone` for a struct whose `clone_from` reuses each field's allocations: a field's own
/// `clone_from`, or the function named after `=>` ([`clone_map`], [`clone_deque`]). Both
/// methods destructure the whole struct, so a field added to it and not listed here fails to
/// compile.
macro_rules! clone_reusing {
    ($ty:ident { $( $(#[$attr:meta])* $field:ident $(=> $with:path)? ),* $(,)? }) => {
        impl Clone for $ty {
            fn clone(&self) -> Self {
                let $ty { $( $(#[$attr])* $field ),* } = self;
                $ty { $( $(#[$attr])* $field: $field.clone() ),* }
            }

            fn clone_from(&mut self, source: &Self) {
                let $ty { $( $(#[$attr])* $field ),* } = self;
                $( $(#[$attr])* clone_reusing!(@field $field, &source.$field $(, $with)?); )*
            }
        }
    };
    (@field $field:ident, $from:expr) => {
        $field.clone_from($from)
    };
    (@field $field:ident, $from:expr, $with:path) => {
        $with($field, $from)
    };
}

/// `into.clone_from(from)` for a map: each value is copied into the value of the same key
/// already there. When both hold the same keys (the common case between neighbouring states)
/// that is one pass over both; otherwise the keys `from` lacks go and the ones it adds are
/// cloned.
pub(crate) fn clone_map<K: Ord + Clone, V: Clone>(
    into: &mut BTreeMap<K, V>,
    from: &BTreeMap<K, V>,
) {
    if into.len() == from.len() && into.keys().eq(from.keys()) {
        for (i, f) in into.values_mut().zip(from.values()) {
            i.clone_from(f);
        }
        return;
    }
    into.retain(|k, _| from.contains_key(k));
    for (k, f) in from {
        match into.get_mut(k) {
            Some(i) => i.clone_from(f),
            None => {
                into.insert(k.clone(), f.clone());
            }
        }
    }
}

/// `into.clone_from(from)` for a queue, copying each element into the one at its place
/// (`VecDeque::clone_from` keeps the buffer but clones every element anew).
#[cfg(any(feature = "checker", test))]
pub(crate) fn clone_deque<T: Clone>(into: &mut VecDeque<T>, from: &VecDeque<T>) {
    into.truncate(from.len());
    let kept = into.len();
    for (i, f) in into.iter_mut().zip(from) {
        i.clone_from(f);
    }
    into.extend(from.iter().skip(kept).cloned());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_map_or_queue_equals_a_fresh_copy() {
        let map = |keys: &[u8]| -> BTreeMap<u8, String> {
            keys.iter().map(|k| (*k, format!("value {k}"))).collect()
        };
        for (into, from) in [
            (map(&[1, 2]), map(&[1, 2])),
            (map(&[1]), map(&[1, 3])),
            (map(&[]), map(&[4])),
            (map(&[1, 2, 5]), map(&[2, 3])),
            (map(&[6]), map(&[])),
        ] {
            let mut into = into;
            let mut from = from;
            from.values_mut().for_each(|v| v.push('!'));
            clone_map(&mut into, &from);
            assert_eq!(into, from);
        }
        let deque =
            |n: usize| -> VecDeque<String> { (0..n).map(|i| format!("item {i}")).collect() };
        for (a, b) in [(0, 3), (3, 3), (4, 1), (2, 5)] {
            let mut into = deque(a);
            let mut from = deque(b);
            from.iter_mut().for_each(|v| v.push('!'));
            clone_deque(&mut into, &from);
            assert_eq!(into, from);
        }
    }
}
