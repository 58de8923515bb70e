// Migrations are embedded by `sqlx::migrate!`: a new file must rebuild.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
