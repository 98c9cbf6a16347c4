use super::*;

#[test]
fn backoff_doubles_from_half_a_second_to_thirty_with_jitter() {
    for _ in 0..50 {
        let b1 = backoff(1);
        assert!(b1 >= Duration::from_millis(400) && b1 <= Duration::from_millis(600), "{b1:?}");
        let b3 = backoff(3);
        assert!(b3 >= Duration::from_millis(1600) && b3 <= Duration::from_millis(2400), "{b3:?}");
        let b = backoff(40);
        assert!(b >= Duration::from_secs(24) && b <= Duration::from_secs(36), "{b:?}");
    }
}

fn target(reason: ChannelOpenFailure, description: &str) -> Error {
    Error::Target {
        jumphost: "j".into(),
        host: "h".into(),
        port: 1,
        reason,
        description: Some(description.into()),
    }
}

#[test]
fn target_failures_map_to_socks_meaningful_kinds() {
    assert_eq!(
        target(ChannelOpenFailure::ConnectFailed, "Connection refused").io_kind(),
        ErrorKind::ConnectionRefused
    );
    assert_eq!(
        target(ChannelOpenFailure::ConnectFailed, "Name or service not known").io_kind(),
        ErrorKind::HostUnreachable
    );
    assert_eq!(
        target(ChannelOpenFailure::AdministrativelyProhibited, "open failed").io_kind(),
        ErrorKind::PermissionDenied
    );
    let t = Error::Timeout { jumphost: "j".into(), what: "x", after: Duration::from_secs(1) };
    assert_eq!(t.io_kind(), ErrorKind::TimedOut);
}
