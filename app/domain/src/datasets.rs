//! The dataset browser's shared part (seed 001, rule L12): episodes, per
//! environment, with who recorded them and how long they run.

use serde::{Deserialize, Serialize};

/// One episode of an environment's dataset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Episode {
    pub environment: String,
    pub episode_index: i64,
    pub session_id: String,
    pub robot_id: String,
    pub operator_name: Option<String>,
    pub task: String,
    pub fps: i64,
    pub frames: i64,
    pub duration_ms: i64,
    pub cameras: Vec<String>,
    pub created_ms: i64,
}

/// Why an operator sees no datasets.
pub const NOT_YOURS: &str = "Datasets belong to the clients who booked the sessions.";

/// Whose episodes a member may see (seed 001): an admin all of the org's
/// (`Ok(None)`), a client those of the sessions they booked
/// (`Ok(Some(their id))`), an operator none (`Err`).
pub fn episode_scope(role: crate::models::Role, user_id: &str) -> Result<Option<&str>, &'static str> {
    match role {
        crate::models::Role::Admin => Ok(None),
        crate::models::Role::Client => Ok(Some(user_id)),
        crate::models::Role::Operator => Err(NOT_YOURS),
    }
}

/// Episodes grouped by environment, environments by name, episodes by index.
pub fn by_environment(mut episodes: Vec<Episode>) -> Vec<(String, Vec<Episode>)> {
    episodes.sort_by(|a, b| a.environment.cmp(&b.environment).then(a.episode_index.cmp(&b.episode_index)));
    let mut groups: Vec<(String, Vec<Episode>)> = Vec::new();
    for episode in episodes {
        match groups.last_mut() {
            Some((environment, list)) if *environment == episode.environment => list.push(episode),
            _ => groups.push((episode.environment.clone(), vec![episode])),
        }
    }
    groups
}

/// The download link of an environment's dataset in a LeRobot version.
pub fn download_href(environment: &str, version: &str) -> String {
    format!("/datasets/{}/lerobot.tar?version={version}", crate::rules::percent_encode(environment))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn episode(environment: &str, index: i64) -> Episode {
        Episode {
            environment: environment.into(),
            episode_index: index,
            session_id: format!("s{index}"),
            robot_id: "r".into(),
            operator_name: None,
            task: "t".into(),
            fps: 30,
            frames: 10,
            duration_ms: 333,
            cameras: vec![],
            created_ms: 0,
        }
    }

    #[test]
    fn l12_episodes_are_listed_per_environment_in_index_order() {
        let groups = by_environment(vec![episode("Leeds Hub", 1), episode("Reno DC-4", 0), episode("Leeds Hub", 0)]);
        let shape: Vec<(String, Vec<i64>)> = groups.into_iter().map(|(e, l)| (e, l.iter().map(|x| x.episode_index).collect())).collect();
        assert_eq!(shape, vec![("Leeds Hub".to_string(), vec![0, 1]), ("Reno DC-4".to_string(), vec![0])]);
        assert_eq!(download_href("Leeds Hub", "v2.1"), "/datasets/Leeds%20Hub/lerobot.tar?version=v2.1");
    }
}
