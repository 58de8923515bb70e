//! Directory administration's shared rules: a robot's editable fields and
//! what is wrong with them (the same checks as registering one).

use serde::{Deserialize, Serialize};

/// A robot's editable fields, as the edit form sends them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotFields {
    pub model: String,
    pub site: String,
    pub pop: String,
    pub req_cert: String,
}

impl RobotFields {
    /// Surrounding blanks are not part of a value.
    pub fn trimmed(self) -> RobotFields {
        RobotFields { model: self.model.trim().into(), site: self.site.trim().into(), pop: self.pop.trim().into(), req_cert: self.req_cert.trim().into() }
    }
}

/// What is wrong with the fields of robot `id`, as a sentence naming the
/// field; the reqCert must name a skill (rule A02).
pub fn robot_fields_problem(id: &str, f: &RobotFields, known_pops: &[String]) -> Option<String> {
    crate::rules::robot_fields_problem(id, &f.model, &f.site, &f.pop, &f.req_cert, known_pops)
}

/// The skill a reqCert names, or why it names none (shown as the admin types).
pub fn derived_skill(req_cert: &str) -> Result<String, String> {
    crate::rules::skill_of(req_cert.trim()).map(str::to_string).map_err(|_| "names no skill: it must start with one, e.g. `pick-place · tier-2`".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a02_the_edit_form_derives_the_skill_and_refuses_a_req_cert_without_one() {
        assert_eq!(derived_skill("pick-place · tier-2").as_deref(), Ok("pick-place"));
        assert!(derived_skill("   ").is_err());
        let pops = vec!["uk-london".to_string()];
        let ok = RobotFields { model: "UR10e".into(), site: "Leeds".into(), pop: "uk-london".into(), req_cert: "welding · tier-1".into() };
        assert_eq!(robot_fields_problem("uk-pick-01", &ok, &pops), None);
        let moon = RobotFields { pop: "moon-1".into(), ..ok.clone() };
        assert!(robot_fields_problem("uk-pick-01", &moon, &pops).is_some(), "an unknown PoP");
        let blank = RobotFields { model: " ".into(), ..ok };
        assert!(robot_fields_problem("uk-pick-01", &blank.trimmed(), &pops).is_some());
    }
}
