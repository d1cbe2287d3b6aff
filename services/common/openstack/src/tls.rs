//! https for the OpenStack clients: keystoneauth's TLS settings of one
//! client ([`TlsSettings`]: `ca_file`, `cert_file`, `key_file`,
//! `insecure`), the rustls client configuration they make, and the
//! connector [`crate::http::HttpClient`]'s pool dials with (plain TCP for
//! `http://`, TLS over it for `https://`).
//!
//! Trust follows requests' `verify`: the operator's CA file when one is
//! given (it replaces the system's CAs, as `verify=<cafile>` does), else
//! the system's CA bundle (`SSL_CERT_FILE`, else the distribution's
//! bundle), read once per process. `insecure` accepts any server
//! certificate (signatures are still checked, names and chains are not).
//! A handshake that fails is a [`TlsHandshakeError`] inside the client's
//! connection error, so the transport can tell it from a refused
//! connection (it is not retried) and word it as keystoneauth does.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::{
    self,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::CryptoProvider,
    pki_types::{pem::PemObject as _, CertificateDer, PrivateKeyDer, ServerName, UnixTime},
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_rustls::TlsConnector;

/// How one client verifies servers and presents itself (keystoneauth's
/// session arguments `verify` and `cert`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM CA certificates servers must chain to (None: the system's).
    pub ca_file: Option<PathBuf>,
    /// A PEM client certificate (chain, leaf first); alone, the file holds
    /// the private key too.
    pub cert_file: Option<PathBuf>,
    /// The client certificate's PEM private key.
    pub key_file: Option<PathBuf>,
    /// Do not verify servers' certificates.
    pub insecure: bool,
}

/// TLS settings that cannot be used (a process refuses to start on them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsSetupError {
    #[error("cannot read {what} {path}: {reason}")]
    Read { what: &'static str, path: String, reason: String },
    #[error("{what} {path}: {reason}")]
    Invalid { what: &'static str, path: String, reason: String },
}

/// A TLS handshake that failed: an unknown CA, a name the certificate does
/// not hold, a server that wants a client certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsHandshakeError(pub String);

/// Where distributions keep the system's CA bundle (Debian, Fedora, SUSE,
/// Alpine's is Debian's path).
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The configuration of a client without TLS settings (the system's CAs,
/// verification on), made once.
pub(crate) fn default_config() -> Result<Arc<ClientConfig>, TlsSetupError> {
    static DEFAULT: OnceLock<Result<Arc<ClientConfig>, TlsSetupError>> = OnceLock::new();
    DEFAULT.get_or_init(|| TlsSettings::default().client_config()).clone()
}

/// The system's CA certificates, read once. None found leaves the store
/// empty: every https server is then refused as of an unknown CA.
fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
            let mut roots = RootCertStore::empty();
            for path in env.iter().map(PathBuf::as_path).chain(SYSTEM_BUNDLES.iter().map(Path::new)) {
                if let Ok(pem) = std::fs::read(path) {
                    let (added, _) = roots.add_parsable_certificates(CertificateDer::pem_slice_iter(&pem).flatten());
                    if added > 0 {
                        tracing::debug!(target: "keelson::openstack", path = %path.display(), added, "system CAs");
                        break;
                    }
                }
            }
            if roots.is_empty() {
                tracing::warn!(target: "keelson::openstack", "no system CA bundle found: https needs a CA file");
            }
            Arc::new(roots)
        })
        .clone()
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsSetupError> {
    std::fs::read(path).map_err(|e| TlsSetupError::Read {
        what,
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn invalid(what: &'static str, path: &Path, reason: impl ToString) -> TlsSetupError {
    TlsSetupError::Invalid { what, path: path.display().to_string(), reason: reason.to_string() }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsSettings {
    /// The rustls configuration these settings make; the files are read now.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsSetupError> {
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("TLS", Path::new("protocol versions"), e))?;
        let builder = if self.insecure {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
        } else {
            builder.with_root_certificates(self.roots()?)
        };
        let config = match self.client_identity()? {
            Some((chain, key, path)) => {
                builder.with_client_auth_cert(chain, key).map_err(|e| invalid("client certificate", &path, e))?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(Arc::new(config))
    }

    fn roots(&self) -> Result<Arc<RootCertStore>, TlsSetupError> {
        let Some(path) = &self.ca_file else {
            return Ok(system_roots());
        };
        let pem = read("CA file", path)?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.map_err(|e| invalid("CA file", path, e))?).map_err(|e| invalid("CA file", path, e))?;
        }
        if roots.is_empty() {
            return Err(invalid("CA file", path, "no PEM certificate found"));
        }
        Ok(Arc::new(roots))
    }

    /// The client certificate chain and key, with the file named in errors;
    /// a key file without a certificate is ignored, as keystoneauth does.
    #[allow(clippy::type_complexity)]
    fn client_identity(
        &self,
    ) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, PathBuf)>, TlsSetupError> {
        let Some(cert_path) = &self.cert_file else {
            return Ok(None);
        };
        let cert_pem = read("certificate file", cert_path)?;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| invalid("certificate file", cert_path, e))?;
        if chain.is_empty() {
            return Err(invalid("certificate file", cert_path, "no PEM certificate found"));
        }
        let (key_pem, key_path) = match &self.key_file {
            Some(key_path) => (read("key file", key_path)?, key_path),
            None => (cert_pem, cert_path),
        };
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| invalid("key file", key_path, e))?;
        Ok(Some((chain, key, cert_path.clone())))
    }
}

/// `insecure`: any certificate names any server, but the handshake's
/// signatures are still checked (the session is still encrypted to the
/// key the server presented).
#[derive(Debug)]
struct AnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The pool's connector: TCP (hyper's connector, its timeouts and
/// options), then TLS for an `https` URI.
#[derive(Clone)]
pub(crate) struct Connector {
    tcp: HttpConnector,
    /// An unusable configuration fails https connections, not the client.
    tls: Result<TlsConnector, TlsSetupError>,
}

impl Connector {
    pub(crate) fn new(mut tcp: HttpConnector, config: Result<Arc<ClientConfig>, TlsSetupError>) -> Connector {
        // The scheme is ours to handle: hyper's connector would refuse https.
        tcp.enforce_http(false);
        Connector { tcp, tls: config.map(TlsConnector::from) }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for Connector {
    type Response = Stream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        // An IPv6 literal comes bracketed.
        let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
        let connecting = self.tcp.call(uri);
        let tls = self.tls.clone();
        Box::pin(async move {
            let tcp = connecting.await?;
            if !https {
                return Ok(Stream::Plain(tcp));
            }
            let tls = tls.map_err(|e| TlsHandshakeError(e.to_string()))?;
            let name = ServerName::try_from(host.clone())
                .map_err(|e| TlsHandshakeError(format!("{host:?} is not a server name: {e}")))?;
            let stream = tls.connect(name, tcp.into_inner()).await.map_err(|e| TlsHandshakeError(e.to_string()))?;
            Ok(Stream::Tls(Box::new(TokioIo::new(stream))))
        })
    }
}

/// One connection of the pool.
pub(crate) enum Stream {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        match self {
            Stream::Plain(tcp) => tcp.inner().connected(),
            Stream::Tls(tls) => tls.inner().get_ref().0.connected(),
        }
    }
}

impl hyper::rt::Read for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The handshake failure inside a client error, if that is what it was.
pub(crate) fn handshake_failure<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a TlsHandshakeError> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(tls) = e.downcast_ref::<TlsHandshakeError>() {
            return Some(tls);
        }
        cause = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use http::Method;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;
    use crate::http::HttpClient;
    use crate::OsError;

    fn data(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
    }

    fn ca() -> TlsSettings {
        TlsSettings { ca_file: Some(data("ca.pem")), ..TlsSettings::default() }
    }

    /// A loopback https server presenting `name`.pem (signed by the test
    /// CA), asking for a client certificate of that CA when `client_auth`;
    /// every request is answered `{"ok": true}`. Its port.
    async fn serve(name: &str, client_auth: bool) -> u16 {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(data(&format!("{name}.pem"))).unwrap().collect::<Result<_, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_file(data(&format!("{name}.key"))).unwrap();
        let builder =
            rustls::ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().unwrap();
        let builder = if client_auth {
            let mut roots = RootCertStore::empty();
            roots.add(CertificateDer::from_pem_file(data("ca.pem")).unwrap()).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(builder.with_single_cert(chain, key).unwrap()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let body = r#"{"ok": true}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.write_all(answer.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        port
    }

    async fn get(client: &HttpClient, url: &str) -> Result<serde_json::Value, OsError> {
        client.send(Method::GET, url, &[], None).await?.json()
    }

    fn with(tls: &TlsSettings) -> HttpClient {
        HttpClient::default().with_tls(tls).unwrap()
    }

    /// With the operator's CA the server is trusted, by IP or by name.
    #[tokio::test]
    async fn a_server_of_the_configured_ca_is_trusted() {
        let port = serve("server", false).await;
        for host in ["127.0.0.1", "localhost"] {
            let answer = get(&with(&ca()), &format!("https://{host}:{port}/v3")).await.unwrap();
            assert_eq!(answer, serde_json::json!({"ok": true}), "{host}");
        }
    }

    /// Without it (the system's CAs) the server is refused, with
    /// keystoneauth's words, at once: a handshake is not retried.
    #[tokio::test]
    async fn an_unknown_ca_is_an_ssl_exception_not_retried() {
        let port = serve("server", false).await;
        let url = format!("https://127.0.0.1:{port}/v3");
        let client = HttpClient::new(Duration::from_secs(5), 3);
        let started = Instant::now();
        let e = get(&client, &url).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(400), "retried: {:?}", started.elapsed());
        let OsError::Unavailable(message) = &e else { panic!("{e:?}") };
        assert!(message.starts_with(&format!("SSL exception connecting to {url}: ")), "{message}");
        assert!(message.contains("UnknownIssuer"), "{message}");
    }

    /// `insecure` accepts a certificate of any CA.
    #[tokio::test]
    async fn insecure_skips_verification() {
        let port = serve("server", false).await;
        let insecure = TlsSettings { insecure: true, ..TlsSettings::default() };
        let answer = get(&with(&insecure), &format!("https://127.0.0.1:{port}/")).await.unwrap();
        assert_eq!(answer, serde_json::json!({"ok": true}));
    }

    /// A certificate of the right CA for another name is refused.
    #[tokio::test]
    async fn a_hostname_mismatch_is_refused() {
        let port = serve("other-name", false).await;
        let url = format!("https://localhost:{port}/");
        let e = get(&with(&ca()), &url).await.unwrap_err();
        let OsError::Unavailable(message) = &e else { panic!("{e:?}") };
        assert!(message.starts_with(&format!("SSL exception connecting to {url}: ")), "{message}");
        assert!(message.contains("certificate not valid for name \"localhost\""), "{message}");
    }

    /// A server that wants a client certificate gets the configured one:
    /// certificate and key in two files or in one.
    #[tokio::test]
    async fn a_client_certificate_is_presented() {
        let port = serve("server", true).await;
        let url = format!("https://127.0.0.1:{port}/");
        assert!(get(&with(&ca()), &url).await.is_err());
        let two_files = TlsSettings { cert_file: Some(data("client.pem")), key_file: Some(data("client.key")), ..ca() };
        assert_eq!(get(&with(&two_files), &url).await.unwrap(), serde_json::json!({"ok": true}));
        let dir = std::env::temp_dir().join(format!("keelson-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let combined = dir.join("client-and-key.pem");
        let mut pem = std::fs::read(data("client.pem")).unwrap();
        pem.extend(std::fs::read(data("client.key")).unwrap());
        std::fs::write(&combined, pem).unwrap();
        let one_file = TlsSettings { cert_file: Some(combined), ..ca() };
        assert_eq!(get(&with(&one_file), &url).await.unwrap(), serde_json::json!({"ok": true}));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A client name's own settings apply to that client only.
    #[tokio::test]
    async fn a_clients_own_settings_apply_to_it_alone() {
        let port = serve("server", false).await;
        let url = format!("https://127.0.0.1:{port}/");
        let http = HttpClient::default().with_client_tls("nova", &ca()).unwrap();
        assert!(get(&http.for_client("nova"), &url).await.is_ok());
        assert!(get(&http.for_client("neutron"), &url).await.is_err());
        assert!(get(&http, &url).await.is_err());
    }

    /// Settings that cannot work are refused when the client is made.
    #[test]
    fn unusable_files_are_setup_errors() {
        let missing = TlsSettings { ca_file: Some(data("missing.pem")), ..TlsSettings::default() };
        assert!(matches!(missing.client_config(), Err(TlsSetupError::Read { what: "CA file", .. })));
        let not_pem = TlsSettings { ca_file: Some(data("README.md")), ..TlsSettings::default() };
        assert!(matches!(not_pem.client_config(), Err(TlsSetupError::Invalid { what: "CA file", .. })));
        let no_key = TlsSettings { cert_file: Some(data("client.pem")), ..TlsSettings::default() };
        assert!(matches!(no_key.client_config(), Err(TlsSetupError::Invalid { what: "key file", .. })));
    }
}
