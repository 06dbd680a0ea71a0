//! Keeping tool output within what the model's context can take.

/// `text` cut to at most `max` bytes, keeping the head and the tail (where
/// errors usually are) and saying how much was left out.
pub(crate) fn cap(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let head = floor_char(text, max * 2 / 3);
    let tail = ceil_char(text, text.len() - (max - head));
    format!(
        "{}\n[… {} bytes cut …]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// One line cut to `max` bytes.
pub(crate) fn cap_line(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_string();
    }
    let end = floor_char(line, max);
    format!("{}… [{} more bytes]", &line[..end], line.len() - end)
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_on_char_boundaries() {
        let s = "é".repeat(1000);
        let c = cap(&s, 100);
        assert!(c.len() < 160 && c.contains("bytes cut"));
        assert!(c.starts_with('é') && c.ends_with('é'));
        assert_eq!(cap("short", 100), "short");
        assert!(cap_line(&"x".repeat(50), 10).ends_with("[40 more bytes]"));
    }
}
