//! The totals of a table's numeric columns, shown under a CSV or TSV file
//! read whole, as a spreadsheet's status bar shows a column's sum. Asked
//! for a column's total, the default model added the numbers in its head
//! or passed the line numbers to the calculator.

/// How the line of totals begins.
pub const COLUMN_TOTALS: &str = "Column totals";

/// The delimiter of a table file named `path`, if it is one.
pub(crate) fn delimiter(path: &str) -> Option<u8> {
    let ext = std::path::Path::new(path)
        .extension()?
        .to_string_lossy()
        .to_ascii_lowercase();
    match ext.as_str() {
        "csv" => Some(b','),
        "tsv" | "tab" => Some(b'\t'),
        _ => None,
    }
}

/// `Column totals (6 rows): amount 938, tax 12.5` for the columns whose
/// every value below the header is a number, with at least two rows; none
/// for a file that does not parse as a table or has no such column.
pub(crate) fn column_totals(text: &str, delimiter: u8) -> Option<String> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .flexible(false)
        .from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().ok()?.iter().map(str::to_string).collect();
    let mut columns: Vec<Column> = header.iter().map(|_| Column::default()).collect();
    let mut rows = 0;
    for record in reader.records() {
        let record = record.ok()?;
        rows += 1;
        for (column, field) in columns.iter_mut().zip(record.iter()) {
            column.add(field);
        }
    }
    if rows < 2 {
        return None;
    }
    let totals: Vec<String> = header
        .iter()
        .zip(&columns)
        .filter_map(|(name, c)| Some(format!("{} {}", name.trim(), c.total()?)))
        .collect();
    (!totals.is_empty()).then(|| format!("{COLUMN_TOTALS} ({rows} rows): {}", totals.join(", ")))
}

/// One column's running sum, and whether every value so far was a number.
#[derive(Default)]
struct Column {
    sum: f64,
    decimals: usize,
    not_a_number: bool,
}

impl Column {
    fn add(&mut self, field: &str) {
        let field = field.trim();
        match field.parse::<f64>() {
            Ok(v) if v.is_finite() => {
                self.sum += v;
                let decimals = field.split_once('.').map_or(0, |(_, d)| d.len());
                self.decimals = self.decimals.max(decimals);
            }
            _ => self.not_a_number = true,
        }
    }

    /// The sum, written with as many decimals as the most precise value.
    fn total(&self) -> Option<String> {
        (!self.not_a_number).then(|| format!("{:.*}", self.decimals, self.sum))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_columns_are_added_and_the_others_left_out() {
        let text = "date,region,amount,tax\n2026-10-01,west,159,1.5\n2026-10-02,south,15,0.25\n2026-10-03,\"north, east\",146,2\n";
        assert_eq!(
            column_totals(text, b',').as_deref(),
            Some("Column totals (3 rows): amount 320, tax 3.75")
        );
        // 0.1 + 0.2 is written as the values are.
        let text = "x\n0.1\n0.2\n";
        assert_eq!(
            column_totals(text, b',').as_deref(),
            Some("Column totals (2 rows): x 0.3")
        );
        let tsv = "name\tqty\napples\t3\npears\t4\n";
        assert_eq!(
            column_totals(tsv, b'\t').as_deref(),
            Some("Column totals (2 rows): qty 7")
        );
    }

    #[test]
    fn what_is_not_a_table_of_numbers_has_no_totals() {
        assert_eq!(column_totals("a,b\n1,2\n", b','), None, "one row");
        assert_eq!(column_totals("a,b\nx,y\nz,w\n", b','), None, "no numbers");
        assert_eq!(column_totals("a,b\n1,2\n3\n", b','), None, "ragged rows");
        assert_eq!(
            column_totals("a\n1\n\n2\n", b','),
            Some("Column totals (2 rows): a 3".into()),
            "a blank line is no row"
        );
        assert_eq!(delimiter("data/Sales.CSV"), Some(b','));
        assert_eq!(delimiter("notes.txt"), None);
    }
}
