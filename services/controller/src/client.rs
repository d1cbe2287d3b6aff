//! The controller client: a Cap'n Proto transport and the failover wrapper
//! over a list of controller addresses.
//!
//! capnp-rpc is single-threaded, so the transport runs one background
//! thread per process that owns the connections (one per address, reused
//! across calls); callers talk to it through a channel, which keeps the
//! client's futures `Send` and usable from any runtime or task.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use capnp_rpc::{rpc_twoparty_capnp, twoparty, RpcSystem};
use futures::future::BoxFuture;
use keelson_capnp::controller_capnp::{conf_reply, controller, list_reply, status_reply, write_reply};
use keelson_runtime::tls::MeshTls;
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use crate::failover::{AttemptError, Failover, Step};
use crate::model::{ClusterConf, CtrlError, CtrlStatus, Registration, Request, Response, WriteAck};
use crate::wire;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no controller address given")]
    NoAddresses,
    /// Nothing answered at all.
    #[error("no controller answered within {elapsed:.1?} (tried {addresses}): {last}")]
    NoController { addresses: String, elapsed: Duration, last: String },
    /// Nodes answered, but none could serve the request before the deadline.
    #[error("timed out after {elapsed:.1?}: no controller could serve the request (last: {last})")]
    Timeout { elapsed: Duration, last: String },
    /// A definitive refusal.
    #[error("{0}")]
    Refused(CtrlError),
    #[error("the controller answered with an unexpected message")]
    Protocol,
}

/// How long a call may take.
#[derive(Debug, Clone, Copy)]
pub struct ClientOptions {
    /// The whole call, every retry included.
    pub deadline: Duration,
    /// One attempt at one node (connect + request + reply).
    pub attempt_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions { deadline: Duration::from_secs(5), attempt_timeout: Duration::from_secs(2) }
    }
}

/// One attempt at one address.
pub trait Transport: Send + Sync + 'static {
    fn send<'a>(
        &'a self,
        addr: &'a str,
        request: &'a Request,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Response, AttemptError>>;
}

/// The failover-aware client.
pub struct ControllerClient {
    addrs: Vec<String>,
    options: ClientOptions,
    /// Where the last successful call was answered; the next starts there.
    cursor: AtomicUsize,
    transport: Arc<dyn Transport>,
}

impl ControllerClient {
    /// A client over Cap'n Proto to these `host:port` addresses.
    pub fn new(addrs: Vec<String>, options: ClientOptions) -> ControllerClient {
        ControllerClient::with_transport(addrs, options, CapnpTransport::shared())
    }

    /// A client over Cap'n Proto, with mutual TLS when `tls` is given.
    pub fn with_tls(addrs: Vec<String>, options: ClientOptions, tls: Option<Arc<MeshTls>>) -> ControllerClient {
        match tls {
            None => ControllerClient::new(addrs, options),
            Some(tls) => ControllerClient::with_transport(addrs, options, CapnpTransport::with_tls(tls)),
        }
    }

    pub fn with_transport(
        addrs: Vec<String>,
        options: ClientOptions,
        transport: Arc<dyn Transport>,
    ) -> ControllerClient {
        ControllerClient { addrs, options, cursor: AtomicUsize::new(0), transport }
    }

    pub fn addresses(&self) -> &[String] {
        &self.addrs
    }

    /// Sends one request with failover (reads and writes as the policy in
    /// [`crate::failover`] says).
    pub async fn call(&self, request: Request) -> Result<Response, ClientError> {
        let start = Instant::now();
        let deadline = start + self.options.deadline;
        let mut policy =
            Failover::new(self.addrs.clone(), self.cursor.load(Ordering::Relaxed), request.opcode().is_write());
        let Some(mut addr) = policy.first() else {
            return Err(ClientError::NoAddresses);
        };
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(self.expired(&policy, start));
            }
            match self.transport.send(&addr, &request, self.options.attempt_timeout.min(remaining)).await {
                Ok(response) => {
                    if let Some(i) = self.addrs.iter().position(|a| *a == addr) {
                        self.cursor.store(i, Ordering::Relaxed);
                    }
                    return Ok(response);
                }
                Err(e) => {
                    tracing::debug!(target: "keelson::controller::client", "{addr}: {e:?}");
                    match policy.next(e) {
                        Step::Try(next) => addr = next,
                        Step::Backoff(wait, next) => {
                            let remaining = deadline.saturating_duration_since(Instant::now());
                            if remaining.is_zero() {
                                return Err(self.expired(&policy, start));
                            }
                            tokio::time::sleep(wait.min(remaining)).await;
                            addr = next;
                        }
                        Step::Fail(e) => return Err(ClientError::Refused(e)),
                    }
                }
            }
        }
    }

    fn expired(&self, policy: &Failover, start: Instant) -> ClientError {
        let last = match &policy.last {
            Some(AttemptError::Unreachable(m)) => m.clone(),
            Some(AttemptError::Refused(e)) => e.to_string(),
            None => "no attempt".into(),
        };
        if policy.answered {
            ClientError::Timeout { elapsed: start.elapsed(), last }
        } else {
            ClientError::NoController { addresses: self.addrs.join(","), elapsed: start.elapsed(), last }
        }
    }

    pub async fn ctrlstatus(&self) -> Result<CtrlStatus, ClientError> {
        match self.call(Request::CtrlStatus).await? {
            Response::CtrlStatus(s) => Ok(*s),
            _ => Err(ClientError::Protocol),
        }
    }

    pub async fn clusterconf(&self) -> Result<ClusterConf, ClientError> {
        match self.call(Request::ClusterConf).await? {
            Response::ClusterConf(c) => Ok(c),
            _ => Err(ClientError::Protocol),
        }
    }

    pub async fn setconf(&self, document: Vec<u8>) -> Result<WriteAck, ClientError> {
        self.write(Request::SetConf { document }).await
    }

    pub async fn register(&self, registration: Registration) -> Result<WriteAck, ClientError> {
        self.write(Request::Register(registration)).await
    }

    pub async fn heartbeat(&self, service: &str, instance: &str) -> Result<WriteAck, ClientError> {
        self.write(Request::Heartbeat { service: service.into(), instance: instance.into() }).await
    }

    pub async fn deregister(&self, service: &str, instance: &str) -> Result<WriteAck, ClientError> {
        self.write(Request::Deregister { service: service.into(), instance: instance.into() }).await
    }

    /// The live registrations of a service (all when empty).
    pub async fn list(&self, service: &str) -> Result<Vec<Registration>, ClientError> {
        match self.call(Request::List { service: service.into() }).await? {
            Response::List(l) => Ok(l),
            _ => Err(ClientError::Protocol),
        }
    }

    /// Whether an instance is registered and alive (the stack engine asks
    /// this about a lock holder).
    pub async fn is_registered(&self, service: &str, instance: &str) -> Result<bool, ClientError> {
        Ok(self.list(service).await?.iter().any(|r| r.instance == instance))
    }

    async fn write(&self, request: Request) -> Result<WriteAck, ClientError> {
        match self.call(request).await? {
            Response::Write(a) => Ok(a),
            _ => Err(ClientError::Protocol),
        }
    }
}

struct Job {
    addr: String,
    request: Request,
    timeout: Duration,
    reply: oneshot::Sender<Result<Response, AttemptError>>,
}

/// The Cap'n Proto transport (one background thread per process).
pub struct CapnpTransport {
    jobs: Option<mpsc::UnboundedSender<Job>>,
}

impl CapnpTransport {
    /// The process-wide transport.
    pub fn shared() -> Arc<dyn Transport> {
        static SHARED: OnceLock<Arc<CapnpTransport>> = OnceLock::new();
        SHARED.get_or_init(|| Arc::new(CapnpTransport { jobs: spawn_thread(None).ok() })).clone()
    }

    /// A transport of its own (its own thread and connections) dialing
    /// with mutual TLS.
    pub fn with_tls(tls: Arc<MeshTls>) -> Arc<dyn Transport> {
        Arc::new(CapnpTransport { jobs: spawn_thread(Some(tls)).ok() })
    }
}

impl Transport for CapnpTransport {
    fn send<'a>(
        &'a self,
        addr: &'a str,
        request: &'a Request,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Response, AttemptError>> {
        Box::pin(async move {
            let Some(jobs) = &self.jobs else {
                return Err(AttemptError::Unreachable("the controller client thread could not start".into()));
            };
            let (reply, answer) = oneshot::channel();
            let job = Job { addr: addr.to_string(), request: request.clone(), timeout, reply };
            if jobs.send(job).is_err() {
                return Err(AttemptError::Unreachable("the controller client thread stopped".into()));
            }
            answer.await.unwrap_or_else(|_| {
                Err(AttemptError::Unreachable("the controller client thread dropped the call".into()))
            })
        })
    }
}

type Connections = Rc<RefCell<HashMap<String, controller::Client>>>;

fn spawn_thread(tls: Option<Arc<MeshTls>>) -> std::io::Result<mpsc::UnboundedSender<Job>> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
    std::thread::Builder::new().name("controller-client".into()).spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                // Callers see their reply channel dropped: "unreachable".
                tracing::error!(target: "keelson::controller::client", "cannot start the client runtime: {e}");
                return;
            }
        };
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let conns: Connections = Rc::new(RefCell::new(HashMap::new()));
            while let Some(job) = rx.recv().await {
                let conns = conns.clone();
                let tls = tls.clone();
                tokio::task::spawn_local(async move {
                    let result = match tokio::time::timeout(
                        job.timeout,
                        attempt(&conns, tls.as_deref(), &job.addr, &job.request),
                    )
                    .await
                    {
                        Ok(r) => r,
                        Err(_) => {
                            // A frozen node: drop the connection, the next
                            // attempt reconnects.
                            conns.borrow_mut().remove(&job.addr);
                            Err(AttemptError::Unreachable(format!("{}: no answer within {:?}", job.addr, job.timeout)))
                        }
                    };
                    let _ = job.reply.send(result);
                });
            }
        });
    })?;
    Ok(tx)
}

async fn attempt(
    conns: &Connections,
    tls: Option<&MeshTls>,
    addr: &str,
    request: &Request,
) -> Result<Response, AttemptError> {
    let cached = conns.borrow().get(addr).cloned();
    if let Some(client) = cached {
        match call(&client, request).await {
            Ok(r) => return r.map_err(AttemptError::Refused),
            Err(e) => {
                // The cached connection died (the node restarted?): one
                // retry on a fresh connection before reporting failure.
                tracing::debug!(target: "keelson::controller::client", "{addr}: cached connection failed: {e}");
                conns.borrow_mut().remove(addr);
            }
        }
    }
    let client = connect(addr, tls).await?;
    conns.borrow_mut().insert(addr.to_string(), client.clone());
    match call(&client, request).await {
        Ok(r) => r.map_err(AttemptError::Refused),
        Err(e) => {
            conns.borrow_mut().remove(addr);
            Err(AttemptError::Unreachable(format!("{addr}: {e}")))
        }
    }
}

async fn connect(addr: &str, tls: Option<&MeshTls>) -> Result<controller::Client, AttemptError> {
    let unreachable = |e: &dyn std::fmt::Display| AttemptError::Unreachable(format!("{addr}: {e}"));
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| unreachable(&e))?;
    let _ = stream.set_nodelay(true);
    let Some(tls) = tls else {
        let (reader, writer) = stream.into_split();
        return Ok(bootstrap(reader.compat(), writer.compat_write()));
    };
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let name = tls.server_name(host).map_err(|e| unreachable(&e))?;
    let stream = tls.connector().connect(name, stream).await.map_err(|e| unreachable(&format!("TLS: {e}")))?;
    let (reader, writer) = tokio::io::split(stream);
    Ok(bootstrap(reader.compat(), writer.compat_write()))
}

/// The two-party network of one connection (either side), buffered.
pub(crate) fn network<R, W>(
    reader: R,
    writer: W,
    side: rpc_twoparty_capnp::Side,
) -> Box<twoparty::VatNetwork<futures::io::BufReader<R>>>
where
    R: futures::AsyncRead + Unpin + 'static,
    W: futures::AsyncWrite + Unpin + 'static,
{
    Box::new(twoparty::VatNetwork::new(
        futures::io::BufReader::new(reader),
        futures::io::BufWriter::new(writer),
        side,
        Default::default(),
    ))
}

/// Starts the RPC system of a new connection; answers the controller
/// capability it offers.
fn bootstrap<R, W>(reader: R, writer: W) -> controller::Client
where
    R: futures::AsyncRead + Unpin + 'static,
    W: futures::AsyncWrite + Unpin + 'static,
{
    let mut rpc = RpcSystem::new(network(reader, writer, rpc_twoparty_capnp::Side::Client), None);
    let client: controller::Client = rpc.bootstrap(rpc_twoparty_capnp::Side::Server);
    tokio::task::spawn_local(async move {
        let _ = rpc.await;
    });
    client
}

/// One request on one connection. Outer error: transport; inner: refusal.
async fn call(client: &controller::Client, request: &Request) -> Result<Result<Response, CtrlError>, capnp::Error> {
    Ok(match request {
        Request::CtrlStatus => {
            let answer = client.ctrlstatus_request().send().promise.await?;
            match answer.get()?.get_reply()?.which()? {
                status_reply::Ok(s) => Ok(Response::CtrlStatus(Box::new(wire::read_status(s?)?))),
                status_reply::Err(e) => Err(wire::read_error(e?)?),
            }
        }
        Request::ClusterConf => {
            let answer = client.clusterconf_request().send().promise.await?;
            match answer.get()?.get_reply()?.which()? {
                conf_reply::Ok(c) => Ok(Response::ClusterConf(wire::read_conf(c?)?)),
                conf_reply::Err(e) => Err(wire::read_error(e?)?),
            }
        }
        Request::SetConf { document } => {
            let mut req = client.setconf_request();
            req.get().set_document(document);
            write_answer(req.send().promise.await?.get()?.get_reply()?)?
        }
        Request::Register(r) => {
            let mut req = client.register_request();
            wire::write_registration(req.get().init_registration(), r);
            write_answer(req.send().promise.await?.get()?.get_reply()?)?
        }
        Request::Heartbeat { service, instance } => {
            let mut req = client.heartbeat_request();
            req.get().set_service(service.as_str());
            req.get().set_instance(instance.as_str());
            write_answer(req.send().promise.await?.get()?.get_reply()?)?
        }
        Request::Deregister { service, instance } => {
            let mut req = client.deregister_request();
            req.get().set_service(service.as_str());
            req.get().set_instance(instance.as_str());
            write_answer(req.send().promise.await?.get()?.get_reply()?)?
        }
        Request::List { service } => {
            let mut req = client.list_request();
            req.get().set_service(service.as_str());
            let answer = req.send().promise.await?;
            match answer.get()?.get_reply()?.which()? {
                list_reply::Ok(items) => {
                    let mut out = Vec::new();
                    for r in items?.iter() {
                        out.push(wire::read_registration(r)?);
                    }
                    Ok(Response::List(out))
                }
                list_reply::Err(e) => Err(wire::read_error(e?)?),
            }
        }
    })
}

fn write_answer(reply: write_reply::Reader<'_>) -> Result<Result<Response, CtrlError>, capnp::Error> {
    Ok(match reply.which()? {
        write_reply::Ok(a) => Ok(Response::Write(wire::read_ack(a?))),
        write_reply::Err(e) => Err(wire::read_error(e?)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PrimaryRef, Role};
    use std::sync::Mutex;

    type Script = Box<dyn Fn(&str, &Request) -> Result<Response, AttemptError> + Send + Sync>;

    /// Each address answers from a script; records the attempts.
    struct Fake {
        script: Script,
        attempts: Mutex<Vec<String>>,
    }

    impl Transport for Fake {
        fn send<'a>(
            &'a self,
            addr: &'a str,
            request: &'a Request,
            _: Duration,
        ) -> BoxFuture<'a, Result<Response, AttemptError>> {
            self.attempts.lock().unwrap().push(addr.to_string());
            let r = (self.script)(addr, request);
            Box::pin(async move { r })
        }
    }

    fn fake(f: impl Fn(&str, &Request) -> Result<Response, AttemptError> + Send + Sync + 'static) -> Arc<Fake> {
        Arc::new(Fake { script: Box::new(f), attempts: Mutex::new(Vec::new()) })
    }

    fn status(name: &str) -> Response {
        Response::CtrlStatus(Box::new(CtrlStatus {
            cluster_name: "k".into(),
            primary: None,
            responder_name: name.into(),
            responder_role: Role::Standby,
            term: 1,
            config_version: 0,
            config_checksum: vec![],
            committed_lsn: 0,
            applied_lsn: 0,
            fenced: false,
            peers: vec![],
            quorum: true,
        }))
    }

    fn addrs() -> Vec<String> {
        vec!["a:1".into(), "b:2".into(), "c:3".into()]
    }

    fn quick() -> ClientOptions {
        ClientOptions { deadline: Duration::from_millis(300), attempt_timeout: Duration::from_millis(100) }
    }

    #[tokio::test]
    async fn reads_rotate_to_a_node_that_answers_and_stick_to_it() {
        let t = fake(|addr, _| match addr {
            "a:1" => Err(AttemptError::Unreachable("refused".into())),
            "b:2" => Err(AttemptError::Refused(CtrlError::NotReady("electing".into()))),
            _ => Ok(status(addr)),
        });
        let c = ControllerClient::with_transport(addrs(), quick(), t.clone());
        assert_eq!(c.ctrlstatus().await.unwrap().responder_name, "c:3");
        assert_eq!(*t.attempts.lock().unwrap(), vec!["a:1", "b:2", "c:3"]);
        c.ctrlstatus().await.unwrap();
        assert_eq!(t.attempts.lock().unwrap().last().map(String::as_str), Some("c:3"), "starts where it succeeded");
        assert_eq!(t.attempts.lock().unwrap().len(), 4);
    }

    #[tokio::test]
    async fn writes_follow_the_primary_hint() {
        let t = fake(|addr, _| match addr {
            "c:3" => Ok(Response::Write(WriteAck { term: 4, lsn: 9 })),
            _ => Err(AttemptError::Refused(CtrlError::Standby {
                primary: Some(PrimaryRef { name: "c3".into(), address: "c:3".into() }),
            })),
        });
        let c = ControllerClient::with_transport(addrs(), quick(), t.clone());
        assert_eq!(c.setconf(b"{}".to_vec()).await.unwrap(), WriteAck { term: 4, lsn: 9 });
        assert_eq!(*t.attempts.lock().unwrap(), vec!["a:1", "c:3"]);
    }

    #[tokio::test]
    async fn nothing_answers_is_no_controller() {
        let t = fake(|_, _| Err(AttemptError::Unreachable("connection refused".into())));
        let c = ControllerClient::with_transport(addrs(), quick(), t.clone());
        let started = Instant::now();
        let e = c.ctrlstatus().await.unwrap_err();
        assert!(matches!(e, ClientError::NoController { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(t.attempts.lock().unwrap().len() >= 3, "every node tried");
    }

    #[tokio::test]
    async fn no_node_able_to_serve_is_a_timeout() {
        let t = fake(|_, _| Err(AttemptError::Refused(CtrlError::NotReady("electing".into()))));
        let c = ControllerClient::with_transport(addrs(), quick(), t);
        assert!(matches!(c.clusterconf().await.unwrap_err(), ClientError::Timeout { .. }));
    }

    #[tokio::test]
    async fn definitive_refusals_come_back_at_once() {
        let t = fake(|_, _| Err(AttemptError::Refused(CtrlError::NoQuorum)));
        let c = ControllerClient::with_transport(addrs(), quick(), t.clone());
        assert!(matches!(c.setconf(b"{}".to_vec()).await.unwrap_err(), ClientError::Refused(CtrlError::NoQuorum)));
        assert_eq!(t.attempts.lock().unwrap().len(), 1);
        let c = ControllerClient::with_transport(vec![], quick(), t);
        assert!(matches!(c.ctrlstatus().await.unwrap_err(), ClientError::NoAddresses));
    }
}
