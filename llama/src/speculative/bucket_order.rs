//! The order in which GCC's `std::unordered_map` (libstdc++, as llama.cpp is built on
//! Linux) visits its entries, given their hash codes and the order they were inserted.
//!
//! llama.cpp's n-gram drafting walks such maps and keeps the first of equally counted
//! tokens, so which token it drafts on a tie is this order. Drafting the same tokens
//! verifies the same batches, and only the same batches give the same logits bits, so
//! we reproduce the order instead of picking ties our own way.
//!
//! The container (libstdc++'s `_Hashtable` with unique keys, a prime bucket count and a
//! maximum load factor of 1): one singly linked list of all nodes, each bucket pointing
//! at the node before its first one. A node whose bucket already holds nodes goes
//! first in that bucket; otherwise it goes to the front of the whole list. Before an
//! insert that would exceed one node per bucket, the table grows to the next bucket
//! count below and every node is placed again, walking the old list in order.

/// The bucket counts the table takes as it grows one insert at a time (measured on
/// libstdc++ 12: `bucket_count()` after each `emplace`). The first insert makes 13.
const BUCKET_COUNTS: [usize; 16] = [
    13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061, 712697,
];

/// llama.cpp's `common_token_hash_function`: Fibonacci hashing of the token id (its
/// n-gram hash XORs these; the maps of continuations use `std::hash<int>`, the id).
pub(crate) fn token_hash(token: i32) -> u64 {
    (token as i64 as u64).wrapping_mul(11_400_714_819_323_198_485)
}

/// What a bucket points at: the list head, or the node before the bucket's first.
#[derive(Clone, Copy)]
enum Before {
    Head,
    Node(usize),
}

struct Table {
    head: Option<usize>,
    next: Vec<Option<usize>>,
    buckets: Vec<Option<Before>>,
    hashes: Vec<u64>,
}

impl Table {
    fn next_of(&self, b: Before) -> Option<usize> {
        match b {
            Before::Head => self.head,
            Before::Node(n) => self.next[n],
        }
    }

    fn set_next(&mut self, b: Before, node: usize) {
        match b {
            Before::Head => self.head = Some(node),
            Before::Node(n) => self.next[n] = Some(node),
        }
    }

    fn bucket(&self, node: usize) -> usize {
        (self.hashes[node] % self.buckets.len() as u64) as usize
    }

    /// `_M_insert_bucket_begin`.
    fn insert(&mut self, node: usize) {
        let b = self.bucket(node);
        match self.buckets[b] {
            Some(before) => {
                self.next[node] = self.next_of(before);
                self.set_next(before, node);
            }
            None => {
                self.next[node] = self.head;
                self.head = Some(node);
                if let Some(old_first) = self.next[node] {
                    let ob = self.bucket(old_first);
                    self.buckets[ob] = Some(Before::Node(node));
                }
                self.buckets[b] = Some(Before::Head);
            }
        }
    }

    /// `_M_rehash_aux` for unique keys.
    fn rehash(&mut self, n_buckets: usize) {
        self.buckets = vec![None; n_buckets];
        let mut p = self.head.take();
        let mut first_bucket = 0usize;
        while let Some(node) = p {
            p = self.next[node];
            let b = self.bucket(node);
            match self.buckets[b] {
                None => {
                    self.next[node] = self.head;
                    self.head = Some(node);
                    self.buckets[b] = Some(Before::Head);
                    if self.next[node].is_some() {
                        self.buckets[first_bucket] = Some(Before::Node(node));
                    }
                    first_bucket = b;
                }
                Some(before) => {
                    self.next[node] = self.next_of(before);
                    self.set_next(before, node);
                }
            }
        }
    }
}

/// The indices `0..hashes.len()` (keys inserted in that order, all distinct, with these
/// hash codes) in the order libstdc++'s `unordered_map` iterates them.
pub(crate) fn iteration_order(hashes: &[u64]) -> Vec<usize> {
    let n = hashes.len();
    let mut t = Table {
        head: None,
        next: vec![None; n],
        buckets: vec![None; 1],
        hashes: hashes.to_vec(),
    };
    let mut growth = BUCKET_COUNTS.iter();
    let mut capacity = 0usize;
    for node in 0..n {
        if node + 1 > capacity {
            // Past the measured table the bucket count stays (the order is then an
            // approximation; no n-gram is followed by 700 000 distinct tokens).
            if let Some(&bc) = growth.next() {
                t.rehash(bc);
                capacity = bc;
            } else {
                capacity = usize::MAX;
            }
        }
        t.insert(node);
    }
    let mut order = Vec::with_capacity(n);
    let mut p = t.head;
    while let Some(node) = p {
        order.push(node);
        p = t.next[node];
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order_of(keys: &[i32]) -> Vec<i32> {
        let hashes: Vec<u64> = keys.iter().map(|&k| token_hash(k)).collect();
        iteration_order(&hashes)
            .into_iter()
            .map(|i| keys[i])
            .collect()
    }

    /// Orders printed by a program built with GCC 12 (`for (auto & p : m)` after each
    /// `emplace` of these keys into an `unordered_map` with llama.cpp's token hash).
    #[test]
    fn matches_libstdcxx() {
        let keys = [
            5, 900, 17, 3, 42, 7, 31000, 12, 13, 14, 15, 16, 99, 100, 101,
        ];
        let want: [&[i32]; 15] = [
            &[5],
            &[900, 5],
            &[17, 900, 5],
            &[3, 17, 900, 5],
            &[42, 3, 17, 900, 5],
            &[42, 7, 3, 17, 900, 5],
            &[31000, 42, 7, 3, 17, 900, 5],
            &[31000, 42, 7, 3, 17, 12, 900, 5],
            &[13, 31000, 42, 7, 3, 17, 12, 900, 5],
            &[13, 14, 31000, 42, 7, 3, 17, 12, 900, 5],
            &[15, 13, 14, 31000, 42, 7, 3, 17, 12, 900, 5],
            &[16, 15, 13, 14, 31000, 42, 7, 3, 17, 12, 900, 5],
            &[99, 16, 15, 13, 14, 31000, 42, 7, 3, 17, 12, 900, 5],
            &[100, 5, 900, 12, 17, 3, 7, 42, 31000, 13, 15, 16, 14, 99],
            &[
                100, 5, 900, 12, 17, 3, 7, 42, 31000, 13, 15, 101, 16, 14, 99,
            ],
        ];
        for (n, w) in want.iter().enumerate() {
            assert_eq!(order_of(&keys[..=n]), *w, "after {} inserts", n + 1);
        }
    }

    /// 3000 keys, through eight rehashes: a hash of the order GCC 12 iterates them in
    /// (`acc = acc * 1000003 + key`, wrapping, over the iteration).
    #[test]
    fn matches_libstdcxx_through_growth() {
        let keys: Vec<i32> = (0..3000i64)
            .map(|i| ((i * 7919 + 13) % 262_144) as i32)
            .collect();
        let acc = order_of(&keys).iter().fold(0u64, |acc, &k| {
            acc.wrapping_mul(1_000_003).wrapping_add(k as u64)
        });
        assert_eq!(acc, 6_347_371_584_927_016_422);
    }

    #[test]
    fn every_key_once() {
        let keys: Vec<i32> = (0..5000).map(|i| (i * 7919) % 32000).collect();
        let mut got = order_of(&keys);
        got.sort_unstable();
        let mut want = keys.clone();
        want.sort_unstable();
        assert_eq!(got, want);
    }
}
