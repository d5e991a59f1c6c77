//! Hostile GGUF files: truncated at every byte, randomly corrupted, and hand-made to
//! break each rule. The reader must answer with an error (the right one where that is
//! meaningful), never panic, and never allocate more than the file could justify.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ggml::gguf::{Gguf, GgufError, GgufFile, Location, GGUF_MAX_ARRAY_DEPTH};

/// Records the largest single allocation the test binary makes.
struct LargestAlloc;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the wrapper
// only records sizes.
unsafe impl GlobalAlloc for LargestAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: LargestAlloc = LargestAlloc;

/// No test here reads a file over 2 MB; a bigger allocation means a count from a file
/// was trusted.
const ALLOC_LIMIT: usize = 16 << 20;

fn assert_no_huge_allocation() {
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest <= ALLOC_LIMIT,
        "an allocation of {largest} bytes was made"
    );
}

fn read_shared(rel: &str) -> Option<Vec<u8>> {
    common::shared_file(rel).map(|p| std::fs::read(p).unwrap())
}

// ---------------------------------------------------------------------------------
// Truncation and corruption of a real file.

#[test]
fn stories260k_truncated_at_every_byte_is_an_error() {
    let Some(bytes) = read_shared("models/stories260K.gguf") else {
        return;
    };
    let full = Gguf::parse(&bytes).unwrap();
    let data_offset = full.data_offset();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    std::thread::scope(|s| {
        for t in 0..threads {
            let bytes = &bytes;
            s.spawn(move || {
                for n in (t..bytes.len()).step_by(threads) {
                    match Gguf::parse(&bytes[..n]) {
                        Ok(_) => panic!("truncated at {n} of {} parsed", bytes.len()),
                        // Past the metadata, what is missing is always tensor data.
                        Err(GgufError::DataOutOfRange { .. }) => {}
                        Err(e) => assert!(n < data_offset, "at {n}: {e}"),
                    }
                }
            });
        }
    });
    assert_no_huge_allocation();
}

#[test]
fn vocab_file_truncated_is_an_error() {
    let Some(bytes) = read_shared("models/llama-vocab/ggml-vocab-llama-spm.gguf") else {
        return;
    };
    Gguf::parse(&bytes).unwrap();
    // A vocabulary-only file is all metadata, so every cut loses some of it; sample
    // the cuts (the whole file is 0.7 MB of strings).
    for n in (0..bytes.len())
        .step_by(997)
        .chain(bytes.len() - 64..bytes.len())
    {
        assert!(Gguf::parse(&bytes[..n]).is_err(), "truncated at {n} parsed");
    }
    assert_no_huge_allocation();
}

/// xorshift64*: a small seeded generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Values that hit the edges of the checks when written over a count, a length, a
/// type id, a dimension or an offset.
const INTERESTING: [u64; 12] = [
    0,
    1,
    2,
    5,
    9,
    13,
    32,
    0xFFFF_FFFF,
    1 << 32,
    1 << 60,
    1 << 63,
    u64::MAX,
];

/// Corrupts 1 to 3 places in `bytes[..region]`: a flipped byte, or a little-endian u32
/// or u64 overwritten with an interesting or random value.
fn mutate(rng: &mut Rng, bytes: &mut [u8], region: usize) {
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(region);
        let value = if rng.below(4) == 0 {
            rng.next()
        } else {
            INTERESTING[rng.below(INTERESTING.len())]
        };
        let width = [1, 4, 8][rng.below(3)];
        let end = (at + width).min(bytes.len());
        match width {
            1 => bytes[at] ^= (rng.below(255) + 1) as u8,
            _ => bytes[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]),
        }
    }
}

/// Parses `cases` corrupted copies of the file; whatever parses must be consistent.
fn fuzz_file(rel: &str, seed: u64, cases: usize) {
    let Some(bytes) = read_shared(rel) else {
        return;
    };
    let region = Gguf::parse(&bytes).unwrap().data_offset();
    let mut rng = Rng(seed);
    let (mut ok, mut err) = (0, 0);
    for case in 0..cases {
        let mut m = bytes.clone();
        mutate(&mut rng, &mut m, region);
        match Gguf::parse(&m) {
            Ok(g) => {
                ok += 1;
                for t in g.tensor_infos() {
                    let data = g.tensor_data(&m, &t.name).unwrap();
                    assert_eq!(data.len(), t.size, "case {case}: {}", t.name);
                    assert_eq!(
                        t.size,
                        t.typ.row_size(t.ne[0]) * t.ne[1] * t.ne[2] * t.ne[3]
                    );
                }
            }
            Err(e) => {
                err += 1;
                assert!(e.to_string().starts_with("gguf"), "case {case}: {e}");
            }
        }
    }
    eprintln!("{rel}: {cases} corrupted copies, {ok} parsed, {err} rejected");
    assert!(err > cases / 4, "the mutations should break most files");
    assert_no_huge_allocation();
}

#[test]
fn stories260k_random_corruption_never_panics() {
    fuzz_file("models/stories260K.gguf", 0x5eed_0001, 4000);
}

#[test]
fn quantized_model_random_corruption_never_panics() {
    fuzz_file("models/synth-llama-q4_k_m.gguf", 0x5eed_0002, 1500);
}

// ---------------------------------------------------------------------------------
// Hand-made files, one broken rule each.

/// Builds a GGUF file field by field, with no checks.
struct Raw(Vec<u8>);

impl Raw {
    /// Magic, version and the two counts.
    fn new(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw(b"GGUF".to_vec()).u32(version).u64(n_tensors).u64(n_kv)
    }

    fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }

    fn u8(self, v: u8) -> Raw {
        self.bytes(&[v])
    }

    fn u32(self, v: u32) -> Raw {
        self.bytes(&v.to_le_bytes())
    }

    fn u64(self, v: u64) -> Raw {
        self.bytes(&v.to_le_bytes())
    }

    fn str(self, s: &str) -> Raw {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }

    /// A key and its value type id (the value follows).
    fn key(self, key: &str, typ: u32) -> Raw {
        self.str(key).u32(typ)
    }

    fn kv_u32(self, key: &str, v: u32) -> Raw {
        self.key(key, 4).u32(v)
    }

    /// A tensor info: name, dimensions, ggml type id, data offset.
    fn tensor(self, name: &str, ne: &[u64], typ: u32, offset: u64) -> Raw {
        let mut r = self.str(name).u32(ne.len() as u32);
        for &n in ne {
            r = r.u64(n);
        }
        r.u32(typ).u64(offset)
    }

    /// Zeros up to a multiple of `align`, then `n` bytes of data.
    fn data(mut self, align: usize, n: usize) -> Raw {
        let len = self.0.len().next_multiple_of(align) + n;
        self.0.resize(len, 0xAB);
        self
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

fn parse_err(raw: &Raw) -> GgufError {
    match Gguf::parse(&raw.0) {
        Ok(_) => panic!("a hostile file parsed"),
        Err(e) => e,
    }
}

/// Asserts the file is rejected with the expected error variant and returns the
/// error's message.
macro_rules! assert_err {
    ($raw:expr, $pat:pat $(if $cond:expr)?) => {{
        let e = parse_err(&$raw);
        let (debug, message) = (format!("{e:?}"), e.to_string());
        assert!(matches!(e, $pat $(if $cond)?), "unexpected error: {debug}");
        message
    }};
}

/// A valid file: one key, two F32 tensors of 4 elements (16 bytes each, padded to 32).
fn two_tensors(offsets: [u64; 2]) -> Raw {
    Raw::new(3, 2, 1)
        .kv_u32("k", 1)
        .tensor("a", &[4], 0, offsets[0])
        .tensor("b", &[4], 0, offsets[1])
        .data(32, 64)
}

#[test]
fn hand_made_valid_files_parse() {
    let g = Gguf::parse(&two_tensors([0, 32]).0).unwrap();
    assert_eq!((g.n_tensors(), g.get_u32("k").unwrap()), (2, 1));
    let g = Gguf::parse(&Raw::new(2, 0, 0).0).unwrap();
    assert_eq!((g.version(), g.n_kv(), g.data_offset()), (2, 0, 24));
    // Tensors may come in any order and with gaps, as long as they do not overlap.
    Gguf::parse(&two_tensors([32, 0]).0).unwrap();
    let raw = Raw::new(3, 2, 1)
        .kv_u32("k", 1)
        .tensor("a", &[4], 0, 96)
        .tensor("b", &[4], 0, 0)
        .data(32, 128);
    Gguf::parse(&raw.0).unwrap();
}

#[test]
fn bad_header() {
    assert_err!(
        Raw(vec![]),
        GgufError::Truncated {
            at: Location::Header,
            offset: 0,
            ..
        }
    );
    assert_err!(Raw(b"GGU".to_vec()), GgufError::Truncated { .. });
    assert_err!(Raw(b"GGML\x03\0\0\0".to_vec()), GgufError::BadMagic { found } if &found == b"GGML");
    for version in [0, 1, 4, 0x0003_0000, u32::MAX] {
        let raw = Raw::new(version, 0, 0);
        assert_err!(raw, GgufError::UnsupportedVersion { version: v } if v == version);
    }
    let e = parse_err(&Raw::new(0x0003_0000, 0, 0));
    assert!(e.to_string().contains("big-endian"), "{e}");
    assert_err!(
        Raw::new(3, 0, 0).0[..20].to_vec().into_raw(),
        GgufError::Truncated {
            at: Location::Header,
            offset: 16,
            needed: 8,
            available: 4
        }
    );
}

trait IntoRaw {
    fn into_raw(self) -> Raw;
}

impl IntoRaw for Vec<u8> {
    fn into_raw(self) -> Raw {
        Raw(self)
    }
}

#[test]
fn huge_counts_and_lengths_are_rejected_before_allocating() {
    for (n_tensors, n_kv) in [(1 << 60, 0), (0, 1 << 60), (u64::MAX, u64::MAX), (0, 2)] {
        assert_err!(
            Raw::new(3, n_tensors, n_kv).kv_u32("a", 1),
            GgufError::CountTooLarge {
                at: Location::Header,
                ..
            }
        );
    }
    // A key length of 2^60.
    assert_err!(
        Raw::new(3, 0, 1).u64(1 << 60).bytes(&[b'a'; 16]),
        GgufError::CountTooLarge { at: Location::KvIndex(0), offset: 24, what: "string length", count, .. }
            if count == 1 << 60
    );
    // A string value of u64::MAX bytes.
    assert_err!(
        Raw::new(3, 0, 1).key("s", 8).u64(u64::MAX),
        GgufError::CountTooLarge { at: Location::Key(k), what: "string length", .. } if k == "s"
    );
    // Arrays whose element count, times the smallest element, overflows or exceeds
    // the file: of u64, of strings, of arrays.
    for (elem, count) in [
        (10u32, 1u64 << 61),
        (8, 1 << 40),
        (9, 1 << 50),
        (0, 1 << 62),
        (0, 100),
    ] {
        assert_err!(
            Raw::new(3, 0, 1)
                .key("arr", 9)
                .u32(elem)
                .u64(count)
                .bytes(&[0; 64]),
            GgufError::CountTooLarge {
                what: "array length",
                ..
            }
        );
    }
    // A nested array whose inner count is huge.
    assert_err!(
        Raw::new(3, 0, 1)
            .key("arr", 9)
            .u32(9)
            .u64(1)
            .u32(8)
            .u64(1 << 58),
        GgufError::CountTooLarge {
            at: Location::Key(_),
            offset: 55,
            ..
        }
    );
    // A tensor name of 2^62 bytes.
    assert_err!(
        Raw::new(3, 1, 0).u64(1 << 62).bytes(&[0; 64]),
        GgufError::CountTooLarge {
            at: Location::TensorIndex(0),
            ..
        }
    );
    assert_no_huge_allocation();
}

#[test]
fn bad_keys_and_values() {
    assert_err!(
        Raw::new(3, 0, 1).kv_u32("", 1),
        GgufError::EmptyKey {
            index: 0,
            offset: 24
        }
    );
    assert_err!(
        Raw::new(3, 0, 1).u64(2).bytes(&[0xC3, 0x28]).u32(4).u32(1),
        GgufError::InvalidUtf8 {
            at: Location::KvIndex(0),
            offset: 32
        }
    );
    assert_err!(
        Raw::new(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2),
        GgufError::DuplicateKey { key, offset: 41 } if key == "a"
    );
    assert_err!(
        Raw::new(3, 0, 1).key("t", 13).u32(0),
        GgufError::UnknownValueType { at: Location::Key(k), offset: 33, id: 13 } if k == "t"
    );
    assert_err!(
        Raw::new(3, 0, 1).key("t", 9).u32(1000).u64(0),
        GgufError::UnknownValueType {
            id: 1000,
            offset: 37,
            ..
        }
    );
    assert_err!(
        Raw::new(3, 0, 1).key("b", 7).u8(2),
        GgufError::InvalidBool {
            byte: 2,
            offset: 37,
            ..
        }
    );
    assert_err!(
        Raw::new(3, 0, 1)
            .key("b", 9)
            .u32(7)
            .u64(3)
            .bytes(&[1, 0, 7]),
        GgufError::InvalidBool {
            byte: 7,
            offset: 51,
            ..
        }
    );
    assert_err!(
        Raw::new(3, 0, 1).key("s", 9).u32(8).u64(2).str("ok").u64(1).u8(0xFF),
        GgufError::InvalidUtf8 { at: Location::Key(k), offset: 67 } if k == "s"
    );
    // A scalar cut short.
    assert_err!(
        Raw::new(3, 0, 1).key("x", 12).u32(0),
        GgufError::Truncated {
            at: Location::Key(_),
            offset: 37,
            needed: 8,
            available: 4
        }
    );
}

/// A key holding `depth` arrays nested in one another, the innermost of one u8.
fn nested(depth: usize) -> Raw {
    let mut raw = Raw::new(3, 0, 1).key("deep", 9);
    for _ in 1..depth {
        raw = raw.u32(9).u64(1);
    }
    raw.u32(0).u64(1).u8(7)
}

#[test]
fn nesting_depth_is_bounded() {
    let g = Gguf::parse(&nested(GGUF_MAX_ARRAY_DEPTH).0).unwrap();
    assert_eq!(g.get("deep").unwrap().depth(), GGUF_MAX_ARRAY_DEPTH);
    assert_err!(
        nested(GGUF_MAX_ARRAY_DEPTH + 1),
        GgufError::NestingTooDeep { at: Location::Key(k), .. } if k == "deep"
    );
    // Far deeper than any stack could recurse: still just an error.
    assert_err!(nested(1_000_000), GgufError::NestingTooDeep { .. });
}

#[test]
fn bad_alignment() {
    let with_alignment =
        |typ: u32, value: &[u8]| Raw::new(3, 0, 1).key("general.alignment", typ).bytes(value);
    assert_err!(
        with_alignment(10, &64u64.to_le_bytes()),
        GgufError::AlignmentType { offset: 49, ref found } if found == "UINT64"
    );
    assert_err!(
        with_alignment(8, &[1, 0, 0, 0, 0, 0, 0, 0, b'x']),
        GgufError::AlignmentType { .. }
    );
    for bad in [0u32, 3, 48, u32::MAX] {
        assert_err!(
            with_alignment(4, &bad.to_le_bytes()),
            GgufError::BadAlignment { offset: 53, alignment } if alignment == u64::from(bad)
        );
    }
    // A valid alignment moves the data section and the offsets it allows.
    let raw = Raw::new(3, 1, 1)
        .kv_u32("general.alignment", 64)
        .tensor("a", &[4], 0, 0)
        .data(64, 16);
    assert_eq!(Gguf::parse(&raw.0).unwrap().data_offset() % 64, 0);
    let raw = Raw::new(3, 2, 1)
        .kv_u32("general.alignment", 64)
        .tensor("a", &[4], 0, 0)
        .tensor("b", &[4], 0, 32)
        .data(64, 64);
    assert_err!(
        raw,
        GgufError::MisalignedTensor {
            data_offset: 32,
            alignment: 64,
            ..
        }
    );
}

/// A file with one tensor info `t` of the given dims and type at data offset 0, and
/// 64 bytes of data.
fn one_tensor(ne: &[u64], typ: u32) -> Raw {
    Raw::new(3, 1, 0).tensor("t", ne, typ, 0).data(32, 64)
}

#[test]
fn bad_shapes_and_types() {
    assert_err!(
        one_tensor(&[1, 1, 1, 1, 1], 0),
        GgufError::TooManyDims { ref name, offset: 33, n_dims: 5 } if name == "t"
    );
    assert_err!(
        Raw::new(3, 1, 0).str("t").u32(u32::MAX).bytes(&[0; 16]),
        GgufError::TooManyDims {
            n_dims: u32::MAX,
            ..
        }
    );
    assert_err!(
        one_tensor(&[4, 0], 0),
        GgufError::ZeroDim { ref name, dim: 1, offset: 45 } if name == "t"
    );
    assert_err!(one_tensor(&[0], 0), GgufError::ZeroDim { dim: 0, .. });
    assert_err!(
        one_tensor(&[1 << 32, 1 << 32], 0),
        GgufError::ShapeOverflow { offset: 33, .. }
    );
    // The element count passes 2^63, or the byte size passes 2^64.
    assert_err!(
        one_tensor(&[1 << 62, 2], 24),
        GgufError::ShapeOverflow { .. }
    );
    assert_err!(one_tensor(&[1 << 61], 28), GgufError::ShapeOverflow { .. });
    assert_err!(
        one_tensor(&[u64::MAX, 1, 1, 1], 24),
        GgufError::ShapeOverflow { .. }
    );
    for id in [4u32, 5, 31, 36, 1000, u32::MAX] {
        assert_err!(
            one_tensor(&[32], id),
            GgufError::UnknownTensorType { ref name, offset: 45, id: i } if name == "t" && i == id
        );
    }
    // Q4_0 rows are whole blocks of 32.
    assert_err!(
        one_tensor(&[33, 2], 2),
        GgufError::BlockSize { ref name, ne0: 33, blck_size: 32, .. } if name == "t"
    );
    assert_err!(
        Raw::new(3, 1, 0).u64(1).u8(0xFF).u32(1).bytes(&[0; 32]),
        GgufError::InvalidUtf8 {
            at: Location::TensorIndex(0),
            ..
        }
    );
}

#[test]
fn bad_tensor_data_ranges() {
    assert_err!(
        two_tensors([0, 16]),
        GgufError::MisalignedTensor { ref name, data_offset: 16, alignment: 32, .. } if name == "b"
    );
    // 64 bytes of data: a tensor at 64 ends at 80.
    assert_err!(
        two_tensors([0, 64]),
        GgufError::DataOutOfRange { ref name, file_size, .. } if name == "b" && file_size == two_tensors([0, 0]).len()
    );
    assert_err!(
        two_tensors([0, u64::MAX - 31]),
        GgufError::DataOutOfRange { end: u64::MAX, .. }
    );
    assert_err!(two_tensors([0, 1 << 62]), GgufError::DataOutOfRange { .. });
    // The data section itself starts past the end of the file.
    assert_err!(
        Raw::new(3, 1, 0).tensor("t", &[4], 0, 0),
        GgufError::DataOutOfRange {
            start: 64,
            end: 80,
            file_size: 57,
            ..
        }
    );
    assert_err!(two_tensors([32, 32]), GgufError::TensorsOverlap { .. });
    // a: 64 bytes at 0, b: 16 bytes at 32, inside a.
    let raw = Raw::new(3, 2, 0)
        .tensor("a", &[16], 0, 0)
        .tensor("b", &[4], 0, 32)
        .data(32, 64);
    let e = assert_err!(
        raw,
        GgufError::TensorsOverlap { ref name, ref other, .. } if name == "b" && other == "a"
    );
    assert!(e.contains("'b'") && e.contains("'a'"), "{e}");
    assert_err!(
        Raw::new(3, 2, 0).tensor("a", &[4], 0, 0).tensor("a", &[4], 0, 32).data(32, 64),
        GgufError::DuplicateTensor { ref name, offset: 57 } if name == "a"
    );
    // Fewer infos than the count promises.
    assert_err!(
        Raw::new(3, 3, 0)
            .tensor("a", &[4], 0, 0)
            .tensor("b", &[4], 0, 32)
            .data(32, 64),
        GgufError::Truncated {
            at: Location::TensorIndex(2),
            ..
        } | GgufError::CountTooLarge {
            at: Location::TensorIndex(2),
            ..
        }
    );
}

#[test]
fn hostile_file_on_disk_is_an_error_not_a_panic() {
    let path = std::env::temp_dir().join(format!("gguf-hostile-{}.gguf", std::process::id()));
    std::fs::write(&path, &two_tensors([0, 64]).0).unwrap();
    let r = GgufFile::open(&path);
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(r, Err(ggml::Error::Gguf(GgufError::DataOutOfRange { .. }))),
        "{r:?}"
    );
    assert!(GgufFile::from_bytes(b"GGUF").is_err());
    assert!(matches!(
        GgufFile::open(std::env::temp_dir().join("no-such-file.gguf")),
        Err(ggml::Error::Io { .. })
    ));
}
