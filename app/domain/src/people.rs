//! Directory administration of people (issue: directory administration):
//! a member's fields and what is wrong with them, the last-admin guard,
//! and the CSV format of import and export. Used by the server (which
//! decides) and the browser (which shows the problem as the admin types).

use crate::models::Role;
use serde::{Deserialize, Serialize};

/// A set-password / join link is valid this long.
pub const INVITATION_TTL_MS: i64 = 24 * 3_600_000;
/// Longest display name.
pub const MAX_NAME_CHARS: usize = 80;
/// Longest email (RFC 5321's path limit).
pub const MAX_EMAIL_CHARS: usize = 254;
/// Longest external agent id.
pub const MAX_EXTERNAL_ID_CHARS: usize = 64;
/// The CSV columns of import and export, in order.
pub const CSV_HEADER: [&str; 6] = ["email", "display name", "external id", "region", "certifications", "role"];

/// A person as an admin invites, imports or edits them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonFields {
    pub email: String,
    pub display_name: String,
    pub external_id: Option<String>,
    /// The operator region; required for operators, ignored for clients.
    pub region: Option<String>,
    /// Full certification strings, e.g. `pick-place · tier-2` (rule A08).
    pub certifications: Vec<String>,
    pub role: Role,
}

impl PersonFields {
    /// Blanks trimmed, the email lower-cased, empty optionals dropped,
    /// certifications de-duplicated in order.
    pub fn normalised(self) -> PersonFields {
        let optional = |s: Option<String>| s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
        let certifications = normalised_certifications(&self.certifications);
        PersonFields {
            email: self.email.trim().to_lowercase(),
            display_name: self.display_name.trim().to_string(),
            external_id: optional(self.external_id),
            region: optional(self.region),
            certifications,
            role: self.role,
        }
    }

    /// Whether this person gets an operator profile (admins may operate too).
    pub fn operates(&self) -> bool {
        self.role != Role::Client
    }
}

/// Certifications trimmed, blanks dropped, each once, in order.
pub fn normalised_certifications(certifications: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for cert in certifications.iter().map(|c| c.trim()).filter(|c| !c.is_empty()) {
        if !out.iter().any(|c| c == cert) {
            out.push(cert.to_string());
        }
    }
    out
}

/// What is wrong with a person's fields, as one sentence naming the field;
/// `regions` are the org's operator regions.
pub fn person_problem(p: &PersonFields, regions: &[String]) -> Option<String> {
    if let Some(problem) = email_problem(&p.email) {
        return Some(problem);
    }
    profile_problem(&p.display_name, p.external_id.as_deref(), p.region.as_deref(), &p.certifications, p.operates(), regions)
}

/// What is wrong with an email address (a plausibility check: the link is
/// the real test).
pub fn email_problem(email: &str) -> Option<String> {
    let email = email.trim();
    let plausible = email.len() <= MAX_EMAIL_CHARS
        && !email.chars().any(|c| c.is_whitespace() || c == ',' || c == ';')
        && email.split_once('@').is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.') && !domain.starts_with('.') && !domain.ends_with('.') && !domain.contains('@'));
    (!plausible).then(|| "email must be an address like name@example.com".to_string())
}

/// What is wrong with a profile's fields (the email aside).
pub fn profile_problem(
    display_name: &str,
    external_id: Option<&str>,
    region: Option<&str>,
    certifications: &[String],
    operates: bool,
    regions: &[String],
) -> Option<String> {
    let name = display_name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Some(format!("display name must be 1–{MAX_NAME_CHARS} characters"));
    }
    if external_id.is_some_and(|id| id.chars().count() > MAX_EXTERNAL_ID_CHARS || id.chars().any(char::is_whitespace)) {
        return Some(format!("external id must be at most {MAX_EXTERNAL_ID_CHARS} characters without spaces"));
    }
    if !operates {
        return None;
    }
    match region {
        None => return Some(format!("region is required for an operator: one of {}", regions.join(", "))),
        Some(r) if !regions.iter().any(|known| known == r) => {
            return Some(format!("region {r:?} is not one of the organisation's regions ({})", regions.join(", ")))
        }
        Some(_) => {}
    }
    certifications.iter().find(|c| crate::rules::skill_of(c).is_err()).map(|c| format!("certification {c:?} names no skill"))
}

/// Whether taking `user`'s admin role away (a role change or a removal)
/// leaves the org without an admin: refused.
pub fn leaves_no_admin(admins: &[String], user_id: &str, new_role: Option<Role>) -> bool {
    let is_admin = admins.iter().any(|a| a == user_id);
    is_admin && admins.len() == 1 && new_role != Some(Role::Admin)
}

/// One line of an import that cannot be imported, numbered as the file is
/// (the header is line 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineProblem {
    pub line: usize,
    pub problem: String,
}

/// What an import would do: the people it would invite, or the lines that
/// stop it (the import is all-or-nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportPreview {
    pub people: Vec<PersonFields>,
    pub problems: Vec<LineProblem>,
}

/// The certifications cell: `;`-separated.
pub fn split_certifications(cell: &str) -> Vec<String> {
    cell.split(';').map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect()
}

/// Checks one CSV record (already split into cells) as line `line`.
pub fn person_from_cells(cells: &[String], line: usize, regions: &[String]) -> Result<PersonFields, LineProblem> {
    let fail = |problem: String| LineProblem { line, problem };
    if cells.len() != CSV_HEADER.len() {
        return Err(fail(format!("expected {} columns ({}), found {}", CSV_HEADER.len(), CSV_HEADER.join(", "), cells.len())));
    }
    let role_cell = cells[5].trim().to_lowercase();
    let role = if role_cell.is_empty() { Role::Operator } else { Role::parse(&role_cell).ok_or_else(|| fail(format!("role {role_cell:?} must be admin, operator or client")))? };
    let person = PersonFields {
        email: cells[0].clone(),
        display_name: cells[1].clone(),
        external_id: Some(cells[2].clone()),
        region: Some(cells[3].clone()),
        certifications: split_certifications(&cells[4]),
        role,
    }
    .normalised();
    match person_problem(&person, regions) {
        Some(problem) => Err(fail(problem)),
        None => Ok(person),
    }
}

/// Checks every record; a repeated email is a problem of its later line,
/// and so is an email that is already a member of the org (`members`).
pub fn preview_import(records: Vec<(usize, Vec<String>)>, regions: &[String], members: &std::collections::HashSet<String>) -> ImportPreview {
    let mut preview = ImportPreview::default();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (line, cells) in records {
        match person_from_cells(&cells, line, regions) {
            Ok(person) if members.contains(&person.email) => {
                preview.problems.push(LineProblem { line, problem: format!("{} is already a member of this organisation", person.email) })
            }
            Ok(person) => match seen.get(&person.email) {
                Some(first) => preview.problems.push(LineProblem { line, problem: format!("{} is already on line {first}", person.email) }),
                None => {
                    seen.insert(person.email.clone(), line);
                    preview.people.push(person);
                }
            },
            Err(problem) => preview.problems.push(problem),
        }
    }
    if preview.people.is_empty() && preview.problems.is_empty() {
        preview.problems.push(LineProblem { line: 1, problem: "the file has a header but no people".into() });
    }
    preview
}

/// A person as an export row, in `CSV_HEADER` order, each cell safe to
/// open in a spreadsheet.
pub fn export_cells(p: &PersonFields) -> [String; 6] {
    [
        p.email.clone(),
        p.display_name.clone(),
        p.external_id.clone().unwrap_or_default(),
        p.region.clone().unwrap_or_default(),
        p.certifications.join(";"),
        p.role.as_str().to_string(),
    ]
    .map(|cell| spreadsheet_safe(&cell))
}

/// Whether an invitation's link may set the password of an existing
/// account (finding 1): only while it has none, and only if this
/// invitation made it or it belongs to no org at all (a pending person
/// who was removed). Another org's pending person is never touched: their
/// owner takes up that org's link, or signs in to join.
pub fn may_set_password(password_hash: &str, made_by_this_invitation: bool, memberships: i64) -> bool {
    password_hash.is_empty() && (made_by_this_invitation || memberships == 0)
}

/// Who takes up an invitation link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taker<'a> {
    /// Someone signed out, choosing a password.
    NewPassword,
    /// A signed-in person: their user id.
    SignedIn(&'a str),
}

/// The account the invitation's email already has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExistingAccount<'a> {
    pub id: &'a str,
    /// Its password hash: empty while nobody has chosen one.
    pub password_hash: &'a str,
    /// Whether this invitation created it.
    pub made_by_this_invitation: bool,
    /// In how many orgs it is a member.
    pub memberships: i64,
}

/// What taking up an invitation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acceptance<'a> {
    /// Sets the password of this account (nobody holds one), then joins.
    SetPasswordOf(&'a str),
    /// Joins as this account.
    JoinAs(&'a str),
    /// No account has the email: one is made with the password, then joins.
    CreateAccount,
    /// The account has a password (or belongs to another org's pending
    /// person): its owner signs in first.
    SignInFirst,
    /// Signed in as someone else than the invitation's account.
    OtherAccount,
}

/// The judge of an acceptance (finding 1): the store reads the link and the
/// account under its lock, asks here, and writes what this says.
pub fn acceptance<'a>(taker: Taker<'_>, account: Option<ExistingAccount<'a>>) -> Acceptance<'a> {
    match (taker, account) {
        (Taker::NewPassword, Some(a)) if may_set_password(a.password_hash, a.made_by_this_invitation, a.memberships) => Acceptance::SetPasswordOf(a.id),
        (Taker::NewPassword, Some(_)) => Acceptance::SignInFirst,
        (Taker::NewPassword, None) => Acceptance::CreateAccount,
        (Taker::SignedIn(me), Some(a)) if me == a.id => Acceptance::JoinAs(a.id),
        (Taker::SignedIn(_), _) => Acceptance::OtherAccount,
    }
}

/// What makes a spreadsheet read a cell as a formula (OWASP's rule for CSV
/// injection): `=HYPERLINK(…)` in a name would run when the file is opened.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// A cell as written to a CSV: one that would start a formula gets a
/// leading `'`, which spreadsheets show as text and do not display.
pub fn spreadsheet_safe(cell: &str) -> String {
    if cell.starts_with(FORMULA_STARTS) {
        format!("'{cell}")
    } else {
        cell.to_string()
    }
}

/// A cell as read from a CSV: the inverse of [`spreadsheet_safe`], so an
/// exported file imports as the same values.
pub fn from_spreadsheet(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if rest.starts_with(FORMULA_STARTS) => rest,
        _ => cell,
    }
}

/// A member as the admin's people table shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub user_id: String,
    pub person: PersonFields,
    pub active: bool,
    /// False until an invited or imported person sets a password.
    pub has_password: bool,
}

/// An invitation not taken up yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingInvite {
    pub email: String,
    pub role: Role,
    pub expires_ms: i64,
}

/// Everything the people and floors administration shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeopleAdmin {
    pub members: Vec<Member>,
    pub invitations: Vec<PendingInvite>,
    /// The org's operator regions (those of its link floors).
    pub regions: Vec<String>,
    /// The reqCert values the org's robots use: what certifications to offer.
    pub cert_options: Vec<String>,
    pub floors: Vec<crate::models::LinkFloor>,
    /// RTT ceilings per skill (rules A15, A16).
    #[serde(default)]
    pub ceilings: Vec<crate::dispatch::RttCeiling>,
}

/// A set-password / join link, shown once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InviteLink {
    pub email: String,
    pub url: String,
    pub expires_ms: i64,
}

/// What an import wrote; `links_csv` is offered for download once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportResult {
    pub imported: usize,
    pub links_csv: String,
}

/// A profile's editable fields, as the member form sends them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileFields {
    pub display_name: String,
    pub external_id: Option<String>,
    pub region: Option<String>,
    pub certifications: Vec<String>,
    pub active: bool,
}

/// A robot registered from the directory: its token shown once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredRobot {
    pub id: String,
    pub skill: String,
    pub token: String,
}

/// What opening an invitation link can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InvitationState {
    /// The account has no password yet: set one.
    SetPassword,
    /// Signed in as the invited account: join with one press.
    Join,
    /// The email has an account with a password: sign in as it first.
    SignInFirst,
    /// Signed in as someone else.
    OtherAccount,
    /// Used, expired or unknown.
    Gone,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvitationView {
    pub org_name: String,
    pub email: String,
    pub role: Role,
    pub state: InvitationState,
}

/// A `data:` URL that downloads `csv`.
pub fn csv_data_url(csv: &str) -> String {
    format!("data:text/csv;charset=utf-8,{}", crate::rules::percent_encode(csv))
}

#[cfg(test)]
mod tests {
    #[test]
    fn s01_an_invitation_sets_only_its_own_accounts_password_or_one_nobody_holds() {
        let account = |password_hash, made_by_this_invitation, memberships| ExistingAccount { id: "u1", password_hash, made_by_this_invitation, memberships };
        assert_eq!(acceptance(Taker::NewPassword, None), Acceptance::CreateAccount);
        assert_eq!(acceptance(Taker::NewPassword, Some(account("", true, 0))), Acceptance::SetPasswordOf("u1"));
        assert_eq!(acceptance(Taker::NewPassword, Some(account("", false, 0))), Acceptance::SetPasswordOf("u1"), "removed from every org: anyone's link may revive it");
        assert_eq!(acceptance(Taker::NewPassword, Some(account("", false, 1))), Acceptance::SignInFirst, "another org's pending person is never taken over");
        assert_eq!(acceptance(Taker::NewPassword, Some(account("$argon2", true, 0))), Acceptance::SignInFirst, "a password once chosen is never replaced by a link");
        assert_eq!(acceptance(Taker::SignedIn("u1"), Some(account("$argon2", false, 3))), Acceptance::JoinAs("u1"));
        assert_eq!(acceptance(Taker::SignedIn("u2"), Some(account("", true, 0))), Acceptance::OtherAccount);
        assert_eq!(acceptance(Taker::SignedIn("u2"), None), Acceptance::OtherAccount);
    }

    #[test]
    fn s01_a_link_sets_only_its_own_accounts_password_or_a_password_nobody_holds() {
        assert!(super::may_set_password("", true, 1), "the account this invitation made, still pending");
        assert!(!super::may_set_password("", false, 1), "another org's pending person");
        assert!(super::may_set_password("", false, 0), "a pending person removed from every org");
        assert!(!super::may_set_password("$argon2id$…", true, 1), "an account with a password signs in");
        assert!(!super::may_set_password("$argon2id$…", false, 0));
    }

    #[test]
    fn s05_cells_that_start_a_formula_are_neutralised_and_read_back_as_they_were() {
        for cell in ["=HYPERLINK(\"http://evil.example/?x\",\"open\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx"] {
            let safe = super::spreadsheet_safe(cell);
            assert!(safe.starts_with('\''), "{cell:?} is neutralised");
            assert_eq!(super::from_spreadsheet(&safe), cell, "and reads back as it was");
        }
        for cell in ["Ana Lima", "ana@x.io", "'quoted", "", "a=b"] {
            assert_eq!(super::spreadsheet_safe(cell), cell, "{cell:?} is left alone");
            assert_eq!(super::from_spreadsheet(cell), cell);
        }
    }

    use super::*;

    fn regions() -> Vec<String> {
        vec!["uk".into(), "us-east".into()]
    }

    fn cells(s: &[&str]) -> Vec<String> {
        s.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn a08_a_person_is_checked_field_by_field_and_certifications_must_name_skills() {
        let ok = person_from_cells(&cells(&[" Ana@Example.COM ", "Ana Silva", "AG-1", "uk", "pick-place · tier-2; welding · tier-1", "operator"]), 2, &regions()).unwrap();
        assert_eq!(ok.email, "ana@example.com");
        assert_eq!(ok.certifications, vec!["pick-place · tier-2", "welding · tier-1"]);
        let bad_region = person_from_cells(&cells(&["b@x.io", "B", "", "mars", "", "operator"]), 3, &regions()).unwrap_err();
        assert_eq!(bad_region.line, 3);
        assert!(bad_region.problem.contains("mars"));
        assert!(person_from_cells(&cells(&["c@x.io", "C", "", "uk", "   ;", "robot"]), 4, &regions()).unwrap_err().problem.contains("role"));
        assert!(person_from_cells(&cells(&["not-an-email", "D", "", "uk", "", "operator"]), 5, &regions()).is_err());
        assert!(person_from_cells(&cells(&["d@x.io", "", "", "uk", "", "operator"]), 6, &regions()).unwrap_err().problem.contains("display name"));
        // A client needs no region.
        assert!(person_from_cells(&cells(&["e@x.io", "E Ltd", "", "", "", "client"]), 7, &regions()).is_ok());
        assert!(person_from_cells(&cells(&["f@x.io", "F"]), 8, &regions()).unwrap_err().problem.contains("6 columns"));
    }

    #[test]
    fn import_preview_names_every_bad_line_and_repeated_emails() {
        let preview = preview_import(
            vec![
                (2, cells(&["a@x.io", "A", "", "uk", "pick-place", "operator"])),
                (3, cells(&["b@x.io", "B", "", "nowhere", "", "operator"])),
                (4, cells(&["A@x.io", "A again", "", "uk", "", "operator"])),
                (5, cells(&["member@x.io", "M", "", "uk", "", "operator"])),
            ],
            &regions(),
            &["member@x.io".to_string()].into(),
        );
        assert_eq!(preview.people.len(), 1);
        let lines: Vec<usize> = preview.problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, vec![3, 4, 5]);
        assert!(preview.problems[1].problem.contains("line 2"));
        assert!(preview.problems[2].problem.contains("already a member"));
        let empty = preview_import(vec![], &regions(), &Default::default());
        assert_eq!(empty.problems[0].line, 1);
    }

    #[test]
    fn the_links_csv_downloads_as_a_data_url() {
        assert_eq!(csv_data_url("a,b\nç"), "data:text/csv;charset=utf-8,a%2Cb%0A%C3%A7");
    }

    #[test]
    fn the_last_admin_cannot_be_demoted_or_removed() {
        let one = vec!["u1".to_string()];
        assert!(leaves_no_admin(&one, "u1", Some(Role::Operator)));
        assert!(leaves_no_admin(&one, "u1", None));
        assert!(!leaves_no_admin(&one, "u1", Some(Role::Admin)));
        assert!(!leaves_no_admin(&one, "u2", None), "someone else");
        let two = vec!["u1".to_string(), "u2".to_string()];
        assert!(!leaves_no_admin(&two, "u1", None));
    }

    #[test]
    fn export_cells_round_trip_through_the_import_check() {
        let p = PersonFields {
            email: "a@x.io".into(),
            display_name: "A".into(),
            external_id: Some("AG-9".into()),
            region: Some("uk".into()),
            certifications: vec!["pick-place · tier-2".into(), "welding".into()],
            role: Role::Admin,
        };
        let back = person_from_cells(&export_cells(&p), 2, &regions()).unwrap();
        assert_eq!(back, p);
    }
}
