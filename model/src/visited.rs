//! The breadth-first search's visited set, in shards that look up a batch of transitions in
//! parallel and still number new states in frontier order (SPEC section 10 "Model").
//!
//! Numbering a state means deciding which transition found it first, and that must not depend
//! on the number of workers. So a batch is handled in two steps: every shard scans the whole
//! batch in frontier order and resolves the keys that fall to it ([`Visited::resolve`]: known
//! before the batch, first found here, or found again after its first transition in the
//! batch), each shard on its own thread; then one ordered pass numbers the first-found states
//! in order ([`Visited::number`]), which is a few array writes per transition instead of a
//! probe of a table too large for the cache.

use std::collections::HashMap;

use crate::encode::{BuildKeyHasher, Key};

/// Where a transition leads, as its shard resolved it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A state numbered before this batch.
    Known(u32),
    /// A state this transition found first: the ordered pass numbers it.
    First,
    /// A state a transition before this one in the batch found first (its index in the
    /// shard), numbered by the time the ordered pass reaches this one.
    Again(u32),
}

/// One shard: the keys that fall to it, each with its index in the shard, and the state
/// number of each index.
#[derive(Default)]
struct Shard {
    local: HashMap<Key, u32, BuildKeyHasher>,
    number: Vec<u32>,
}

/// The visited set: every state found so far, by its key.
pub(crate) struct Visited {
    shards: Vec<Shard>,
    /// The states numbered so far.
    len: u32,
}

/// Batches with fewer keys are resolved on the calling thread, shard after shard (starting a
/// thread costs about as much as looking up a few thousand keys).
const SERIAL_BELOW: usize = 4096;

/// The shard of `key` among `shards` (independent of the bits the shard's own table uses).
pub(crate) fn shard_of(key: &Key, shards: usize) -> usize {
    let mut h = 0u64;
    for w in key.chunks_exact(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    ((h >> 32) % shards as u64) as usize
}

impl Visited {
    /// An empty set in `shards` shards (1 to 256: a shard's number is a byte, and a machine
    /// with more cores than that gains nothing from more); the report does not depend on how
    /// many.
    pub(crate) fn new(shards: usize) -> Visited {
        let shards = shards.clamp(1, 256);
        Visited { shards: (0..shards).map(|_| Shard::default()).collect(), len: 0 }
    }

    /// The states numbered so far.
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// Resolves a batch's keys, in frontier order: each shard on its own thread when there
    /// are several and the batch is large enough to pay for the threads. One target for each
    /// key, in the same order.
    pub(crate) fn resolve(&mut self, keys: &[Key]) -> Vec<Target> {
        let shards = self.shards.len();
        let of: Vec<u8> = keys.iter().map(|k| shard_of(k, shards) as u8).collect();
        let mut counts = vec![0; shards];
        of.iter().for_each(|&s| counts[usize::from(s)] += 1);
        let counts = &counts;
        let of_ = &of;
        let resolve = move |me: usize, shard: &mut Shard| {
            let mine = keys.iter().zip(of_).filter(|(_, s)| usize::from(**s) == me);
            shard.resolve(mine.map(|(k, _)| k), counts[me]).into_iter()
        };
        let mut each: Vec<std::vec::IntoIter<Target>> = if keys.len() < SERIAL_BELOW {
            self.shards.iter_mut().enumerate().map(|(me, shard)| resolve(me, shard)).collect()
        } else {
            std::thread::scope(|scope| {
                let (first, rest) = self.shards.split_first_mut().expect("at least one shard");
                let handles: Vec<_> = rest
                    .iter_mut()
                    .enumerate()
                    .map(|(i, shard)| scope.spawn(move || resolve(i + 1, shard)))
                    .collect();
                let firsts = resolve(0, first);
                std::iter::once(firsts)
                    .chain(handles.into_iter().map(|h| h.join().expect("a shard resolved")))
                    .collect()
            })
        };
        of.iter()
            .map(|&s| each[usize::from(s)].next().expect("a target for every key of a shard"))
            .collect()
    }

    /// The state a resolved transition leads to: for [`Target::First`], the next number.
    /// Called in frontier order over a batch after every shard resolved it.
    pub(crate) fn number(&mut self, key: &Key, target: Target) -> u32 {
        let shards = self.shards.len();
        match target {
            Target::Known(n) => n,
            Target::Again(i) => self.shards[shard_of(key, shards)].number[i as usize],
            Target::First => {
                let n = self.len;
                self.shards[shard_of(key, shards)].number.push(n);
                self.len += 1;
                n
            }
        }
    }

    /// Forgets every key (the memory goes; [`Visited::len`] stays).
    pub(crate) fn clear(&mut self) {
        for s in &mut self.shards {
            *s = Shard::default();
        }
    }
}

impl Shard {
    /// Resolves, in order, `keys` (the batch's `count` keys that fall to this shard),
    /// returning one [`Target`] for each of them. A key first found here is entered with its
    /// index in the shard; [`Visited::number`] gives that index its state number.
    fn resolve<'k>(&mut self, keys: impl Iterator<Item = &'k Key>, count: usize) -> Vec<Target> {
        let before = self.number.len() as u32;
        let mut out = Vec::with_capacity(count);
        for key in keys {
            // Indices are given in the order keys are entered, which is frontier order.
            let fresh = self.local.len() as u32;
            let local = *self.local.entry(*key).or_insert(fresh);
            out.push(match local {
                l if l == fresh => Target::First,
                l if l < before => Target::Known(self.number[l as usize]),
                l => Target::Again(l),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers `batches` of keys with `shards` shards, as the merge does.
    fn numbered(batches: &[Vec<Key>], shards: usize) -> Vec<u32> {
        let mut visited = Visited::new(shards);
        let mut out = Vec::new();
        for keys in batches {
            let targets = visited.resolve(keys);
            out.extend(keys.iter().zip(targets).map(|(k, t)| visited.number(k, t)));
        }
        out
    }

    #[test]
    fn any_number_of_shards_numbers_states_in_the_order_they_are_first_found() {
        // Keys with repeats inside a batch and across batches (a small key space), in batches
        // resolved on this thread and batches large enough for a thread per shard.
        let mut x = 7u64;
        let batches: Vec<Vec<Key>> = (0..24)
            .map(|b| {
                (0..if b % 6 == 5 { SERIAL_BELOW + b } else { 50 + b * 7 })
                    .map(|_| {
                        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        let mut key = [0u8; 32];
                        key[(x >> 60) as usize] = (x >> 52) as u8 % 16;
                        key[16 + (x >> 56) as usize % 16] = (x >> 40) as u8 % 4;
                        key
                    })
                    .collect()
            })
            .collect();
        // What a single map gives: the next number for a key never seen.
        let mut first = HashMap::new();
        let expected: Vec<u32> = batches
            .iter()
            .flatten()
            .map(|k| {
                let n = first.len() as u32;
                *first.entry(*k).or_insert(n)
            })
            .collect();
        // The last batch (a large one) finds new states, finds some of them again, and finds
        // states of earlier batches.
        let (earlier, last) = expected.split_at(expected.len() - batches[23].len());
        let seen = earlier.iter().max().map_or(0, |m| m + 1);
        let new: Vec<u32> = last.iter().copied().filter(|&n| n >= seen).collect();
        let distinct_new = new.iter().collect::<std::collections::BTreeSet<_>>().len();
        assert!(distinct_new > 100 && new.len() > distinct_new + 100, "new and found again");
        assert!(last.len() > new.len() + 100, "found in earlier batches");
        // More shards than a byte numbers are fewer shards (`--jobs 300` must not fail).
        for shards in [1, 2, 3, 8, 300] {
            assert_eq!(numbered(&batches, shards), expected, "{shards} shards");
        }
    }
}
