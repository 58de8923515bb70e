//! Downloads: `GET /admin/directory/people.csv`, the org's people in the
//! import's format (admins), and an environment's dataset as LeRobot.

use crate::api::error::ApiError;
use crate::datasets::TarStream;
use crate::services::{Principal, TabPass};
use crate::state::AppState;
use domain::models::Role;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};

pub async fn people_csv(State(state): State<AppState>, principal: Principal) -> Result<Response, ApiError> {
    let org = principal.selected_org().filter(|org| org.role == Role::Admin).ok_or_else(|| ApiError::Forbidden("only admins export the directory".into()))?;
    let csv = state.people.export(&org.org_id).await.map_err(|e| match e {
        crate::services::people::PeopleError::Store(e) => ApiError::from(e),
        other => {
            tracing::error!(error = %other, "directory export failed");
            ApiError::Internal
        }
    })?;
    let disposition = format!("attachment; filename=\"people-{}.csv\"", org.org_id);
    Ok(([(header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()), (header::CONTENT_DISPOSITION, disposition), (header::CACHE_CONTROL, "no-store".into())], csv).into_response())
}

#[derive(serde::Deserialize)]
pub struct ExportParams {
    /// `v3.0` (default) or `v2.1`.
    version: Option<String>,
}

/// `GET /datasets/{environment}/lerobot.tar?version=v3.0|v2.1`: the
/// environment's episodes as a LeRobot dataset. Admins get all of the
/// org's; a client only the episodes of sessions they booked; nobody else.
pub async fn dataset_tar(
    State(state): State<AppState>,
    principal: Principal,
    axum::extract::Path(environment): axum::extract::Path<String>,
    axum::extract::Query(params): axum::extract::Query<ExportParams>,
) -> Result<Response, ApiError> {
    let Principal::User { user, token } = &principal else {
        return Err(ApiError::Forbidden("datasets are for people".into()));
    };
    let org = user.selected_org.as_ref().ok_or_else(|| ApiError::Forbidden("choose an organisation first".into()))?;
    let client = domain::datasets::episode_scope(org.role, &user.user_id).map_err(|why| ApiError::Forbidden(why.into()))?;
    let version = crate::datasets::lerobot::Version::parse(params.version.as_deref().unwrap_or("v3.0"))
        .ok_or_else(|| ApiError::Invalid("version must be v3.0 or v2.1".into()))?;
    // At most two at once per org; the place is held until the tar is sent.
    let place = state.datasets.export_place(&org.org_id).await.map_err(|_| ApiError::RateLimited { retry_after_s: 30 })?;
    // Tied to the sign-in as a socket is: signed out, removed from the org,
    // given another role or switched to another org (on any instance), the
    // download stops.
    let pass = state.accounts.socket_pass(token, &user.user_id, &org.org_id, org.role).await?;
    let tar = state.datasets.export(&org.org_id, &environment, version, client, place).await.map_err(|e| {
        tracing::error!(error = %e, "dataset export failed");
        ApiError::Internal
    })?;
    let tar = tar.ok_or_else(|| ApiError::not_found("dataset", &environment))?;
    let name = format!("attachment; filename=\"lerobot-{}-{}.tar\"", crate::datasets::slug(&environment), version.as_str());
    let headers = [(header::CONTENT_TYPE, "application/x-tar".to_string()), (header::CONTENT_DISPOSITION, name), (header::CACHE_CONTROL, "no-store".into())];
    Ok((headers, axum::body::Body::from_stream(while_holding(tar, pass, state.client_stall))).into_response())
}

/// What the sending task hands the response.
enum Piece {
    Bytes(bytes::Bytes),
    Failed(std::io::Error),
    /// The whole tar was sent.
    End,
}

/// The download's pieces, sent by a task that holds the credential's pass
/// and the tar (and with it the org's export place) for as long as the
/// credential holds and the client takes a piece (64 KiB) every `stall`
/// (`AppServices::client_stall`). Given up (signed out, stalled, the tar
/// failed), it drops all three at once and the response fails: the client
/// sees the download fail, never a shorter tar.
///
/// (The body of a client that stopped reading is never polled again, so
/// nothing inside it can notice: the download is sent by a task of its
/// own, which can. Its connection is cut besides once a write has waited
/// as long, `http::connections`; this also gives up a client that reads
/// a trickle.)
fn while_holding(tar: TarStream, pass: TabPass, stall: std::time::Duration) -> impl Stream<Item = std::io::Result<bytes::Bytes>> + Send {
    let (pieces, received) = tokio::sync::mpsc::channel::<Piece>(1);
    tokio::spawn(send_while_holding(tar, pass, pieces, stall));
    // `None` from the channel without `End` first: the task gave up.
    futures::stream::unfold(Some(received), |received| async move {
        let mut received = received?;
        match received.recv().await {
            Some(Piece::Bytes(bytes)) => Some((Ok(bytes), Some(received))),
            Some(Piece::End) => None,
            Some(Piece::Failed(e)) => Some((Err(e), None)),
            None => Some((Err(std::io::Error::other("the download was given up")), None)),
        }
    })
}

/// The failure a download ends with when its sign-in no longer holds.
fn signed_out(why: crate::services::Ended) -> Piece {
    Piece::Failed(std::io::Error::other(format!("the download's sign-in no longer holds ({why:?})")))
}

async fn send_while_holding(mut tar: TarStream, pass: TabPass, pieces: tokio::sync::mpsc::Sender<Piece>, stall: std::time::Duration) {
    use tokio::sync::mpsc::error::SendTimeoutError;
    let ended = pass.ended();
    tokio::pin!(ended);
    loop {
        let piece = tokio::select! {
            biased;
            why = &mut ended => signed_out(why),
            // The client went away (the response was dropped): the tar,
            // still being written before its first byte perhaps, stops.
            () = pieces.closed() => return,
            next = tar.next() => match next {
                Some(Ok(bytes)) => Piece::Bytes(bytes),
                Some(Err(e)) => Piece::Failed(e),
                None => Piece::End,
            },
        };
        if let Piece::Failed(_) = piece {
            // Told if there is room; if not, the closed channel says it.
            let _ = pieces.try_send(piece);
            return;
        }
        let end = matches!(piece, Piece::End);
        tokio::select! {
            biased;
            why = &mut ended => {
                let _ = pieces.try_send(signed_out(why));
                return;
            }
            sent = pieces.send_timeout(piece, stall) => match sent {
                Ok(()) if !end => {}
                Ok(()) | Err(SendTimeoutError::Closed(_)) => return,
                Err(SendTimeoutError::Timeout(_)) => {
                    tracing::info!("a download's client took no piece for {stall:?}: given up");
                    return;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::{Credential, OpenTabs};

    /// A client's stall (`AppServices::client_stall`), as served.
    const STALL: std::time::Duration = crate::http::connections::CLIENT_STALL;

    /// A download goes on while its sign-in holds, ends with its tar, and
    /// fails as soon as the sign-in ends (signed out, say).
    #[tokio::test]
    async fn a_download_stops_when_its_sign_in_ends() {
        let tabs = OpenTabs::new();
        let sign_in = |hash: &str| Credential::SignIn { person: "p".into(), sign_in: hash.into(), org_id: "o".into(), role: Role::Admin };
        let (parts, tar) = futures::channel::mpsc::unbounded::<std::io::Result<bytes::Bytes>>();
        let mut download = Box::pin(while_holding(tar.boxed(), tabs.open(sign_in("signed-in"), None).await.unwrap(), STALL));
        parts.unbounded_send(Ok(bytes::Bytes::from_static(b"part"))).unwrap();
        assert_eq!(&download.next().await.unwrap().unwrap()[..], b"part");
        tabs.credential_ended("signed-in");
        assert!(download.next().await.unwrap().is_err(), "the download fails once its sign-in ends");
        assert!(download.next().await.is_none());

        let (parts, tar) = futures::channel::mpsc::unbounded::<std::io::Result<bytes::Bytes>>();
        let mut download = Box::pin(while_holding(tar.boxed(), tabs.open(sign_in("still-signed-in"), None).await.unwrap(), STALL));
        drop(parts);
        assert!(download.next().await.is_none(), "a whole tar ends the download");
    }

    /// A client that leaves (or is cut off: `http::connections`) before
    /// the first piece (the dataset is still being written), or while the
    /// next pieces wait for it, stops the tar at once, and lets the pass go.
    #[tokio::test]
    async fn a_download_whose_client_left_stops_its_tar() {
        let tabs = OpenTabs::new();
        let leaving = Credential::SignIn { person: "p".into(), sign_in: "leaving".into(), org_id: "o".into(), role: Role::Admin };
        let (parts, mut tar) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(4);
        let tar = futures::stream::poll_fn(move |cx| tar.poll_recv(cx)).boxed();
        let download = while_holding(tar, tabs.open(leaving.clone(), None).await.unwrap(), STALL);
        drop(download);
        tokio::time::timeout(std::time::Duration::from_secs(5), parts.closed()).await.expect("the tar let go once the client left");
        assert_eq!(tabs.count("p"), 0, "and the pass");

        let (parts, mut tar) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(4);
        for _ in 0..4 {
            parts.send(Ok(bytes::Bytes::from_static(b"part"))).await.unwrap();
        }
        let tar = futures::stream::poll_fn(move |cx| tar.poll_recv(cx)).boxed();
        let mut download = Box::pin(while_holding(tar, tabs.open(leaving, None).await.unwrap(), STALL));
        assert_eq!(&download.next().await.unwrap().unwrap()[..], b"part");
        drop(download);
        tokio::time::timeout(std::time::Duration::from_secs(5), parts.closed()).await.expect("the tar let go once the client left with pieces waiting");
        assert_eq!(tabs.count("p"), 0, "and the pass");
    }

    /// A client that stops reading is given up after its stall: the
    /// pass and the tar (with the org's export place) are let go at once,
    /// and the download, read at last, fails: never a shorter tar.
    #[tokio::test(start_paused = true)]
    async fn a_download_whose_client_stops_reading_is_given_up() {
        let tabs = OpenTabs::new();
        let reading = Credential::SignIn { person: "p".into(), sign_in: "reading".into(), org_id: "o".into(), role: Role::Admin };
        let (parts, tar) = futures::channel::mpsc::unbounded::<std::io::Result<bytes::Bytes>>();
        for _ in 0..3 {
            parts.unbounded_send(Ok(bytes::Bytes::from_static(b"part"))).unwrap();
        }
        let mut download = Box::pin(while_holding(tar.boxed(), tabs.open(reading, None).await.unwrap(), STALL));
        assert_eq!(&download.next().await.unwrap().unwrap()[..], b"part");
        tokio::time::sleep(STALL - std::time::Duration::from_secs(1)).await;
        assert!(!parts.is_closed() && tabs.count("p") == 1, "held while the stall is not up");
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert!(parts.is_closed(), "the tar, and the export's place with it, let go");
        assert_eq!(tabs.count("p"), 0, "the pass let go");
        assert!(download.next().await.unwrap().is_ok(), "the piece that was waiting");
        assert!(download.next().await.unwrap().is_err(), "then a failure");
        assert!(download.next().await.is_none());
    }
}
