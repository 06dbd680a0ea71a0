//! Turns a stream of token byte pieces into text without splitting a
//! multi-byte character across two pieces.

#[derive(Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Adds bytes and returns the text that is now complete.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(
                        std::str::from_utf8(&self.pending[..valid]).expect("valid prefix"),
                    );
                    match e.error_len() {
                        // An invalid sequence (not just an incomplete one) is
                        // replaced so one bad token cannot stall the text.
                        Some(bad) => {
                            out.push('\u{fffd}');
                            self.pending.drain(..valid + bad);
                        }
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// Whatever is left, with incomplete bytes replaced.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_back_incomplete_characters() {
        let mut s = Utf8Stream::default();
        let e = "é".as_bytes();
        assert_eq!(s.push(b"caf"), "caf");
        assert_eq!(s.push(&e[..1]), "");
        assert_eq!(s.push(&e[1..]), "é");
        assert_eq!(s.push(&[0xff, b'a']), "\u{fffd}a");
        assert_eq!(s.push(&e[..1]), "");
        assert_eq!(s.finish(), "\u{fffd}");
    }
}
