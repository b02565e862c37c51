//! Mahimahi delivery traces: one line per delivery opportunity of
//! `OPPORTUNITY_BYTES` bytes, the line being a millisecond timestamp.
//! The trace loops with the last timestamp as its period.
use anyhow::{bail, Context, Result};

/// Bytes that one delivery opportunity can carry (Mahimahi's PACKET_SIZE).
pub const OPPORTUNITY_BYTES: u32 = 1504;

/// Parses trace text into opportunity offsets in nanoseconds.
pub fn parse(text: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    let mut prev = 0u64;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        let ms: u64 = l.parse().with_context(|| format!("line {}: not a millisecond timestamp: {l:?}", i + 1))?;
        if ms < prev {
            bail!("line {}: timestamps must be non-decreasing ({ms} < {prev})", i + 1);
        }
        if ms > 1_000_000_000 {
            bail!("line {}: timestamp too large: {ms}", i + 1);
        }
        prev = ms;
        out.push(ms * 1_000_000);
    }
    match out.last() {
        None => bail!("trace is empty"),
        Some(0) => bail!("trace period (last timestamp) must be > 0 ms"),
        _ => Ok(out),
    }
}

pub fn load(path: &str) -> Result<Vec<u64>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read trace {path}"))?;
    parse(&text).with_context(|| format!("trace {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_validates() {
        assert_eq!(parse("1\n1\n\n 5 \n").unwrap(), vec![1_000_000, 1_000_000, 5_000_000]);
        assert!(format!("{:#}", parse("").unwrap_err()).contains("empty"));
        assert!(format!("{:#}", parse("0\n0\n").unwrap_err()).contains("period"));
        assert!(format!("{:#}", parse("3\n2\n").unwrap_err()).contains("line 2"));
        assert!(format!("{:#}", parse("1\nabc\n").unwrap_err()).contains("line 2"));
        assert!(format!("{:#}", load("/nonexistent/x").unwrap_err()).contains("cannot read trace"));
    }
}
