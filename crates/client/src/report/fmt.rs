//! Number formatting shared by the console and CSV reports, and the helpers for text from a
//! server (escaped for the terminal, made a safe file name).

pub use crate::text::{escape_control, safe_file_stem, UniqueStems};

/// A float as Python's `str()` writes it from 0.0001 to 10^16 (Python switches to exponents
/// outside): the shortest text that reads back the same, with `.0` on a whole number
/// (`32.0`, `2.5`, `0.1`).
pub fn python_float(x: f64) -> String {
    let text = format!("{x}");
    if x.is_finite() && !text.contains(['.', 'e']) {
        format!("{text}.0")
    } else {
        text
    }
}

/// Formats `v` like a C++ `std::ostream` with default flags: `%g` with 6 significant digits
/// (trailing zeros dropped, scientific notation when the decimal exponent is < -4 or >= 6).
/// perf_analyzer prints every throughput and request rate this way, and scripts compare them.
pub fn fmt_g(v: f64) -> String {
    const SIGNIFICANT: i32 = 6;
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        // C++ prints -0.0 as "-0"; nothing reported is negative zero on purpose.
        return "0".into();
    }
    // Round to 6 significant digits first: the exponent after rounding decides the style
    // (999999.7 becomes 1e+06, not 999999.7 or 1000000).
    let sci = format!("{:.*e}", (SIGNIFICANT - 1) as usize, v);
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    if !(-4..SIGNIFICANT).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", strip_zeros(mantissa), sign, exp.abs())
    } else {
        let decimals = (SIGNIFICANT - 1 - exp) as usize;
        strip_zeros(&format!("{:.*}", decimals, v)).to_string()
    }
}

/// Drops trailing fractional zeros and a then-trailing '.', as `%g` does.
fn strip_zeros(s: &str) -> &str {
    if !s.contains('.') {
        return s;
    }
    s.trim_end_matches('0').trim_end_matches('.')
}

/// A fraction as a percentage with exactly two decimals (`std::fixed << setprecision(2)`).
pub fn fmt_pct2(v: f64) -> String {
    format!("{:.2}", v)
}

/// Integer microseconds from nanoseconds, truncated like perf_analyzer (`ns / 1000`).
#[inline]
pub fn us(ns: u64) -> u64 {
    ns / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmt_g_matches_cpp_default_stream() {
        let cases: &[(f64, &str)] = &[
            (20896.5, "20896.5"),
            (4999.48, "4999.48"),
            (28077.6, "28077.6"),
            (35002.1, "35002.1"),
            (1234567.0, "1.23457e+06"),
            (0.0, "0"),
            (0.5, "0.5"),
            (100.0, "100"),
            (0.00001, "1e-05"),
            (2000.0, "2000"),
            (2060.7712345, "2060.77"),
            (1413.8, "1413.8"),
            (999999.0, "999999"),
            (999999.7, "1e+06"),
            (123456.4, "123456"),
            (0.0001, "0.0001"),
            (0.000123456789, "0.000123457"),
            (-3.25, "-3.25"),
            (1e21, "1e+21"),
            (1.5e-10, "1.5e-10"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ];
        for (v, want) in cases {
            assert_eq!(fmt_g(*v), *want, "fmt_g({v})");
        }
    }

    #[test]
    fn pct_and_us() {
        assert_eq!(fmt_pct2(0.0), "0.00");
        assert_eq!(fmt_pct2(3.214), "3.21");
        assert_eq!(fmt_pct2(51.006), "51.01");
        assert_eq!(us(45_999), 45);
        assert_eq!(us(999), 0);
    }
}
