//! Small helpers for the words of messages, shared by every crate that
//! talks to people.

/// `n` and `noun`, in the plural unless `n` is 1: `count(1, "GPU")` is
/// `1 GPU`, `count(3, "process")` is `3 processes`. English regular plurals
/// only: `-s`, `-x`, `-sh`, `-ch` take `-es`, a consonant and `-y` take
/// `-ies`, every other noun `-s`.
pub fn count<N: TryInto<u64> + Copy + std::fmt::Display>(n: N, noun: &str) -> String {
    if n.try_into().is_ok_and(|n: u64| n == 1) {
        return format!("1 {noun}");
    }
    if let Some(stem) = noun.strip_suffix('y').filter(|stem| !stem.ends_with(['a', 'e', 'i', 'o', 'u'])) {
        return format!("{n} {stem}ies");
    }
    let suffix = if ["s", "x", "sh", "ch"].iter().any(|end| noun.ends_with(end)) { "es" } else { "s" };
    format!("{n} {noun}{suffix}")
}

/// Up to three names, then how many more: `x, y, z and 2 more` (four are
/// all named, as naming the fourth is as short as counting it).
pub fn few_named<S: AsRef<str>>(names: &[S]) -> String {
    const SHOWN: usize = 3;
    let joined = |names: &[S]| names.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(", ");
    if names.len() <= SHOWN + 1 {
        return joined(names);
    }
    format!("{} and {} more", joined(&names[..SHOWN]), names.len() - SHOWN)
}

/// `n` with thousands separated by commas: `23,782`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `n` and `noun` as [`count`] says them, `n` grouped: `23,782 GPUs`.
pub fn counted(n: usize, noun: &str) -> String {
    count(n, noun).replacen(&n.to_string(), &grouped(n as u64), 1)
}

/// A share as a percentage to a tenth, without a trailing `.0`:
/// `percent(0.06)` is `6%`, `percent(0.025)` is `2.5%`.
pub fn percent(share: f64) -> String {
    format!("{}%", (1000.0 * share).round() / 10.0)
}

/// `x` with `decimals` decimals, or in scientific notation (`1.5e300`) from
/// a billion on, so that no absurd input prints hundreds of digits.
pub fn number(x: f64, decimals: usize) -> String {
    if x.is_finite() && x.abs() >= 1e9 {
        let scientific = format!("{x:.3e}");
        // 1.500e300 → 1.5e300
        match scientific.split_once('e') {
            Some((mantissa, exponent)) if mantissa.contains('.') => {
                format!("{}e{exponent}", mantissa.trim_end_matches('0').trim_end_matches('.'))
            }
            _ => scientific,
        }
    } else {
        format!("{x:.decimals$}")
    }
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

/// A round step for a chart's axis over `span`: 1, 2 or 5 × 10ⁿ, giving
/// at most about six ticks (a tiny step for a span of 0).
pub fn tick_step(span: f64) -> f64 {
    let rough = (span / 5.0).max(1e-9);
    let magnitude = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|&step| step >= rough).unwrap_or(10.0 * magnitude)
}

/// Implements serde's `Serialize` and `Deserialize` for a type through its
/// text form, the one people type: serialized with `Display`, read back
/// with `FromStr` (whose error becomes the message). For types such as
/// GPU offers and positions that travel in JSON as they are written on
/// the command line.
#[macro_export]
macro_rules! serde_as_text {
    ($type:ty) => {
        impl $crate::__serde::Serialize for $type {
            fn serialize<S: $crate::__serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> $crate::__serde::Deserialize<'de> for $type {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <String as $crate::__serde::Deserialize>::deserialize(deserializer)?;
                text.parse().map_err(<D::Error as $crate::__serde::de::Error>::custom)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_names_are_listed_and_the_rest_counted() {
        assert_eq!(few_named::<&str>(&[]), "");
        assert_eq!(few_named(&["a", "b", "c", "d"]), "a, b, c, d");
        assert_eq!(few_named(&["a", "b", "c", "d", "e"]), "a, b, c and 2 more");
    }

    #[test]
    fn axes_take_round_steps() {
        assert_eq!(tick_step(110.0), 50.0);
        assert_eq!(tick_step(9.0), 2.0);
        assert_eq!(tick_step(7.5), 2.0);
        assert_eq!(tick_step(1000.0), 200.0);
        assert_eq!(tick_step(660_000.0), 200_000.0);
        assert!((tick_step(0.03) - 0.01).abs() < 1e-15);
        assert!(tick_step(0.0) > 0.0);
    }

    #[test]
    fn numbers_beyond_a_billion_are_scientific() {
        assert_eq!(number(843.0, 0), "843");
        assert_eq!(number(863.14, 1), "863.1");
        assert_eq!(number(999_999_999.0, 0), "999999999");
        assert_eq!(number(1e300, 1), "1e300");
        assert_eq!(number(1.5e12, 0), "1.5e12");
        assert_eq!(number(u64::MAX as f64, 0), "1.845e19");
        assert_eq!(number(f64::INFINITY, 0), "inf");
    }

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
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(23_782), "23,782");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!((counted(1, "GPU"), counted(23_782, "GPU")), ("1 GPU".to_string(), "23,782 GPUs".to_string()));
        assert_eq!(count(2u32, "partial-batch latency"), "2 partial-batch latencies");
        assert_eq!(count(2u32, "day"), "2 days");
    }
}
