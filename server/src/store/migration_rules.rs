//! Rules every PostgreSQL migration and every read of the store keep, so
//! that an instance still running the build before goes on working while a
//! newer one has migrated the database (a rolling upgrade in cluster mode).
//!
//! sqlx prepares each statement once per connection and keeps it.
//! PostgreSQL refuses to run a prepared statement whose result's shape has
//! changed since ("cached plan must not change result type", 0A000), and
//! sqlx keeps the refused statement, so the read fails on that connection
//! until the pool closes it or the instance restarts; a statement naming a
//! column or table that is gone fails outright. So a migration may add
//! tables, indexes and columns (with a default when NOT NULL, or the old
//! build's inserts fail); it must not change a column's type (migration
//! 0029 as domains was reverted for this: BENCHMARKS, Engine v3 ninth
//! part), nor drop or rename a column or a table. And no read may take
//! "every column" (`*`), whose shape an added column would change.
//! (SQLite runs one instance, and prepares a statement again itself when
//! the schema changed.)

use std::path::Path;

/// `text` without its `--` comments (SQL) and `//` comments (Rust), lower
/// case, every run of whitespace (and a Rust string's `\` line break) one
/// space: what the rules read.
fn words(text: &str, comment: &str) -> String {
    let code: Vec<&str> = text.lines().map(|line| line.split(comment).next().unwrap_or_default().trim_end_matches('\\')).collect();
    code.join(" ").to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every PostgreSQL migration, as `words`, by file name.
fn postgres_migrations() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/postgres");
    std::fs::read_dir(dir)
        .expect("the migrations folder")
        .map(|entry| entry.expect("a migration").path())
        .map(|path| (path.file_name().unwrap().to_string_lossy().into_owned(), words(&std::fs::read_to_string(&path).expect("a migration"), "--")))
        .collect()
}

/// What in `sql` (as `words`) breaks a statement of the build before, if anything.
fn breaks_the_build_before(sql: &str) -> Option<&'static str> {
    for statement in sql.split(';').map(str::trim) {
        let w: Vec<&str> = statement.split(' ').collect();
        if w.first() == Some(&"drop") && w.get(1) == Some(&"table") {
            return Some("drops a table");
        }
        if !statement.starts_with("alter table ") {
            continue;
        }
        // `alter [column] c type t`, `alter [column] c set data type t` (not a column named `type`).
        let retyped = w.windows(3).any(|x| x[0] == "alter" && x[1] != "column" && x[2] == "type")
            || w.windows(4).any(|x| x[0] == "alter" && x[1] == "column" && x[3] == "type")
            || statement.contains(" set data type ");
        if retyped {
            return Some("changes a column's type");
        }
        if statement.contains(" drop column ") || (statement.contains(" rename ") && !statement.contains(" rename constraint ")) {
            return Some("drops or renames a column or a table");
        }
        // Each added column, up to the next comma.
        for added in statement.split(" add column ").skip(1) {
            let column = added.split(',').next().unwrap_or_default();
            if column.contains("not null") && !column.contains("default") {
                return Some("adds a NOT NULL column without a default");
            }
        }
    }
    None
}

#[test]
fn no_postgres_migration_breaks_the_build_before() {
    let found: Vec<String> =
        postgres_migrations().into_iter().filter_map(|(name, sql)| breaks_the_build_before(&sql).map(|why| format!("{name}: {why}"))).collect();
    assert!(found.is_empty(), "these migrations break the statements of instances not yet upgraded: {found:?}");
    // The rule itself, on the shapes PostgreSQL takes.
    for breaking in [
        "alter table sessions alter column lifecycle type session_lifecycle;",
        "alter table offers alter column status set data type text;",
        "alter table sessions drop column rtt_ms;",
        "alter table sessions rename column rtt_ms to rtt;",
        "alter table offers rename to ring_offers;",
        "alter table offers alter status type text;",
        "drop table offers;",
        "alter table sessions add column region text not null;",
    ] {
        assert!(breaks_the_build_before(&words(breaking, "--")).is_some(), "{breaking}");
    }
    for keeping in [
        "alter table sessions add column planned_end_at bigint;",
        "alter table sessions add column region text not null default '';",
        "alter table sessions alter column type set not null; -- a column named type",
        "create index sessions_by_day on sessions (org_id, raised_at);",
        "drop index concurrently if exists sessions_by_robot;",
    ] {
        assert_eq!(breaks_the_build_before(&words(keeping, "--")), None, "{keeping}");
    }
}

/// Whether `code` (as `words`) reads every column: `select *`, `select
/// distinct *`, `returning *` or `t.*`.
fn takes_every_column(code: &str) -> bool {
    let star = code.contains("select *") || code.contains("select distinct *") || code.contains("returning *");
    star || code.match_indices(".*").any(|(at, _)| code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_'))
}

#[test]
fn no_store_read_takes_every_column() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    for entry in std::fs::read_dir(dir).expect("the store's folder") {
        let path = entry.expect("a source").path();
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("migration_rules.rs") {
            continue;
        }
        let code = words(&std::fs::read_to_string(&path).expect("a source"), "//");
        assert!(!takes_every_column(&code), "{}: a read of every column changes shape with each added column", path.display());
    }
    for every in ["\"select \\\n *  from sessions\"", "select distinct * from offers", "select s.* from sessions s", "insert … returning *"] {
        assert!(takes_every_column(&words(every, "//")), "{every}");
    }
    assert!(!takes_every_column(&words("select count(*) from sessions; use super::*;", "//")));
}
