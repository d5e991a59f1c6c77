//! llama.cpp's escape sequences in prompts and reverse prompts (`-e`).

/// llama.cpp's `string_process_escapes`: `\n \r \t \' \" \\` and `\xNN`; any other
/// backslash sequence is kept as it is. Works on bytes, as llama.cpp's does.
pub fn process_escapes(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            i += 1;
            match b[i] {
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                c @ (b'\'' | b'"' | b'\\') => out.push(c),
                b'x' if i + 2 < b.len()
                    && b[i + 1].is_ascii_hexdigit()
                    && b[i + 2].is_ascii_hexdigit() =>
                {
                    let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                    out.push(hex(b[i + 1]) << 4 | hex(b[i + 2]));
                    i += 2;
                }
                c => {
                    out.push(b'\\');
                    out.push(c);
                }
            }
        } else {
            out.push(b[i]);
        }
        i += 1;
    }
    out
}
