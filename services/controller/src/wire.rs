//! Conversions between the Cap'n Proto messages and the domain values,
//! shared by the server and the client.

use keelson_capnp::controller_capnp as cp;

use crate::model::{ClusterConf, CtrlError, CtrlPeer, CtrlStatus, PrimaryRef, Registration, Role, WriteAck};

pub fn role_to_wire(r: Role) -> cp::Role {
    match r {
        Role::Init => cp::Role::Init,
        Role::Electing => cp::Role::Electing,
        Role::Primary => cp::Role::Primary,
        Role::Standby => cp::Role::Standby,
    }
}

pub fn role_from_wire(r: cp::Role) -> Role {
    match r {
        cp::Role::Init => Role::Init,
        cp::Role::Electing => Role::Electing,
        cp::Role::Primary => Role::Primary,
        cp::Role::Standby => Role::Standby,
    }
}

fn text(r: capnp::Result<capnp::text::Reader<'_>>) -> capnp::Result<String> {
    Ok(r?.to_str()?.to_string())
}

fn primary(name: String, address: String) -> Option<PrimaryRef> {
    // Empty name: no known primary ("unknown").
    (!name.is_empty()).then_some(PrimaryRef { name, address })
}

/// A list's length as Cap'n Proto takes it (lists hold under 2^29 elements).
pub fn list_len(n: usize) -> capnp::Result<u32> {
    u32::try_from(n).map_err(|_| capnp::Error::failed(format!("a list of {n} elements is too long to send")))
}

pub fn write_status(mut b: cp::ctrl_status::Builder<'_>, s: &CtrlStatus) -> capnp::Result<()> {
    b.set_cluster_name(s.cluster_name.as_str());
    b.set_primary_name(s.primary.as_ref().map(|p| p.name.as_str()).unwrap_or(""));
    b.set_primary_address(s.primary.as_ref().map(|p| p.address.as_str()).unwrap_or(""));
    b.set_responder_name(s.responder_name.as_str());
    b.set_responder_role(role_to_wire(s.responder_role));
    b.set_term(s.term);
    b.set_config_version(s.config_version);
    b.set_config_checksum(&s.config_checksum);
    b.set_committed_lsn(s.committed_lsn);
    b.set_applied_lsn(s.applied_lsn);
    b.set_fenced(s.fenced);
    b.set_quorum(s.quorum);
    let count = list_len(s.peers.len())?;
    b.set_peer_count(count);
    let mut peers = b.init_peers(count);
    for (i, p) in (0..count).zip(&s.peers) {
        let mut e = peers.reborrow().get(i);
        e.set_name(p.name.as_str());
        e.set_host(p.host.as_str());
        e.set_port(p.port);
    }
    Ok(())
}

pub fn read_status(r: cp::ctrl_status::Reader<'_>) -> capnp::Result<CtrlStatus> {
    let mut peers = Vec::new();
    for p in r.get_peers()?.iter() {
        peers.push(CtrlPeer { name: text(p.get_name())?, host: text(p.get_host())?, port: p.get_port() });
    }
    Ok(CtrlStatus {
        cluster_name: text(r.get_cluster_name())?,
        primary: primary(text(r.get_primary_name())?, text(r.get_primary_address())?),
        responder_name: text(r.get_responder_name())?,
        // An unknown role from a newer server reads as INIT (not ready).
        responder_role: r.get_responder_role().map(role_from_wire).unwrap_or(Role::Init),
        term: r.get_term(),
        config_version: r.get_config_version(),
        config_checksum: r.get_config_checksum()?.to_vec(),
        committed_lsn: r.get_committed_lsn(),
        applied_lsn: r.get_applied_lsn(),
        fenced: r.get_fenced(),
        peers,
        quorum: r.get_quorum(),
    })
}

pub fn write_error(mut b: cp::error::Builder<'_>, e: &CtrlError) {
    let code = match e {
        CtrlError::Standby { primary } => {
            if let Some(p) = primary {
                b.set_primary_name(p.name.as_str());
                b.set_primary_address(p.address.as_str());
            }
            cp::ErrorCode::Standby
        }
        CtrlError::NotReady(_) => cp::ErrorCode::NotReady,
        CtrlError::NoQuorum => cp::ErrorCode::NoQuorum,
        CtrlError::Invalid(_) => cp::ErrorCode::Invalid,
        CtrlError::NotFound(_) => cp::ErrorCode::NotFound,
        CtrlError::Internal(_) => cp::ErrorCode::Internal,
        CtrlError::Deposed => cp::ErrorCode::Deposed,
    };
    b.set_code(code);
    let message = match e {
        CtrlError::NotReady(m) | CtrlError::Invalid(m) | CtrlError::NotFound(m) | CtrlError::Internal(m) => m.clone(),
        other => other.to_string(),
    };
    b.set_message(message.as_str());
}

pub fn read_error(r: cp::error::Reader<'_>) -> capnp::Result<CtrlError> {
    let message = text(r.get_message())?;
    Ok(match r.get_code() {
        Ok(cp::ErrorCode::Standby) => {
            CtrlError::Standby { primary: primary(text(r.get_primary_name())?, text(r.get_primary_address())?) }
        }
        Ok(cp::ErrorCode::NotReady) => CtrlError::NotReady(message),
        Ok(cp::ErrorCode::NoQuorum) => CtrlError::NoQuorum,
        Ok(cp::ErrorCode::Invalid) => CtrlError::Invalid(message),
        Ok(cp::ErrorCode::NotFound) => CtrlError::NotFound(message),
        Ok(cp::ErrorCode::Deposed) => CtrlError::Deposed,
        Ok(cp::ErrorCode::Internal) | Err(_) => CtrlError::Internal(message),
    })
}

pub fn write_conf(mut b: cp::cluster_conf::Builder<'_>, c: &ClusterConf) {
    b.set_document(&c.document);
    b.set_version(c.version);
    b.set_checksum(&c.checksum);
    b.set_lsn(c.lsn);
    b.set_term(c.term);
}

pub fn read_conf(r: cp::cluster_conf::Reader<'_>) -> capnp::Result<ClusterConf> {
    Ok(ClusterConf {
        document: r.get_document()?.to_vec(),
        version: r.get_version(),
        checksum: r.get_checksum()?.to_vec(),
        lsn: r.get_lsn(),
        term: r.get_term(),
    })
}

pub fn write_ack(mut b: cp::write_ack::Builder<'_>, a: &WriteAck) {
    b.set_term(a.term);
    b.set_lsn(a.lsn);
}

pub fn read_ack(r: cp::write_ack::Reader<'_>) -> WriteAck {
    WriteAck { term: r.get_term(), lsn: r.get_lsn() }
}

pub fn write_registration(mut b: cp::registration::Builder<'_>, r: &Registration) {
    b.set_service(r.service.as_str());
    b.set_instance(r.instance.as_str());
    b.set_address(r.address.as_str());
    b.set_ttl_seconds(r.ttl_seconds);
}

pub fn read_registration(r: cp::registration::Reader<'_>) -> capnp::Result<Registration> {
    Ok(Registration {
        service: text(r.get_service())?,
        instance: text(r.get_instance())?,
        address: text(r.get_address())?,
        ttl_seconds: r.get_ttl_seconds(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_errors_round_trip() {
        let status = CtrlStatus {
            cluster_name: "keelson".into(),
            primary: Some(PrimaryRef { name: "c2".into(), address: "127.0.0.1:7002".into() }),
            responder_name: "c1".into(),
            responder_role: Role::Standby,
            term: 7,
            config_version: u64::MAX - 1,
            config_checksum: vec![0xab; 32],
            committed_lsn: 12,
            applied_lsn: 11,
            fenced: true,
            peers: vec![CtrlPeer { name: "c1".into(), host: "h".into(), port: 7001 }],
            quorum: true,
        };
        let mut msg = capnp::message::Builder::new_default();
        write_status(msg.init_root::<cp::ctrl_status::Builder>(), &status).unwrap();
        let back = read_status(msg.get_root_as_reader::<cp::ctrl_status::Reader>().unwrap()).unwrap();
        assert_eq!(back, status);

        let unknown = CtrlStatus { primary: None, ..status };
        let mut msg = capnp::message::Builder::new_default();
        write_status(msg.init_root::<cp::ctrl_status::Builder>(), &unknown).unwrap();
        assert_eq!(read_status(msg.get_root_as_reader::<cp::ctrl_status::Reader>().unwrap()).unwrap().primary, None);

        for e in [
            CtrlError::Standby { primary: Some(PrimaryRef { name: "c3".into(), address: "h:1".into() }) },
            CtrlError::Standby { primary: None },
            CtrlError::NotReady("x".into()),
            CtrlError::NoQuorum,
            CtrlError::Invalid("bad".into()),
            CtrlError::NotFound("gone".into()),
            CtrlError::Internal("boom".into()),
            CtrlError::Deposed,
        ] {
            let mut msg = capnp::message::Builder::new_default();
            write_error(msg.init_root::<cp::error::Builder>(), &e);
            assert_eq!(read_error(msg.get_root_as_reader::<cp::error::Reader>().unwrap()).unwrap(), e);
        }
    }
}
