//! Times a CSV import of N people (default 5,000) the way an admin's
//! browser does it: `POST /api/import_people` on a server started
//! in-process on a fresh database (the demo org is seeded on loopback), signed in as its admin.
//! The floor, in the same run and on the same body: `preview_people_import`,
//! which reads and checks the same CSV but writes nothing. Figures go in
//! BENCHMARKS.md (target: 5,000 rows in ≤ 5 s on SQLite).
//!
//! cargo run -p clutchcall-bench --release --bin people-import -- --db sqlite --rows 5000

use clutchcall_bench::{ms, number, parse_flags, ScratchDb};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: people-import [--db sqlite|postgres] [--rows N] [--runs R]";

fn csv(rows: usize, run: usize) -> String {
    let mut text = String::from("email,display name,external id,region,certifications,role\n");
    for i in 0..rows {
        let role = if i % 50 == 0 { "client" } else { "operator" };
        let region = ["BLR", "Manchester", "Austin"][i % 3];
        text.push_str(&format!("op{run}-{i:05}@import.example,Imported Operator {i},IM-{run}-{i:05},{region},pick-place · tier-2;welding · tier-1,{role}\n"));
    }
    text
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = parse_flags(&[("db", "sqlite"), ("rows", "5000"), ("runs", "3")]).map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let rows = number(&flags, "rows").map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let runs = number(&flags, "runs").map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?.max(1);
    let db = ScratchDb::create(&flags["db"]).await?;
    let running = server::start(db.config.clone()).await?;
    let base = format!("http://{}", running.addr);
    let admin = reqwest::Client::builder().cookie_store(true).timeout(Duration::from_secs(120)).build()?;
    let signed = admin
        .post(format!("{base}/api/sign_in"))
        .header("origin", &base)
        .form(&[("email", server::seed::DEMO_ADMIN_EMAIL), ("password", server::seed::DEMO_PASSWORD)])
        .send()
        .await?;
    anyhow::ensure!(signed.status().is_success() || signed.status().is_redirection(), "sign-in: {}", signed.status());
    println!("{} rows a run, {} on {}", rows, runs, flags["db"]);
    for run in 0..runs {
        let body = csv(rows, run);
        let post = |endpoint: &'static str| {
            let (admin, base, body) = (admin.clone(), base.clone(), body.clone());
            async move {
                let started = Instant::now();
                let res = admin.post(format!("{base}/api/{endpoint}")).header("origin", &base).form(&[("csv", body)]).send().await?;
                let status = res.status();
                let text = res.text().await?;
                anyhow::ensure!(status.is_success(), "{endpoint}: {status} {}", &text[..text.len().min(300)]);
                Ok::<_, anyhow::Error>((started.elapsed(), text))
            }
        };
        let (preview, _) = post("preview_people_import").await?;
        let (import, answer) = post("import_people").await?;
        let imported: serde_json::Value = serde_json::from_str(&answer)?;
        anyhow::ensure!(imported["imported"] == rows, "imported {}", imported["imported"]);
        println!(
            "run {}: body {} KiB · floor (preview: read + check) {:.0} ms · import (read + check + write all + links) {:.0} ms",
            run + 1,
            body.len() / 1024,
            ms(preview),
            ms(import)
        );
    }
    running.stop().await?;
    db.finish().await
}
