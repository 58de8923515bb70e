//! The demo org created on the first start against an empty database.
//! A database that holds any org is never seeded again.

use crate::auth::{hash_password, token_hash};
use crate::store::{NewMembership, NewOperatorProfile, NewOrg, NewRobot, NewUser, Seed, Store, StoreResult};
use domain::models::{LinkFloor, Role};

/// Every demo person signs in with this password.
pub const DEMO_PASSWORD: &str = "clutchcall-demo";
pub const DEMO_ORG_ID: &str = "org-northstar";
pub const SECOND_ORG_ID: &str = "org-harbor";
pub const DEMO_ADMIN_EMAIL: &str = "dana.okafor@northstar.example";

/// The demo robots' bearer tokens are public (README): demo org only.
pub fn demo_robot_token(robot_id: &str) -> String {
    format!("cct_demo_{robot_id}")
}

/// (id, org, model, site, pop, reqCert)
const ROBOTS: &[(&str, &str, &str, &str, &str, &str)] = &[
    ("ue-pick-01", DEMO_ORG_ID, "UR10e", "Ashburn FC-2", "us-east", "pick-place · tier-2"),
    ("ue-pick-02", DEMO_ORG_ID, "UR10e", "Ashburn FC-2", "us-east", "pick-place · tier-1"),
    ("ue-pal-01", DEMO_ORG_ID, "Fanuc M-410", "Richmond DC-1", "us-east", "palletize · tier-1"),
    ("ue-insp-01", DEMO_ORG_ID, "Spot Arm", "Richmond DC-1", "us-east", "inspection tier-3"),
    ("uw-pick-01", DEMO_ORG_ID, "Franka FR3", "Reno DC-4", "us-west", "pick-place · tier-2"),
    ("uw-weld-01", DEMO_ORG_ID, "ABB IRB 1300", "Portland Fab-1", "us-west", "welding · tier-2"),
    ("uw-mm-01", DEMO_ORG_ID, "Stretch 3", "Reno DC-4", "us-west", "mobile-manipulation"),
    ("uw-pal-01", DEMO_ORG_ID, "Fanuc M-410", "Portland Fab-1", "us-west", "palletize · tier-2"),
    ("uk-pick-01", DEMO_ORG_ID, "Franka FR3", "Leeds Hub", "uk-london", "pick-place · tier-2"),
    ("uk-insp-01", DEMO_ORG_ID, "Spot Arm", "Leeds Hub", "uk-london", "inspection · tier-1"),
    ("uk-weld-01", DEMO_ORG_ID, "KUKA KR 10", "Sheffield Works", "uk-london", "welding tier-1"),
    ("uk-mm-01", DEMO_ORG_ID, "Stretch 3", "Croydon Micro-FC", "uk-london", "mobile-manipulation · tier-1"),
    ("uk-pal-01", DEMO_ORG_ID, "Fanuc M-410", "Sheffield Works", "uk-london", "palletize · tier-1"),
    ("hb-pick-01", SECOND_ORG_ID, "UR5e", "Rotterdam Pier 3", "uk-london", "pick-place · tier-1"),
    ("hb-insp-01", SECOND_ORG_ID, "Spot Arm", "Rotterdam Pier 3", "uk-london", "inspection · tier-2"),
];

/// The demo org's one client: (user id, display name, email).
pub const DEMO_CLIENT: (&str, &str, &str) = ("u-kofi", "Kofi Mensah (Leeds Logistics)", "kofi.mensah@leeds-logistics.example");

/// (user id, display name, email, external id, org, role, region, certifications)
type PersonRow = (&'static str, &'static str, &'static str, Option<&'static str>, &'static str, Role, &'static str, &'static [&'static str]);

const PEOPLE: &[PersonRow] = &[
    ("u-asha", "Asha Rao", "asha.rao@northstar.example", Some("NS-0101"), DEMO_ORG_ID, Role::Operator, "BLR", &["pick-place · tier-2", "palletize · tier-1"]),
    ("u-vikram", "Vikram Iyer", "vikram.iyer@northstar.example", Some("NS-0102"), DEMO_ORG_ID, Role::Operator, "BLR", &["pick-place · tier-1", "inspection · tier-3"]),
    ("u-meera", "Meera Nair", "meera.nair@northstar.example", Some("NS-0103"), DEMO_ORG_ID, Role::Operator, "BLR", &["welding · tier-2", "mobile-manipulation · tier-1"]),
    ("u-tom", "Tom Whitfield", "tom.whitfield@northstar.example", Some("NS-0201"), DEMO_ORG_ID, Role::Operator, "Manchester", &["pick-place · tier-2", "welding · tier-1"]),
    ("u-priya", "Priya Shah", "priya.shah@northstar.example", Some("NS-0202"), DEMO_ORG_ID, Role::Operator, "Manchester", &["inspection · tier-1", "palletize · tier-2"]),
    ("u-owen", "Owen Davies", "owen.davies@northstar.example", None, DEMO_ORG_ID, Role::Operator, "Manchester", &["mobile-manipulation · tier-1", "pick-place · tier-1"]),
    ("u-carla", "Carla Mendes", "carla.mendes@northstar.example", Some("NS-0301"), DEMO_ORG_ID, Role::Operator, "Austin", &["pick-place · tier-2", "inspection · tier-2"]),
    ("u-jamal", "Jamal Brooks", "jamal.brooks@northstar.example", Some("NS-0302"), DEMO_ORG_ID, Role::Operator, "Austin", &["palletize · tier-1", "welding · tier-2"]),
    // The admin may also operate: she holds an operator profile too.
    ("u-dana", "Dana Okafor", DEMO_ADMIN_EMAIL, Some("NS-0001"), DEMO_ORG_ID, Role::Admin, "Manchester", &["inspection · tier-1"]),
    ("u-lena", "Lena Fischer", "lena.fischer@harbor.example", Some("HB-0101"), SECOND_ORG_ID, Role::Operator, "Manchester", &["pick-place · tier-1", "inspection · tier-2"]),
];

/// Region → PoP propagation floors. The three rows of seed 000 come first
/// with their notes; the rest are demo values for every other pair.
const FLOORS: &[(&str, &str, u32, Option<&str>)] = &[
    ("BLR", "us-east", 275, Some("QUIC buys jitter and recovery, not propagation")),
    ("BLR", "us-west", 238, None),
    ("Manchester", "uk-london", 177, Some("Shortest glass reach")),
    ("BLR", "uk-london", 162, None),
    ("Manchester", "us-east", 205, None),
    ("Manchester", "us-west", 262, None),
    ("Austin", "us-east", 96, None),
    ("Austin", "us-west", 118, None),
    ("Austin", "uk-london", 231, None),
];

/// Builds the demo seed (hashing every password, so it takes a moment).
/// The demo org's robot ids (the simulator plays their edge agents).
pub fn demo_robot_ids() -> Vec<&'static str> {
    ROBOTS.iter().filter(|r| r.1 == DEMO_ORG_ID).map(|r| r.0).collect()
}

/// The demo org's operators' emails (the simulator can play their consoles).
pub fn demo_operator_emails() -> Vec<&'static str> {
    PEOPLE.iter().filter(|p| p.4 == DEMO_ORG_ID && p.5 == Role::Operator).map(|p| p.2).collect()
}

pub fn demo_seed() -> Seed {
    demo_copy(&DemoNames::default(), || hash_password(DEMO_PASSWORD))
}

/// How one copy of the demo orgs names its rows: as listed above (the
/// demo itself), or with every id and email marked by a browser test's
/// tag, so that copies made side by side never share a person, a robot or
/// an org. Display names stay as they are: screens read the same.
#[derive(Clone, Debug, Default)]
pub struct DemoNames {
    tag: Option<String>,
}

impl DemoNames {
    pub fn tagged(tag: &str) -> DemoNames {
        DemoNames { tag: Some(tag.to_string()) }
    }

    /// An org, person or robot id: `uk-insp-01` → `uk-insp-01-<tag>`.
    pub fn id(&self, id: &str) -> String {
        match &self.tag {
            Some(tag) => format!("{id}-{tag}"),
            None => id.to_string(),
        }
    }

    /// An email: `asha.rao@northstar.example` → `asha.rao@<tag>.northstar.example`.
    pub fn email(&self, email: &str) -> String {
        match (&self.tag, email.split_once('@')) {
            (Some(tag), Some((local, domain))) => format!("{local}@{tag}.{domain}"),
            _ => email.to_string(),
        }
    }
}

/// The demo orgs under `names`; `password_hash` is asked once per person.
pub fn demo_copy(names: &DemoNames, mut password_hash: impl FnMut() -> String) -> Seed {
    let mut seed = Seed {
        orgs: vec![
            NewOrg { id: names.id(DEMO_ORG_ID), name: "Northstar Robotics".into() },
            NewOrg { id: names.id(SECOND_ORG_ID), name: "Harbor Labs".into() },
        ],
        ..Seed::default()
    };
    for &(id, name, email, external_id, org, role, region, certs) in PEOPLE {
        seed.users.push(NewUser {
            id: names.id(id),
            email: names.email(email),
            display_name: name.into(),
            external_id: external_id.map(Into::into),
            password_hash: password_hash(),
        });
        seed.memberships.push(NewMembership { org_id: names.id(org), user_id: names.id(id), role });
        seed.operator_profiles.push(NewOperatorProfile {
            org_id: names.id(org),
            user_id: names.id(id),
            region: region.into(),
            certifications: certs.iter().map(|c| c.to_string()).collect(),
        });
    }
    // The demo org's client (seed 001): books robots, watches its sessions.
    let (id, name, email) = DEMO_CLIENT;
    seed.users.push(NewUser { id: names.id(id), email: names.email(email), display_name: name.into(), external_id: None, password_hash: password_hash() });
    seed.memberships.push(NewMembership { org_id: names.id(DEMO_ORG_ID), user_id: names.id(id), role: Role::Client });
    // The demo admin also runs the second org, so org switching is visible.
    seed.memberships.push(NewMembership { org_id: names.id(SECOND_ORG_ID), user_id: names.id("u-dana"), role: Role::Admin });
    for &(id, org, model, site, pop, req_cert) in ROBOTS {
        seed.robots.push(NewRobot {
            id: names.id(id),
            org_id: names.id(org),
            model: model.into(),
            site: site.into(),
            pop: pop.into(),
            req_cert: req_cert.into(),
            token_hash: token_hash(&demo_robot_token(&names.id(id))),
        });
    }
    seed.link_floors = FLOORS
        .iter()
        .map(|&(region, pop, floor_ms, note)| LinkFloor {
            region: region.into(),
            pop: pop.into(),
            floor_ms,
            note: note.map(Into::into),
        })
        .collect();
    seed
}

/// What a browser test is told of its copy of the demo orgs: each org,
/// person and robot under its demo id (`org-northstar`, `u-asha`,
/// `uk-insp-01`), with the copy's own ids, emails and robot tokens.
#[derive(Debug, serde::Serialize)]
pub struct DemoCopyAnswer {
    pub tag: String,
    pub password: &'static str,
    pub orgs: std::collections::BTreeMap<&'static str, serde_json::Value>,
    pub people: std::collections::BTreeMap<&'static str, serde_json::Value>,
    pub robots: std::collections::BTreeMap<&'static str, serde_json::Value>,
}

impl DemoCopyAnswer {
    pub fn new(tag: &str) -> DemoCopyAnswer {
        use serde_json::json;
        let names = DemoNames::tagged(tag);
        let people = PEOPLE.iter().map(|p| (p.0, p.1, p.2)).chain([DEMO_CLIENT]);
        DemoCopyAnswer {
            tag: tag.to_string(),
            password: DEMO_PASSWORD,
            orgs: [(DEMO_ORG_ID, "Northstar Robotics"), (SECOND_ORG_ID, "Harbor Labs")]
                .into_iter()
                .map(|(id, name)| (id, json!({ "id": names.id(id), "name": name })))
                .collect(),
            people: people.map(|(id, name, email)| (id, json!({ "id": names.id(id), "name": name, "email": names.email(email) }))).collect(),
            robots: ROBOTS
                .iter()
                .map(|r| (r.0, json!({ "id": names.id(r.0), "token": demo_robot_token(&names.id(r.0)), "org": names.id(r.1) })))
                .collect(),
        }
    }
}

/// Seeds the demo when the database holds no org. Returns whether it did.
pub async fn seed_demo_if_empty(store: &dyn Store) -> StoreResult<bool> {
    if !store.is_empty().await? {
        return Ok(false);
    }
    let seed = tokio::task::spawn_blocking(demo_seed).await.expect("demo seed builder panicked");
    store.seed(&seed).await?;
    Ok(true)
}

/// Shortest password `create-admin` accepts (OWASP ASVS 2.1.1).
pub const MIN_ADMIN_PASSWORD_CHARS: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum FirstAdminError {
    #[error("the password must be at least {MIN_ADMIN_PASSWORD_CHARS} characters")]
    ShortPassword,
    #[error("{0} must not be empty")]
    Empty(&'static str),
    #[error("{0:?} is not an email address")]
    Email(String),
    #[error("a person with the email {0} already exists")]
    EmailTaken(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// Creates an organisation and its first admin (`server create-admin`).
/// Returns the new org's id.
pub async fn create_first_admin(store: &dyn Store, org_name: &str, email: &str, name: &str, password: &str) -> Result<String, FirstAdminError> {
    let (org_name, name, email) = (org_name.trim(), name.trim(), domain::rules::normalize_email(email));
    if org_name.is_empty() {
        return Err(FirstAdminError::Empty("the organisation's name"));
    }
    if name.is_empty() {
        return Err(FirstAdminError::Empty("the admin's name"));
    }
    let plausible = email.len() <= domain::rules::MAX_EMAIL_CHARS
        && email.split_once('@').is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'));
    if !plausible {
        return Err(FirstAdminError::Email(email));
    }
    if password.chars().count() < MIN_ADMIN_PASSWORD_CHARS {
        return Err(FirstAdminError::ShortPassword);
    }
    if store.user_by_email(&email).await?.is_some() {
        return Err(FirstAdminError::EmailTaken(email));
    }
    let org_id = format!("org-{}", uuid::Uuid::now_v7().simple());
    let user_id = format!("u-{}", uuid::Uuid::now_v7().simple());
    let password = password.to_string();
    let password_hash = tokio::task::spawn_blocking(move || hash_password(&password)).await.expect("hashing thread");
    let seed = Seed {
        orgs: vec![NewOrg { id: org_id.clone(), name: org_name.into() }],
        users: vec![NewUser { id: user_id.clone(), email, display_name: name.into(), external_id: None, password_hash }],
        memberships: vec![NewMembership { org_id: org_id.clone(), user_id, role: Role::Admin }],
        ..Seed::default()
    };
    store.seed(&seed).await?;
    Ok(org_id)
}

/// Org id of `load_org`.
pub const LOAD_ORG_ID: &str = "org-load";

/// Bearer token of robot `i` of `load_org`.
pub fn load_robot_token(i: usize) -> String {
    format!("load-{i}")
}

/// Password of every `load_org` operator.
pub const LOAD_PASSWORD: &str = "load-test";

/// Email of load operator `i`.
pub fn load_operator_email(i: usize) -> String {
    format!("u-load-{i:03}@load.example")
}

/// An org for load runs and concurrency tests: `operators` BLR operators
/// (`u-load-000`…, password `LOAD_PASSWORD`) certified `pick-place · tier-1`,
/// and `robots` us-east robots (`lr-000`…) that need it.
pub fn load_org(operators: usize, robots: usize) -> Seed {
    let mut seed = Seed { orgs: vec![NewOrg { id: LOAD_ORG_ID.into(), name: "Load Test".into() }], ..Seed::default() };
    // One hash for all: hashing a thousand passwords would dominate a load run.
    let password_hash = hash_password(LOAD_PASSWORD);
    for i in 0..operators {
        let id = format!("u-load-{i:03}");
        seed.users.push(NewUser {
            id: id.clone(),
            email: load_operator_email(i),
            display_name: format!("Load Operator {i:03}"),
            external_id: None,
            password_hash: password_hash.clone(),
        });
        seed.memberships.push(NewMembership { org_id: LOAD_ORG_ID.into(), user_id: id.clone(), role: Role::Operator });
        seed.operator_profiles.push(NewOperatorProfile {
            org_id: LOAD_ORG_ID.into(),
            user_id: id,
            region: "BLR".into(),
            certifications: vec!["pick-place · tier-1".into()],
        });
    }
    for i in 0..robots {
        seed.robots.push(NewRobot {
            id: format!("lr-{i:03}"),
            org_id: LOAD_ORG_ID.into(),
            model: "UR5e".into(),
            site: "Load Site".into(),
            pop: "us-east".into(),
            req_cert: "pick-place · tier-1".into(),
            token_hash: token_hash(&load_robot_token(i)),
        });
    }
    // The path its calls ride (seed 000's value), so a load org ranks on its own.
    let (region, pop, floor_ms, note) = FLOORS[0];
    seed.link_floors.push(LinkFloor { region: region.into(), pop: pop.into(), floor_ms, note: note.map(str::to_owned) });
    seed
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::rules::skill_of;

    #[test]
    fn demo_fleet_covers_three_pops_and_several_skills() {
        let demo: Vec<_> = ROBOTS.iter().filter(|r| r.1 == DEMO_ORG_ID).collect();
        assert!(demo.len() >= 12);
        for pop in ["us-east", "us-west", "uk-london"] {
            assert!(demo.iter().any(|r| r.4 == pop), "no robot at {pop}");
        }
        let mut skills: Vec<_> = demo.iter().map(|r| skill_of(r.5).unwrap()).collect();
        skills.sort();
        skills.dedup();
        assert!(skills.len() >= 4, "{skills:?}");
    }

    #[test]
    fn demo_operators_span_three_regions_and_every_region_pop_pair_has_a_floor() {
        let operators: Vec<_> = PEOPLE.iter().filter(|p| p.4 == DEMO_ORG_ID && p.5 == Role::Operator).collect();
        assert!(operators.len() >= 8);
        let regions: std::collections::BTreeSet<_> = PEOPLE.iter().map(|p| p.6).collect();
        assert!(regions.contains("BLR") && regions.contains("Manchester") && regions.len() >= 3);
        for region in &regions {
            for pop in ["us-east", "us-west", "uk-london"] {
                assert!(FLOORS.iter().any(|f| f.0 == *region && f.1 == pop), "no floor {region} → {pop}");
            }
        }
    }

    #[test]
    fn seed_000_floors_are_exact() {
        let floor = |region, pop| FLOORS.iter().find(|f| f.0 == region && f.1 == pop).unwrap().2;
        assert_eq!(floor("BLR", "us-east"), 275);
        assert_eq!(floor("BLR", "us-west"), 238);
        assert_eq!(floor("Manchester", "uk-london"), 177);
    }
}
