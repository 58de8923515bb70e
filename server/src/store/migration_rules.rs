//! Rules every migration and every read of the store keep, so that an
//! instance still running the build before goes on working while a newer
//! one has migrated the database (a rolling upgrade in cluster mode).
//!
//! sqlx prepares each statement once per connection and keeps it.
//! PostgreSQL refuses to run a prepared statement whose result's shape has
//! changed since ("cached plan must not change result type", 0A000), and
//! sqlx keeps the refused statement, so the read fails on that connection
//! until the pool closes it or the instance restarts. A migration may add
//! tables, columns and indexes; it must not change the type of a column
//! (migration 0029, states as domains, was reverted for this: BENCHMARKS,
//! Engine v3 ninth part), and no read may take "every column" (`*`), which
//! an added column would change.

use std::path::Path;

/// Every migration's SQL with its `--` comments left out, lower case, by file name.
fn migrations() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut all = Vec::new();
    for backend in ["postgres", "sqlite"] {
        for entry in std::fs::read_dir(root.join(backend)).expect("the migrations folder") {
            let path = entry.expect("a migration").path();
            let text = std::fs::read_to_string(&path).expect("a migration's text");
            let code: Vec<&str> = text.lines().map(|line| line.split("--").next().unwrap_or_default()).collect();
            all.push((format!("{backend}/{}", path.file_name().unwrap().to_string_lossy()), code.join("\n").to_lowercase()));
        }
    }
    all
}

/// Whether `sql` (lower case) changes a column's type: `ALTER [COLUMN] c
/// [SET DATA] TYPE t`.
fn changes_a_column_type(sql: &str) -> bool {
    let words: Vec<&str> = sql.split_whitespace().collect();
    words.windows(2).any(|w| w == ["data", "type"]) || words.windows(3).any(|w| matches!(w[0], "alter" | "column") && w[2] == "type")
}

#[test]
fn no_migration_changes_a_column_type() {
    let found: Vec<String> = migrations().into_iter().filter(|(_, sql)| changes_a_column_type(sql)).map(|(name, _)| name).collect();
    assert!(found.is_empty(), "these migrations change a column's type, which breaks the prepared reads of instances not yet upgraded: {found:?}");
    // The rule itself, on the shapes PostgreSQL takes.
    assert!(changes_a_column_type("alter table sessions alter column lifecycle type session_lifecycle;"));
    assert!(changes_a_column_type("alter table offers alter status set data type text;"));
    assert!(changes_a_column_type("alter table offers alter status type text;"));
    assert!(!changes_a_column_type("alter table sessions add column planned_end_at bigint;"));
    assert!(!changes_a_column_type("create type presence as enum ('ready');"));
}

/// The store's SQL, as written in its sources.
fn store_sources() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    std::fs::read_dir(&dir)
        .expect("the store's folder")
        .map(|entry| entry.expect("a source").path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs") && !path.ends_with("migration_rules.rs"))
        .map(|path| (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&path).expect("a source")))
        .collect()
}

#[test]
fn no_store_read_takes_every_column() {
    for (file, source) in store_sources() {
        for (number, line) in source.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default().to_lowercase();
            let every = code.contains("select *") || code.contains("returning *") || code.contains(".* ") || code.contains(".*,");
            assert!(!every, "{file}:{}: a read of every column changes shape with each added column: {line}", number + 1);
        }
    }
}
