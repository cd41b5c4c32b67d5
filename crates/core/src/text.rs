//! Small helpers for the words of messages, shared by every crate that
//! talks to people.

/// `n` and `noun`, in the plural unless `n` is 1: `count(1, "GPU")` is
/// `1 GPU`, `count(3, "process")` is `3 processes`. English regular plurals
/// only: `-s`, `-x`, `-sh`, `-ch` take `-es`, every other noun `-s`.
pub fn count<N: TryInto<u64> + Copy + std::fmt::Display>(n: N, noun: &str) -> String {
    if n.try_into().is_ok_and(|n: u64| n == 1) {
        return format!("1 {noun}");
    }
    let suffix = if ["s", "x", "sh", "ch"].iter().any(|end| noun.ends_with(end)) { "es" } else { "s" };
    format!("{n} {noun}{suffix}")
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, for XML and HTML text
/// and attribute values (SVG charts, HTML reports).
pub fn escape_xml(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_special_character_of_xml() {
        assert_eq!(escape_xml(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(escape_xml("plain ×"), "plain ×");
    }

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1u32, "GPU"), "1 GPU");
        assert_eq!(count(0u32, "GPU"), "0 GPUs");
        assert_eq!(count(2usize, "violation"), "2 violations");
        assert_eq!(count(3u64, "process"), "3 processes");
        assert_eq!(count(1u8, "process"), "1 process");
        assert_eq!(count(12u32, "batch"), "12 batches");
    }
}
