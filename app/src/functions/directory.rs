//! Server functions of directory administration (admins): robots' edit,
//! retirement and token rotation. Each change is audited and published by
//! the server's robot registry.

#[cfg(feature = "ssr")]
use super::guard;
use crate::error::AppError;
use crate::models::Robot;
use leptos::prelude::*;

/// Edits a robot's model, site, PoP and reqCert.
#[server(endpoint = "edit_robot")]
pub async fn edit_robot(robot_id: String, model: String, site: String, pop: String, req_cert: String) -> Result<Robot, AppError> {
    let (user, org) = guard::require(crate::models::Role::Admin).await.map_err(guard::fail)?;
    let fields = crate::directory::RobotFields { model, site, pop, req_cert }.trimmed();
    guard::backend()?.edit_robot(&org.org_id, &user.user_id, &robot_id, fields).await.map_err(guard::fail)
}

/// Retires a robot: it leaves the fleet and its token stops working.
#[server(endpoint = "retire_robot")]
pub async fn retire_robot(robot_id: String) -> Result<(), AppError> {
    let (user, org) = guard::require(crate::models::Role::Admin).await.map_err(guard::fail)?;
    guard::backend()?.retire_robot(&org.org_id, &user.user_id, &robot_id).await.map_err(guard::fail)
}

/// A new bearer token for the robot, returned once.
#[server(endpoint = "rotate_robot_token")]
pub async fn rotate_robot_token(robot_id: String) -> Result<String, AppError> {
    let (user, org) = guard::require(crate::models::Role::Admin).await.map_err(guard::fail)?;
    guard::backend()?.rotate_robot_token(&org.org_id, &user.user_id, &robot_id).await.map_err(guard::fail)
}
