//! Round trips through the writer and the reader, accessors and writer checks.
//! (Hostile files and the real models are in the root package's `tests/gguf_*.rs`.)

use super::*;
use crate::{Context, GgmlType};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One key per value type, flat arrays of every element type, nested and empty arrays.
fn every_value() -> Vec<(&'static str, GgufValue)> {
    vec![
        ("u8", GgufValue::U8(200)),
        ("i8", GgufValue::I8(-100)),
        ("u16", GgufValue::U16(60000)),
        ("i16", GgufValue::I16(-30000)),
        ("u32", GgufValue::U32(4_000_000_000)),
        ("i32", GgufValue::I32(-2_000_000_000)),
        ("f32", GgufValue::F32(1e-5)),
        ("bool", GgufValue::Bool(true)),
        ("string", GgufValue::String("héllo\n'q'".into())),
        ("u64", GgufValue::U64(u64::MAX)),
        ("i64", GgufValue::I64(i64::MIN)),
        ("f64", GgufValue::F64(-0.1)),
        ("empty string", GgufValue::String(String::new())),
        ("arr.u8", vec![1u8, 2, 255].into()),
        ("arr.i8", vec![-1i8, 2].into()),
        ("arr.u16", vec![1u16, 65535].into()),
        ("arr.i16", vec![-1i16, 2].into()),
        ("arr.u32", vec![1u32, 2, 3].into()),
        ("arr.i32", vec![-1i32, 0, 1].into()),
        ("arr.f32", vec![0.5f32, -1000.0].into()),
        ("arr.bool", vec![true, false, true].into()),
        ("arr.str", vec!["a", "", "<0x0A>", "▁the"].into()),
        ("arr.u64", vec![u64::MAX].into()),
        ("arr.i64", vec![i64::MIN, 0].into()),
        ("arr.f64", vec![f64::MAX, 1.5].into()),
        ("arr.empty", GgufValue::Array(GgufArray::F32(vec![]))),
        (
            "arr.nested",
            vec![
                GgufArray::from(vec![1u32, 2]),
                GgufArray::from(vec!["x"]),
                GgufArray::from(vec![GgufArray::from(vec![true])]),
                GgufArray::I8(vec![]),
            ]
            .into(),
        ),
        (
            "arr.nested.empty",
            GgufValue::Array(GgufArray::Array(vec![])),
        ),
    ]
}

fn writer_with_every_value() -> GgufWriter<'static> {
    let mut w = GgufWriter::new();
    for (k, v) in every_value() {
        w.set(k, v).unwrap();
    }
    w
}

#[test]
fn every_value_type_round_trips_in_order() {
    for version in [2, 3] {
        let mut w = writer_with_every_value();
        w.set_version(version).unwrap();
        let bytes = w.to_bytes();
        let g = Gguf::parse(&bytes).unwrap();
        assert_eq!(g.version(), version);
        assert_eq!(g.n_tensors(), 0);
        // No tensors: no padding, the data section starts (and the file ends) right
        // after the metadata.
        assert_eq!(g.data_offset(), bytes.len());
        let got: Vec<(String, GgufValue)> =
            g.kv().map(|(k, v)| (k.to_owned(), v.clone())).collect();
        let want: Vec<(String, GgufValue)> = every_value()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(got, want);
        for (k, v) in &want {
            assert_eq!(g.get(k).map(GgufValue::typ), Some(v.typ()), "{k}");
        }
    }
}

#[test]
fn value_types_and_names() {
    for t in GgufType::ALL {
        assert_eq!(GgufType::from_id(t.id()), Some(t));
    }
    assert_eq!(GgufType::from_id(13), None);
    assert_eq!(GgufType::from_id(u32::MAX), None);
    assert_eq!(GgufType::Float32.to_string(), "FLOAT32");
    let values: Vec<GgufValue> = every_value().into_iter().map(|(_, v)| v).collect();
    assert_eq!(values[9].type_name(), "UINT64");
    assert_eq!(values[21].type_name(), "[STRING]");
    assert_eq!(values[26].type_name(), "[[UINT32]]");
    assert_eq!(values[27].type_name(), "[ARRAY]");
    assert_eq!(values[26].depth(), 3);
}

#[test]
fn lenient_integer_getters() {
    let mut w = GgufWriter::new();
    w.set("u8", 7u8).unwrap();
    w.set("i32.neg", -1i32).unwrap();
    w.set("u64.big", u64::MAX).unwrap();
    w.set("name", "llama").unwrap();
    w.set("f", 0.25f32).unwrap();
    w.set("b", false).unwrap();
    let bytes = w.to_bytes();
    let g = Gguf::parse(&bytes).unwrap();

    assert_eq!(g.get_u32("u8").unwrap(), 7);
    assert_eq!(g.get_i64("u8").unwrap(), 7);
    assert_eq!(g.get_i32("i32.neg").unwrap(), -1);
    assert_eq!(g.get_u64("u64.big").unwrap(), u64::MAX);
    assert_eq!(g.get_f32("f").unwrap(), 0.25);
    assert_eq!(g.get_f64("f").unwrap(), 0.25);
    assert!(!g.get_bool("b").unwrap());
    assert_eq!(g.get_str("name").unwrap(), "llama");
    assert_eq!(g.get_as::<String>("name").unwrap(), "llama");

    assert!(matches!(
        g.get_u32("i32.neg"),
        Err(GgufError::ValueOutOfRange { key, value: -1, target: "u32" }) if key == "i32.neg"
    ));
    assert!(matches!(
        g.get_i64("u64.big"),
        Err(GgufError::ValueOutOfRange { .. })
    ));
    assert!(matches!(
        g.get_u32("name"),
        Err(GgufError::TypeMismatch { key, found, .. }) if key == "name" && found == "STRING"
    ));
    assert!(matches!(
        g.get_f32("u8"),
        Err(GgufError::TypeMismatch { .. })
    ));
    assert!(matches!(
        g.get_bool("u8"),
        Err(GgufError::TypeMismatch { .. })
    ));
    assert!(matches!(
        g.get_u32("missing"),
        Err(GgufError::KeyNotFound { key }) if key == "missing"
    ));
    assert_eq!(g.get_opt::<u32>("missing").unwrap(), None);
    assert_eq!(g.get_opt::<u32>("u8").unwrap(), Some(7));
    assert!(g.get_opt::<u32>("name").is_err());
}

#[test]
fn array_getters() {
    let bytes = writer_with_every_value().to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(
        g.get_arr_str("arr.str").unwrap(),
        ["a", "", "<0x0A>", "▁the"]
    );
    assert_eq!(g.get_as::<&[String]>("arr.str").unwrap().len(), 4);
    assert_eq!(g.get_as::<Vec<String>>("arr.str").unwrap()[3], "▁the");
    assert_eq!(g.get_arr_f32("arr.f32").unwrap(), [0.5, -1000.0]);
    assert_eq!(g.get_arr_i32("arr.u8").unwrap(), [1, 2, 255]);
    assert_eq!(
        g.get_arr_i32("arr.i64").unwrap_err().to_string(),
        "gguf: key 'arr.i64': value -9223372036854775808 does not fit in i32"
    );
    assert_eq!(g.get_arr_u32("arr.u32").unwrap(), [1, 2, 3]);
    assert!(matches!(
        g.get_arr_u32("arr.i32"),
        Err(GgufError::ValueOutOfRange { value: -1, .. })
    ));
    assert!(matches!(
        g.get_arr_f32("arr.f64"),
        Err(GgufError::TypeMismatch { .. })
    ));
    assert!(matches!(
        g.get_arr_str("arr.u8"),
        Err(GgufError::TypeMismatch { .. })
    ));
    assert!(matches!(
        g.get_arr_str("string"),
        Err(GgufError::TypeMismatch { .. })
    ));
    assert_eq!(g.get_arr_n("arr.nested").unwrap(), 4);
    assert_eq!(g.get_arr_n("arr.empty").unwrap(), 0);
    assert!(matches!(
        g.get_arr_n("u8"),
        Err(GgufError::TypeMismatch { .. })
    ));
}

/// A writer with tensors of awkward sizes: 3 f32 (12 bytes), one Q4_0 block, a 4-d
/// f16 tensor and a scalar (0 dimensions).
fn writer_with_tensors(data: &[Vec<u8>; 4]) -> GgufWriter<'_> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "test").unwrap();
    w.add_tensor("a", GgmlType::F32, &[3], data[0].as_slice())
        .unwrap();
    w.add_tensor("q", GgmlType::Q4_0, &[32, 1], data[1].as_slice())
        .unwrap();
    w.add_tensor("h", GgmlType::F16, &[2, 1, 3, 2], data[2].as_slice())
        .unwrap();
    w.add_tensor("s", GgmlType::I32, &[], data[3].as_slice())
        .unwrap();
    w
}

fn tensor_data() -> [Vec<u8>; 4] {
    [
        f32_bytes(&[1.0, 2.0, 3.0]),
        (0..18).collect(),
        (100..124).collect(),
        7i32.to_le_bytes().to_vec(),
    ]
}

#[test]
fn tensors_round_trip_with_alignment() {
    let data = tensor_data();
    for alignment in [1u32, 8, 32, 64, 4096] {
        let mut w = writer_with_tensors(&data);
        if alignment != 32 {
            w.set_alignment(alignment).unwrap();
        }
        let bytes = w.to_bytes();
        let mut streamed = Vec::new();
        w.write_to(&mut streamed).unwrap();
        assert_eq!(bytes, streamed);

        let g = Gguf::parse(&bytes).unwrap();
        let a = alignment as usize;
        assert_eq!(g.alignment(), a);
        assert_eq!(g.data_offset() % a, 0);
        let names: Vec<&str> = g.tensor_infos().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "q", "h", "s"]);
        for (t, want) in g.tensor_infos().iter().zip(&data) {
            assert_eq!(t.offset % a, 0, "{}", t.name);
            assert_eq!(t.size, want.len());
            assert_eq!(g.tensor_data(&bytes, &t.name).unwrap(), want.as_slice());
        }
        let h = g.tensor_info("h").unwrap();
        assert_eq!(
            (h.typ, h.n_dims, h.ne, h.nelements()),
            (GgmlType::F16, 4, [2, 1, 3, 2], 12)
        );
        let s = g.tensor_info("s").unwrap();
        assert_eq!((s.n_dims, s.ne), (0, [1, 1, 1, 1]));
        assert!(matches!(
            g.tensor_info("nope"),
            Err(GgufError::TensorNotFound { name }) if name == "nope"
        ));
    }
}

#[test]
fn file_tensors_are_zero_copy_ggml_tensors() {
    let data = tensor_data();
    let file = GgufFile::from_bytes(&writer_with_tensors(&data).to_bytes()).unwrap();
    assert!(!file.buffer().is_writable());
    assert_eq!(file.tensor_bytes("q").unwrap(), data[1].as_slice());
    let r = file.tensor_data_ref("a").unwrap();
    assert_eq!(r.offset, file.tensor_range("a").unwrap().start);

    let mut ctx = Context::new_no_alloc();
    let ids = file.create_tensors(&mut ctx).unwrap();
    assert_eq!(ids.len(), 4);
    assert_eq!(ctx.get_f32(ids["a"]).unwrap(), [1.0, 2.0, 3.0]);
    assert_eq!(ctx.name(ids["h"]), "h");
    assert_eq!(ctx.tensor(ids["h"]).ne, [2, 1, 3, 2]);
    assert_eq!(ctx.get_bytes(ids["q"]).unwrap(), data[1]);
    assert_eq!(ctx.get_i32(ids["s"]).unwrap(), [7]);

    let mut ctx = Context::new_no_alloc();
    let ids = file.create_tensors_named(&mut ctx, ["q", "a"]).unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(ctx.len(), 2);
    assert!(matches!(
        file.create_tensors_named(&mut ctx, ["zz"]),
        Err(crate::Error::Gguf(GgufError::TensorNotFound { .. }))
    ));
}

#[test]
fn rewriting_a_file_is_byte_identical() {
    let data = tensor_data();
    let mut w = writer_with_tensors(&data);
    w.set_alignment(16).unwrap();
    w.set("x", vec![GgufArray::from(vec![1.5f64])]).unwrap();
    let bytes = w.to_bytes();
    let file = GgufFile::from_bytes(&bytes).unwrap();
    let again = GgufWriter::from_file(&file).unwrap().to_bytes();
    assert_eq!(again, bytes);
}

#[test]
fn set_replaces_in_place_and_alignment_follows_the_key() {
    let mut w = GgufWriter::new();
    w.set("a", 1u32)
        .unwrap()
        .set("b", 2u32)
        .unwrap()
        .set("a", "x")
        .unwrap();
    let keys: Vec<&str> = w.kv().map(|(k, _)| k).collect();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(w.kv().next().unwrap().1, &GgufValue::from("x"));
    w.set_alignment(64).unwrap();
    assert_eq!(w.alignment(), 64);
    assert_eq!(w.remove("general.alignment"), Some(GgufValue::U32(64)));
    assert_eq!(w.alignment(), 32);
    assert_eq!(w.remove("general.alignment"), None);
}

#[test]
fn writer_refuses_what_the_reader_would_reject() {
    let mut w = GgufWriter::new();
    let key_err = |r: Result<&mut GgufWriter, GgufError>| {
        assert!(matches!(r, Err(GgufError::InvalidKey { .. })), "{r:?}");
    };
    key_err(w.set("", 1u8));
    key_err(w.set_alignment(0));
    key_err(w.set_alignment(48));
    key_err(w.set("general.alignment", 32u64));
    let mut deep = GgufArray::from(vec![1u8]);
    for _ in 0..GGUF_MAX_ARRAY_DEPTH {
        deep = GgufArray::from(vec![deep]);
    }
    key_err(w.set("deep", deep));
    assert!(matches!(
        w.set_version(1),
        Err(GgufError::WriteVersion { version: 1 })
    ));
    assert!(matches!(
        w.set_version(4),
        Err(GgufError::WriteVersion { version: 4 })
    ));

    let bad_tensor = |w: &mut GgufWriter, typ, ne: &[usize], len: usize| {
        let r = w.add_tensor("t", typ, ne, vec![0u8; len]);
        assert!(
            matches!(r, Err(GgufError::InvalidTensor { .. })),
            "{ne:?}: {r:?}"
        );
    };
    bad_tensor(&mut w, GgmlType::F32, &[1, 1, 1, 1, 1], 4);
    bad_tensor(&mut w, GgmlType::F32, &[2, 0], 0);
    bad_tensor(&mut w, GgmlType::Q4_0, &[16], 9);
    bad_tensor(&mut w, GgmlType::F32, &[3], 11);
    bad_tensor(&mut w, GgmlType::F32, &[usize::MAX, 2], 0);
    w.add_tensor("t", GgmlType::F32, &[1], vec![0u8; 4])
        .unwrap();
    bad_tensor(&mut w, GgmlType::F32, &[1], 4);
    // Nothing refused was kept.
    assert_eq!(w.kv().len(), 0);
    assert_eq!(Gguf::parse(&w.to_bytes()).unwrap().n_tensors(), 1);
}

#[test]
fn errors_say_where() {
    let mut bytes = writer_with_every_value().to_bytes();
    // The first key is "u8" at offset 24: its type id is at 24 + 8 + 2.
    bytes[34..38].copy_from_slice(&77u32.to_le_bytes());
    let e = Gguf::parse(&bytes).unwrap_err();
    assert!(matches!(
        &e,
        GgufError::UnknownValueType { at: Location::Key(k), offset: 34, id: 77 } if k == "u8"
    ));
    assert_eq!(
        e.to_string(),
        "gguf: key 'u8': unknown value type id 77 at offset 34"
    );
    let e: crate::Error = e.into();
    assert!(e.to_string().contains("offset 34"));
}

#[test]
fn meta_bytes_are_the_file_up_to_the_data() {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama").unwrap();
    w.add_tensor("a", GgmlType::F32, &[3], vec![1u8; 12])
        .unwrap();
    w.add_tensor("b", GgmlType::F32, &[2, 2], vec![2u8; 16])
        .unwrap();
    let bytes = w.to_bytes();
    let meta = w.meta_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(meta.len(), g.data_offset());
    assert_eq!(&bytes[..meta.len()], &meta[..]);
}

/// `set_tensor_data` swaps a tensor's bytes in place, and refuses an unknown name or
/// a wrong size.
#[test]
fn set_tensor_data_replaces_bytes() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", GgmlType::F32, &[2], vec![0u8; 8])
        .unwrap();
    w.add_tensor("b", GgmlType::F32, &[1], vec![0u8; 4])
        .unwrap();
    w.set_tensor_data("a", 1.5f32.to_le_bytes().repeat(2))
        .unwrap();
    assert!(w.set_tensor_data("c", vec![0u8; 4]).is_err());
    assert!(w.set_tensor_data("b", vec![0u8; 8]).is_err());
    let bytes = w.to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    let a = g.tensor_data(&bytes, "a").unwrap();
    assert_eq!(a, &1.5f32.to_le_bytes().repeat(2)[..]);
}
