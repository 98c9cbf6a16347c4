//! Who may call the control API: only the user the daemon runs as. One check, as an interceptor
//! in front of every RPC ([`only_our_user`]), so no RPC can be added without it.
//!
//! The socket is 0600 in a 0700 directory already; this also holds if someone loosens those modes
//! (OpenSSH's agent checks its client the same way: `getpeereid` in ssh-agent.c,
//! `handle_socket_read`). It fails closed: a call whose peer cannot be named (no Unix socket
//! under it, or no peer credentials from the kernel) is refused, never trusted.

use tonic::transport::server::UdsConnectInfo;
use tonic::{Request, Status};

/// The interceptor's type, as the service names it.
pub type Check = fn(Request<()>) -> Result<Request<()>, Status>;

/// Lets the call through only when the kernel says its peer runs as our uid.
pub fn only_our_user(request: Request<()>) -> Result<Request<()>, Status> {
    check(request.extensions().get::<UdsConnectInfo>(), kharon_shared::paths::uid())?;
    Ok(request)
}

fn check(info: Option<&UdsConnectInfo>, me: u32) -> Result<(), Status> {
    match info.and_then(|info| info.peer_cred).map(|cred| cred.uid()) {
        Some(uid) if uid == me => Ok(()),
        Some(uid) => {
            Err(Status::permission_denied(format!("uid {uid} may not control this kharond (uid {me})")))
        }
        None => Err(Status::permission_denied("cannot tell which user is calling; refused")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::transport::server::Connected as _;

    #[tokio::test]
    async fn only_a_unix_peer_of_our_own_uid_gets_through() {
        let (ours, _other_end) = tokio::net::UnixStream::pair().unwrap();
        let info = ours.connect_info();
        let me = kharon_shared::paths::uid();
        assert!(check(Some(&info), me).is_ok());

        let refused = check(Some(&info), me.wrapping_add(1)).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert!(refused.message().contains(&format!("uid {me} may not control")), "{}", refused.message());

        // Called without a socket under it (in-process, or a transport without peer credentials).
        let unknown = only_our_user(Request::new(())).unwrap_err();
        assert_eq!(unknown.code(), tonic::Code::PermissionDenied);
        assert_eq!(unknown.message(), "cannot tell which user is calling; refused");
    }
}
