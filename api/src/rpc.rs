//! gRPC code generated from `proto/tessera.proto` and helpers around it.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("tessera.v1");

/// The version of the router-to-node contract (this file's messages and the
/// MessagePack commands and queries they carry) this build speaks. Raise it
/// when a change would be misread by a node or router of the previous
/// version, and keep [`MIN_WIRE_VERSION`] at the oldest version still served.
///
/// 1: every build before the version was sent (no `tessera-wire-version`
/// metadata). 2: routers send it; nodes check it.
pub const WIRE_VERSION: u32 = 2;
/// The oldest router wire version a node serves.
pub const MIN_WIRE_VERSION: u32 = 1;
/// The oldest node wire version a router of this build works with: nodes of
/// an earlier release (reporting none, 0) are refused by the router, since
/// they would not refuse it themselves (upgrade the nodes first).
pub const MIN_NODE_WIRE_VERSION: u32 = 2;
/// The gRPC metadata key a router puts its wire version in.
pub const WIRE_VERSION_KEY: &str = "tessera-wire-version";
/// How a node's refusal of a router's wire version begins (the router stops
/// retrying at it).
pub const WIRE_REFUSAL: &str = "incompatible wire version";

/// How a node's access layer refuses a call path it does not know
/// (`PermissionDenied`; older nodes so refuse the streaming calls added since).
pub const NOT_SERVED: &str = "is not an RPC this node serves to anyone";

/// A node's check of a router call's wire version (a server interceptor): a
/// call without the metadata is version 1; a version outside
/// [`MIN_WIRE_VERSION`]`..=`[`WIRE_VERSION`] is refused with
/// `FAILED_PRECONDITION`, naming both sides and what to upgrade.
pub fn check_wire_version(request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
    let caller = match request.metadata().get(WIRE_VERSION_KEY) {
        None => 1,
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u32>().ok())
            .ok_or_else(|| tonic::Status::invalid_argument(format!("{WIRE_VERSION_KEY} must be a number")))?,
    };
    if caller < MIN_WIRE_VERSION {
        return Err(tonic::Status::failed_precondition(format!(
            "{WIRE_REFUSAL}: the router speaks wire version {caller}, this node (tessera {}) serves {MIN_WIRE_VERSION} to {WIRE_VERSION}; upgrade the router",
            env!("CARGO_PKG_VERSION")
        )));
    }
    if caller > WIRE_VERSION {
        return Err(tonic::Status::failed_precondition(format!(
            "{WIRE_REFUSAL}: the router speaks wire version {caller}, newer than this node's (tessera {}, wire {MIN_WIRE_VERSION} to {WIRE_VERSION}); upgrade the nodes first (rolling update), then the routers",
            env!("CARGO_PKG_VERSION")
        )));
    }
    Ok(request)
}

impl Failure {
    /// Builds a failure of a kind with a message.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure { kind: kind as i32, message: message.into() }
    }

    /// The failure's kind; an unknown or unset one reads as
    /// [`FailureKind::Unavailable`] (the caller tries elsewhere).
    pub fn failure_kind(&self) -> FailureKind {
        match FailureKind::try_from(self.kind) {
            Ok(FailureKind::Unspecified) | Err(_) => FailureKind::Unavailable,
            Ok(kind) => kind,
        }
    }
}

/// Largest gRPC message a peer or router accepts (snapshot chunks, batches).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

#[cfg(test)]
mod wire_tests {
    use super::*;

    fn call(version: Option<&str>) -> Result<tonic::Request<()>, tonic::Status> {
        let mut request = tonic::Request::new(());
        if let Some(v) = version {
            request.metadata_mut().insert(WIRE_VERSION_KEY, v.parse().unwrap());
        }
        check_wire_version(request)
    }

    #[test]
    fn a_router_of_a_served_wire_version_passes_and_others_are_refused_by_name() {
        assert!(call(None).is_ok(), "a router from before the version was sent is version 1");
        assert!(call(Some(&WIRE_VERSION.to_string())).is_ok());
        let newer = call(Some(&(WIRE_VERSION + 1).to_string())).unwrap_err();
        assert_eq!(newer.code(), tonic::Code::FailedPrecondition);
        assert!(newer.message().starts_with(WIRE_REFUSAL) && newer.message().contains("upgrade the nodes first"), "{}", newer.message());
        let older = call(Some("0")).unwrap_err();
        assert!(older.message().contains("upgrade the router"), "{}", older.message());
        assert_eq!(call(Some("x")).unwrap_err().code(), tonic::Code::InvalidArgument);
    }
}
