//! Small ordered maps and sets kept as sorted vectors, for the bookkeeping of the checkers of
//! SPEC section 6 (the [`Auditor`](super::Auditor)).
//!
//! The model checker copies an [`Auditor`](super::Auditor) on every explored transition. A
//! `BTreeMap` holding one entry allocates a node for eleven, and its copy allocates node by
//! node; a sorted vector holds exactly its entries in one allocation, and is copied in one. The
//! Auditor's maps hold a handful of entries (a few submissions, sessions, timers), so a
//! binary search and a short `memmove` cost less than a tree's pointers. The iteration order is
//! the key order, as with a `BTreeMap`, so what the checkers report does not change.

use std::borrow::Borrow;

/// An ordered map: entries sorted by key, each key once.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SortedMap<K, V> {
    entries: Vec<(K, V)>,
}

/// `clone_from` keeps the vector's allocation: the model checker copies auditors into ones it
/// has used before.
impl<K: Clone, V: Clone> Clone for SortedMap<K, V> {
    fn clone(&self) -> Self {
        SortedMap { entries: self.entries.clone() }
    }

    fn clone_from(&mut self, source: &Self) {
        // Entry by entry: a value's own allocations (a session's history) are reused too.
        self.entries.truncate(source.entries.len());
        let kept = self.entries.len();
        for ((k, v), (sk, sv)) in self.entries.iter_mut().zip(&source.entries) {
            k.clone_from(sk);
            v.clone_from(sv);
        }
        self.entries.extend(source.entries[kept..].iter().cloned());
    }
}

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap { entries: Vec::new() }
    }
}

impl<K: Ord, V> SortedMap<K, V> {
    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// Inserts or replaces; returns the value replaced.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes a key; returns its value.
    pub(crate) fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// The value of a key.
    pub(crate) fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    /// The value of a key, to change.
    pub(crate) fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    /// Whether the key is present.
    pub(crate) fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(key).is_ok()
    }

    /// The value of a key, inserting `make()` first when it is absent (`entry().or_insert_with`).
    pub(crate) fn get_or_insert_with(&mut self, key: &K, make: impl FnOnce() -> V) -> &mut V
    where
        K: Clone,
    {
        let i = match self.find(key) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (key.clone(), make()));
                i
            }
        };
        &mut self.entries[i].1
    }
}

impl<K, V> SortedMap<K, V> {
    /// The entries in key order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The values in key order.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// The entries in key order, their values to change.
    pub(crate) fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (&K, &mut V)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// The values in key order, to change.
    pub(crate) fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

/// An ordered set: items sorted, each once.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SortedSet<T> {
    items: Vec<T>,
}

/// `clone_from` keeps the vector's allocation, as for [`SortedMap`].
impl<T: Clone> Clone for SortedSet<T> {
    fn clone(&self) -> Self {
        SortedSet { items: self.items.clone() }
    }

    fn clone_from(&mut self, source: &Self) {
        self.items.clone_from(&source.items);
    }
}

impl<T> Default for SortedSet<T> {
    fn default() -> Self {
        SortedSet { items: Vec::new() }
    }
}

impl<T: Ord> SortedSet<T> {
    fn find<Q: Ord + ?Sized>(&self, item: &Q) -> Result<usize, usize>
    where
        T: Borrow<Q>,
    {
        self.items.binary_search_by(|t| t.borrow().cmp(item))
    }

    /// Adds an item; false when it was present.
    pub(crate) fn insert(&mut self, item: T) -> bool {
        match self.find(&item) {
            Ok(_) => false,
            Err(i) => {
                self.items.insert(i, item);
                true
            }
        }
    }

    /// Adds a copy of an item unless it is present (a copy is made only to be added); false
    /// when it was present.
    pub(crate) fn insert_cloned(&mut self, item: &T) -> bool
    where
        T: Clone,
    {
        match self.find(item) {
            Ok(_) => false,
            Err(i) => {
                self.items.insert(i, item.clone());
                true
            }
        }
    }

    /// Removes an item; false when it was absent.
    pub(crate) fn remove<Q: Ord + ?Sized>(&mut self, item: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        self.find(item).map(|i| self.items.remove(i)).is_ok()
    }

    /// Removes the item `order` finds, which says how each item orders against the one sought
    /// (for a key that cannot be borrowed from the items, such as a pair of references); false
    /// when it was absent.
    pub(crate) fn remove_by(&mut self, order: impl FnMut(&T) -> std::cmp::Ordering) -> bool {
        self.items.binary_search_by(order).map(|i| self.items.remove(i)).is_ok()
    }

    /// Whether the item `order` finds is present (see [`SortedSet::remove_by`]).
    pub(crate) fn contains_by(&self, order: impl FnMut(&T) -> std::cmp::Ordering) -> bool {
        self.items.binary_search_by(order).is_ok()
    }

    /// Whether the item is present.
    pub(crate) fn contains<Q: Ord + ?Sized>(&self, item: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        self.find(item).is_ok()
    }

    /// Keeps the items `keep` says yes to, in order.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.items.retain(keep);
    }
}

impl<T> SortedSet<T> {
    /// The number of items.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether it is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Removes every item (keeping the allocation).
    pub(crate) fn clear(&mut self) {
        self.items.clear();
    }

    /// The items in order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }
}

impl<'a, K, V> IntoIterator for &'a mut SortedMap<K, V> {
    type Item = (&'a K, &'a mut V);
    type IntoIter =
        std::iter::Map<std::slice::IterMut<'a, (K, V)>, fn(&'a mut (K, V)) -> Self::Item>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }
}

impl<T> IntoIterator for SortedSet<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

impl<'a, T> IntoIterator for &'a SortedSet<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::{SortedMap, SortedSet};

    /// A small deterministic generator, so the operation sequences are the same on every run.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, below: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % below
        }
    }

    /// Every operation, on keys from a small range (so hits and misses both happen), agrees
    /// with `BTreeMap`, and so does the order of iteration after each.
    #[test]
    fn the_map_behaves_like_a_btreemap() {
        let mut rng = Lcg(7);
        for _ in 0..200 {
            let (mut ours, mut theirs) = (SortedMap::default(), BTreeMap::new());
            for _ in 0..60 {
                let (k, v) = (rng.next(12), rng.next(1000));
                match rng.next(7) {
                    0 | 1 => assert_eq!(ours.insert(k, v), theirs.insert(k, v)),
                    2 => assert_eq!(ours.remove(&k), theirs.remove(&k)),
                    3 => {
                        assert_eq!(ours.get(&k), theirs.get(&k));
                        assert_eq!(ours.contains_key(&k), theirs.contains_key(&k));
                    }
                    4 => {
                        *ours.get_or_insert_with(&k, || v) += 1;
                        *theirs.entry(k).or_insert_with(|| v) += 1;
                    }
                    5 => {
                        if let (Some(a), Some(b)) = (ours.get_mut(&k), theirs.get_mut(&k)) {
                            *a += v;
                            *b += v;
                        }
                        for (a, b) in ours.values_mut().zip(theirs.values_mut()) {
                            *a ^= 1;
                            *b ^= 1;
                        }
                    }
                    _ => {
                        for (a, b) in ours.iter_mut().zip(theirs.iter_mut()) {
                            assert_eq!(a.0, b.0);
                            *a.1 += 2;
                            *b.1 += 2;
                        }
                    }
                }
                assert!(ours.iter().eq(theirs.iter()));
                assert!(ours.values().eq(theirs.values()));
            }
        }
    }

    #[test]
    fn the_set_behaves_like_a_btreeset() {
        let mut rng = Lcg(11);
        for _ in 0..200 {
            let (mut ours, mut theirs) = (SortedSet::default(), BTreeSet::new());
            for _ in 0..60 {
                let k = rng.next(12);
                match rng.next(6) {
                    0 | 1 => assert_eq!(ours.insert(k), theirs.insert(k)),
                    2 => assert_eq!(ours.remove(&k), theirs.remove(&k)),
                    3 => assert_eq!(ours.contains(&k), theirs.contains(&k)),
                    4 => {
                        let m = rng.next(3) + 2;
                        ours.retain(|x| x % m != 0);
                        theirs.retain(|x| x % m != 0);
                    }
                    _ => {
                        if rng.next(8) == 0 {
                            ours.clear();
                            theirs.clear();
                        }
                    }
                }
                assert_eq!((ours.len(), ours.is_empty()), (theirs.len(), theirs.is_empty()));
                assert!(ours.iter().eq(theirs.iter()));
                assert!((&ours).into_iter().eq(&theirs));
            }
        }
    }

    /// A copy allocates exactly what the entries need: one block, no spare nodes.
    #[test]
    fn a_copy_holds_exactly_its_entries() {
        let mut map = SortedMap::default();
        for k in 0..3u64 {
            map.insert(k, k);
        }
        let copy = map.clone();
        assert_eq!(copy.entries.capacity(), 3);
    }
}
