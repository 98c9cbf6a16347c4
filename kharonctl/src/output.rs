//! How results are printed for `-o`: tables for people, JSON for scripts. Commands build data;
//! only this module turns it into text on stdout.
//!
//! Tables fit the terminal they are printed on: a cell that is too long folds onto more lines, it
//! is never cut, and columns that must stay whole (cluster ids, which people copy) say so with
//! [`keep_whole`]. Output that is no terminal (a pipe, a file) is read by `grep`, `awk` and `less
//! -S`, which a folded cell breaks (`kharonctl config | grep lieutenant` found half a URL): there,
//! every row is one line as wide as its cells, whatever `$COLUMNS` says.
//!
//! Every cell of a table is data (ids, names, URLs, errors), so [`table`] passes each through
//! [`kharon_common::text::cell`]: control characters escaped, at most
//! [`MAX_CELL`](kharon_common::text::MAX_CELL) characters. A 10 MB display name then costs a table
//! no more than a short one (laying out huge cells took minutes), and none can drive the terminal.
//! Text that commands print themselves goes through [`kharon_common::text::Escaped`] where data
//! enters it.

use std::io::IsTerminal as _;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ColumnConstraint, ContentArrangement, Table};
use serde::Serialize;

/// The output formats most commands accept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable text and tables.
    #[default]
    Table,
    /// One JSON document.
    Json,
}

/// The output formats of listings (`connections`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Listing {
    /// A table for people.
    #[default]
    Table,
    /// The table with every column and exact byte counts.
    Wide,
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
}

/// A table with our house style for stdout; `headers` first, then rows. Folded to fit a terminal,
/// never folded elsewhere (see the module doc).
pub fn table<I, R>(headers: &[&str], rows: I) -> Table
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    table_for(std::io::stdout().is_terminal(), headers, rows)
}

/// [`table`] for output that is a `terminal`, or is not one.
fn table_for<I, R>(terminal: bool, headers: &[&str], rows: I) -> Table
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    if !terminal {
        // No width to fit: comfy-table then lays every row out on one line.
        table.force_no_tty();
    }
    table.set_header(headers.iter().copied());
    for row in rows {
        table.add_row(row.into_iter().map(|cell| kharon_common::text::cell(&cell)));
    }
    table
}

/// Columns `indexes` are never folded (ids people copy, short words); the others fold around them.
pub fn keep_whole(table: &mut Table, indexes: &[usize]) {
    for &index in indexes {
        if let Some(column) = table.column_mut(index) {
            column.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
}

/// "1 cluster", "2 clusters", "0 suffixes": a count with its noun in the right number.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        return format!("1 {noun}");
    }
    let ending =
        if noun.ends_with(['s', 'x']) || noun.ends_with("ch") || noun.ends_with("sh") { "es" } else { "s" };
    format!("{n} {noun}{ending}")
}

/// Prints `value` as pretty JSON on stdout.
pub fn json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Prints `value` as YAML on stdout.
pub fn yaml<T: Serialize>(value: &T) -> anyhow::Result<()> {
    print!("{}", serde_norway::to_string(value)?);
    Ok(())
}

/// Byte counts as people read them: "512 B", "1.5 KiB", "3.2 MiB".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// "3h 4m" style ages for people.
pub fn age(seconds: u64) -> String {
    let (d, h, m, s) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60, seconds % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// Microseconds as people read a network latency: "0.4 ms", "52.3 ms".
pub fn millis(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ages_read_naturally() {
        assert_eq!(super::age(5), "5s");
        assert_eq!(super::age(65), "1m 5s");
        assert_eq!(super::age(3 * 3600 + 240), "3h 4m");
        assert_eq!(super::age(2 * 86_400 + 3600), "2d 1h");
    }

    #[test]
    fn byte_counts_read_in_binary_units() {
        assert_eq!(super::bytes(0), "0 B");
        assert_eq!(super::bytes(1023), "1023 B");
        assert_eq!(super::bytes(1536), "1.5 KiB");
        assert_eq!(super::bytes(3 * 1024 * 1024 + 200 * 1024), "3.2 MiB");
        assert_eq!(super::bytes(u64::MAX), "16777216.0 TiB");
    }

    /// A hostile display name neither drives the terminal nor takes minutes to lay out.
    #[test]
    fn cells_are_escaped_and_capped() {
        let huge = "x".repeat(10 * 1024 * 1024);
        let started = std::time::Instant::now();
        let text = super::table(
            &["id", "name"],
            [
                vec!["c-\u{1b}]0;pwned\u{7}".to_owned(), "a\rb\u{9b}2J".to_owned()],
                vec!["c-2".to_owned(), huge],
            ],
        )
        .to_string();
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(!text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{9b}'), "{text:?}");
        assert!(text.contains(r"c-\x1b]0;pwned\x07") && text.contains(r"a\rb\u{9b}2J"), "{text}");
        assert!(text.len() < 4096, "{} bytes", text.len());
        assert!(text.contains('…'));
    }

    #[test]
    fn counts_agree_with_their_noun() {
        assert_eq!(super::count(1u32, "cluster"), "1 cluster");
        assert_eq!(super::count(0u32, "cluster"), "0 clusters");
        assert_eq!(super::count(2u64, "jump host"), "2 jump hosts");
        assert_eq!(super::count(1u32, "jump host"), "1 jump host");
        assert_eq!(super::count(3u32, "suffix"), "3 suffixes");
        assert_eq!(super::count(1u32, "suffix"), "1 suffix");
    }

    #[test]
    fn tables_fold_to_a_terminal_and_never_elsewhere() {
        let rows = || [vec!["c-a-very-long-cluster-id-01".to_owned(), "word ".repeat(40)]];
        let mut t = super::table_for(true, &["ID", "TEXT"], rows());
        t.set_width(40);
        super::keep_whole(&mut t, &[0]);
        let text = t.to_string();
        assert!(text.lines().all(|l| l.chars().count() <= 40), "{text}");
        assert!(text.contains("c-a-very-long-cluster-id-01"), "the id stays whole:\n{text}");

        let text = super::table_for(false, &["ID", "TEXT"], rows()).to_string();
        assert_eq!(text.lines().count(), 5, "header, row and three rules:\n{text}");
        let row = text.lines().find(|l| l.contains("c-a-very")).unwrap_or_default();
        assert!(row.contains(&"word ".repeat(40).trim_end().to_owned()), "{text}");
    }

    #[test]
    fn latencies_read_in_milliseconds() {
        assert_eq!(super::millis(412), "0.4 ms");
        assert_eq!(super::millis(52_340), "52.3 ms");
        assert_eq!(super::millis(1_500_000), "1500.0 ms");
    }
}
