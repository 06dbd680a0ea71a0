//! Packing token columns into BLOBs: ids as i32 LE, roles as one byte each,
//! log-probs as f32 LE with NaN for "none".

use reverie_core::{TokenRole, TokenSpan};

pub fn encode(span: &TokenSpan) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let ids = span.ids.iter().flat_map(|i| i.to_le_bytes()).collect();
    let roles = span.roles.iter().map(|r| r.code()).collect();
    let logprobs = span
        .logprobs
        .iter()
        .flat_map(|l| l.unwrap_or(f32::NAN).to_le_bytes())
        .collect();
    (ids, roles, logprobs)
}

pub fn decode(n: usize, ids: &[u8], roles: &[u8], logprobs: &[u8]) -> Option<TokenSpan> {
    if ids.len() != n * 4 || roles.len() != n || logprobs.len() != n * 4 {
        return None;
    }
    let ids = ids
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let roles = roles
        .iter()
        .map(|&c| TokenRole::from_code(c))
        .collect::<Option<Vec<_>>>()?;
    let logprobs = logprobs
        .chunks_exact(4)
        .map(|c| {
            let v = f32::from_le_bytes(c.try_into().unwrap());
            (!v.is_nan()).then_some(v)
        })
        .collect();
    Some(TokenSpan {
        ids,
        roles,
        logprobs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut s = TokenSpan::default();
        s.push(-1, TokenRole::Warning, None);
        s.push(151_643, TokenRole::Action, Some(-0.125));
        let (a, b, c) = encode(&s);
        assert_eq!(decode(2, &a, &b, &c), Some(s));
        assert_eq!(decode(3, &a, &b, &c), None);
    }
}
