//! Mutual TLS between the mesh's processes.
//!
//! With `[keelson] tls_cert_file`, `tls_key_file` and `tls_ca_file` set,
//! every internal connection (gRPC between gateway, inventory, candidates
//! and stack engines; the controller's Cap'n Proto RPC) is TLS in both
//! directions: a server accepts only clients presenting a certificate that
//! chains to the CA, and a client accepts only servers that do. Without
//! them the mesh talks plaintext, all-in-one's loopback default. A process
//! has one identity: it serves and dials with the same certificate.

use std::sync::Arc;

use tokio_rustls::rustls::{
    self,
    pki_types::{pem::PemObject as _, CertificateDer, PrivateKeyDer, ServerName},
};

use crate::config::Opt;
use crate::options::{TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE, TLS_SERVER_NAME};
use crate::Config;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("[keelson] {option}: cannot read {path}: {reason}")]
    Read { option: &'static str, path: String, reason: String },
    #[error("[keelson] mutual TLS needs tls_cert_file, tls_key_file and tls_ca_file together; missing: {0}")]
    Incomplete(String),
    #[error("TLS {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
}

fn invalid(what: &'static str) -> impl Fn(String) -> TlsError {
    move |reason| TlsError::Invalid { what, reason }
}

/// This process's TLS identity and the CA it trusts.
pub struct MeshTls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    ca_pem: Vec<u8>,
    server_name: Option<String>,
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for MeshTls {
    // Never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshTls").field("server_name", &self.server_name).finish_non_exhaustive()
    }
}

const FILE_OPTIONS: [&Opt<Option<String>>; 3] = [&TLS_CERT_FILE, &TLS_KEY_FILE, &TLS_CA_FILE];

impl MeshTls {
    /// The identity `[keelson]` configures; None when TLS is off (none of
    /// the three files set). Half a configuration is an error, not
    /// plaintext.
    pub fn from_config(config: &Config) -> Result<Option<Arc<MeshTls>>, TlsError> {
        let paths: Vec<(&'static str, Option<String>)> =
            FILE_OPTIONS.iter().map(|option| (option.name, config.get(option))).collect();
        if paths.iter().all(|(_, p)| p.is_none()) {
            return Ok(None);
        }
        let missing: Vec<&str> = paths.iter().filter(|(_, p)| p.is_none()).map(|(o, _)| *o).collect();
        if !missing.is_empty() {
            return Err(TlsError::Incomplete(missing.join(", ")));
        }
        let mut pems = Vec::with_capacity(3);
        for (option, path) in paths {
            let path = path.unwrap_or_default();
            pems.push(std::fs::read(&path).map_err(|e| TlsError::Read { option, path, reason: e.to_string() })?);
        }
        let server_name = config.get(&TLS_SERVER_NAME);
        let ca = pems.pop().unwrap_or_default();
        let key = pems.pop().unwrap_or_default();
        let cert = pems.pop().unwrap_or_default();
        Ok(Some(Arc::new(MeshTls::from_pem(cert, key, ca, server_name)?)))
    }

    /// An identity from PEM: `cert` (chain, leaf first), `key`, and the CA
    /// bundle peers must chain to.
    pub fn from_pem(
        cert: Vec<u8>,
        key: Vec<u8>,
        ca: Vec<u8>,
        server_name: Option<String>,
    ) -> Result<MeshTls, TlsError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert)
            .collect::<Result<_, _>>()
            .map_err(|e| invalid("certificate")(e.to_string()))?;
        if chain.is_empty() {
            return Err(invalid("certificate")("no PEM certificate found".into()));
        }
        let private_key = PrivateKeyDer::from_pem_slice(&key).map_err(|e| invalid("private key")(e.to_string()))?;
        let mut roots = rustls::RootCertStore::empty();
        for ca_cert in CertificateDer::pem_slice_iter(&ca) {
            let ca_cert = ca_cert.map_err(|e| invalid("CA")(e.to_string()))?;
            roots.add(ca_cert).map_err(|e| invalid("CA")(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(invalid("CA")("no PEM certificate found".into()));
        }
        if let Some(name) = &server_name {
            ServerName::try_from(name.clone()).map_err(|e| invalid("server name")(format!("{name:?}: {e}")))?;
        }
        let roots = Arc::new(roots);
        let verifier = rustls::server::WebPkiClientVerifier::builder(roots.clone())
            .build()
            .map_err(|e| invalid("CA")(e.to_string()))?;
        let server = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), private_key.clone_key())
            .map_err(|e| invalid("certificate and key")(e.to_string()))?;
        let client = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, private_key)
            .map_err(|e| invalid("certificate and key")(e.to_string()))?;
        Ok(MeshTls {
            cert_pem: cert,
            key_pem: key,
            ca_pem: ca,
            server_name,
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// For a tonic server: this identity, client certificates required.
    pub fn grpc_server(&self) -> tonic::transport::ServerTlsConfig {
        tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(&self.cert_pem, &self.key_pem))
            .client_ca_root(tonic::transport::Certificate::from_pem(&self.ca_pem))
    }

    /// For a tonic channel: the CA to verify the server, this identity to
    /// present.
    pub fn grpc_client(&self) -> tonic::transport::ClientTlsConfig {
        let config = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&self.ca_pem))
            .identity(tonic::transport::Identity::from_pem(&self.cert_pem, &self.key_pem));
        match &self.server_name {
            Some(name) => config.domain_name(name.clone()),
            None => config,
        }
    }

    /// Accepts TLS on a raw stream (the controller's RPC).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.server.clone())
    }

    /// Dials TLS on a raw stream (the controller's RPC).
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(self.client.clone())
    }

    /// The name to verify the server at `host` against: `tls_server_name`
    /// when set, else the host itself (a DNS name or an IP address).
    pub fn server_name(&self, host: &str) -> Result<ServerName<'static>, TlsError> {
        let name =
            self.server_name.clone().unwrap_or_else(|| host.trim_start_matches('[').trim_end_matches(']').to_string());
        ServerName::try_from(name.clone()).map_err(|e| invalid("server name")(format!("{name:?}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_files_means_plaintext_and_half_a_configuration_is_refused() {
        let mut config = Config::default();
        assert!(MeshTls::from_config(&config).unwrap().is_none());
        config.set("keelson", "tls_cert_file", "/nonexistent/cert.pem");
        match MeshTls::from_config(&config) {
            Err(TlsError::Incomplete(missing)) => assert_eq!(missing, "tls_key_file, tls_ca_file"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn garbage_pem_is_refused_with_what_is_wrong() {
        match MeshTls::from_pem(b"not a certificate".to_vec(), Vec::new(), Vec::new(), None) {
            Err(TlsError::Invalid { what: "certificate", .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}
