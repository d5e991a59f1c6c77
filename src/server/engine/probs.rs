//! The probabilities reported with `n_probs` / `logprobs`: from the raw logits row
//! (with llama.cpp's float results) or from the sampler chain's candidates.

use llama::sampling::SamplerChain;
use llama::vocab::Vocab;
use llama::Token;

use crate::server::task::{TokenProb, TokenProbs};

fn prob(vocab: &Vocab, id: Token, p: f32) -> TokenProb {
    TokenProb {
        id,
        piece: vocab
            .token_to_piece(id, 0, false)
            .map(<[u8]>::to_vec)
            .unwrap_or_default(),
        p,
    }
}

/// The top `n` probabilities of the softmax of a raw logits row, and the chosen
/// token's, with llama.cpp's float results (`get_token_probabilities`): the row
/// partially sorted by libstdc++'s `std::partial_sort` (which decides both the order
/// of equal logits among the top `n` and the order the normaliser is summed in), each
/// probability `expf(l - max)` summed in that order in f32, then divided by the sum.
pub fn probs_from_logits(logits: &[f32], n: usize, chosen: Token, vocab: &Vocab) -> TokenProbs {
    let n = n.min(logits.len());
    let mut cur: Vec<(Token, f32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as Token, l))
        .collect();
    let max = if n > 0 {
        stl_partial_sort(&mut cur, n, |a, b| a.1 > b.1);
        cur[0].1
    } else {
        logits.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    };
    let mut sum = 0f32;
    for (_, l) in cur.iter_mut() {
        *l = (*l - max).exp();
        sum += *l;
    }
    let chosen_p = cur
        .iter()
        .find(|c| c.0 == chosen)
        .map_or(0.0, |c| c.1 / sum);
    TokenProbs {
        chosen: prob(vocab, chosen, chosen_p),
        top: cur[..n]
            .iter()
            .map(|&(id, e)| prob(vocab, id, e / sum))
            .collect(),
    }
}

/// libstdc++'s `std::partial_sort(v, v + middle, v + len, less)`, step for step
/// (`__heap_select`: a heap of the first `middle`, each later element smaller than its
/// top swapped in; then `__sort_heap`), so that equal keys and the elements past
/// `middle` end where GCC's build leaves them.
fn stl_partial_sort<T: Copy>(v: &mut [T], middle: usize, less: impl Fn(&T, &T) -> bool) {
    if middle == 0 {
        return;
    }
    let less = &less;
    let make_heap = |v: &mut [T]| {
        let len = v.len();
        if len < 2 {
            return;
        }
        let mut parent = (len - 2) / 2;
        loop {
            let value = v[parent];
            adjust_heap(v, parent, len, value, less);
            if parent == 0 {
                return;
            }
            parent -= 1;
        }
    };
    make_heap(&mut v[..middle]);
    for i in middle..v.len() {
        if less(&v[i], &v[0]) {
            // __pop_heap(first, middle, i)
            let value = v[i];
            v[i] = v[0];
            adjust_heap(&mut v[..middle], 0, middle, value, less);
        }
    }
    // __sort_heap(first, middle)
    let mut last = middle;
    while last > 1 {
        last -= 1;
        let value = v[last];
        v[last] = v[0];
        adjust_heap(&mut v[..last], 0, last, value, less);
    }
}

/// libstdc++'s `__adjust_heap` followed by its `__push_heap`.
fn adjust_heap<T: Copy>(
    v: &mut [T],
    mut hole: usize,
    len: usize,
    value: T,
    less: &impl Fn(&T, &T) -> bool,
) {
    let top = hole;
    let mut child = hole;
    while child < len.saturating_sub(1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len & 1 == 0 && len >= 2 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    let mut parent = hole.wrapping_sub(1) / 2;
    while hole > top && less(&v[parent], &value) {
        v[hole] = v[parent];
        hole = parent;
        parent = hole.wrapping_sub(1) / 2;
    }
    v[hole] = value;
}

/// The top `n` candidates after the sampler chain (`post_sampling_probs`), zero
/// probabilities left out as llama.cpp does.
pub fn probs_after_sampling(
    chain: &SamplerChain,
    n: usize,
    chosen: Token,
    vocab: &Vocab,
) -> TokenProbs {
    let data = &chain.candidates().data;
    let chosen_p = data.iter().find(|d| d.id == chosen).map_or(0.0, |d| d.p);
    let mut sorted: Vec<_> = data.to_vec();
    sorted.sort_by(|a, b| b.p.total_cmp(&a.p));
    TokenProbs {
        chosen: prob(vocab, chosen, chosen_p),
        top: sorted
            .iter()
            .take(n)
            .take_while(|d| d.p != 0.0)
            .map(|d| prob(vocab, d.id, d.p))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::stl_partial_sort;

    /// The top of `std::partial_sort` is sorted and holds the smallest elements.
    #[test]
    fn partial_sort_puts_the_smallest_first_in_order() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for len in [1usize, 2, 3, 7, 64, 301] {
            let v: Vec<u32> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 50) as u32
                })
                .collect();
            for middle in [0, 1, len / 2, len] {
                let mut got = v.clone();
                stl_partial_sort(&mut got, middle, |a, b| a < b);
                let mut want = v.clone();
                want.sort();
                assert_eq!(&got[..middle], &want[..middle], "len {len} middle {middle}");
                let mut rest = got.clone();
                rest.sort();
                assert_eq!(rest, want, "a permutation");
            }
        }
    }
}
