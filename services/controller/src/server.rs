//! The Cap'n Proto RPC server over TCP.
//!
//! capnp-rpc is single-threaded (`Rc`), so the server runs on a dedicated
//! thread with a current-thread runtime. `ctrlstatus` is answered there
//! directly from a snapshot (it must stay cheap and never wait on etcd);
//! every other request is handed to the node on the main runtime, where
//! the etcd client lives.

use std::sync::Arc;

use capnp::capability::Rc;
use capnp_rpc::{rpc_twoparty_capnp, RpcSystem};
use keelson_capnp::controller_capnp::controller;
use keelson_runtime::shutdown::Shutdown;
use tokio::net::TcpListener;
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use crate::model::{CtrlError, Registration, Request, Response};
use crate::node::Controller;
use crate::wire;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("controller RPC listener: {0}")]
    Io(#[from] std::io::Error),
    #[error("the controller RPC thread stopped unexpectedly")]
    Thread,
}

struct RpcServer {
    ctl: Arc<Controller>,
    main: tokio::runtime::Handle,
}

impl RpcServer {
    async fn call(&self, request: Request) -> Result<Response, CtrlError> {
        if request == Request::CtrlStatus {
            return self.ctl.handle(request).await;
        }
        let ctl = self.ctl.clone();
        match self.main.spawn(async move { ctl.handle(request).await }).await {
            Ok(r) => r,
            Err(e) => Err(CtrlError::Internal(format!("request task failed: {e}"))),
        }
    }
}

fn mismatch() -> CtrlError {
    CtrlError::Internal("unexpected response kind".into())
}

impl controller::Server for RpcServer {
    async fn ctrlstatus(
        self: Rc<Self>,
        _: controller::CtrlstatusParams,
        mut results: controller::CtrlstatusResults,
    ) -> Result<(), capnp::Error> {
        let out = self.call(Request::CtrlStatus).await;
        let reply = results.get().init_reply();
        match out {
            Ok(Response::CtrlStatus(s)) => wire::write_status(reply.init_ok(), &s)?,
            Ok(_) => wire::write_error(reply.init_err(), &mismatch()),
            Err(e) => wire::write_error(reply.init_err(), &e),
        }
        Ok(())
    }

    async fn clusterconf(
        self: Rc<Self>,
        _: controller::ClusterconfParams,
        mut results: controller::ClusterconfResults,
    ) -> Result<(), capnp::Error> {
        let out = self.call(Request::ClusterConf).await;
        let reply = results.get().init_reply();
        match out {
            Ok(Response::ClusterConf(c)) => wire::write_conf(reply.init_ok(), &c),
            Ok(_) => wire::write_error(reply.init_err(), &mismatch()),
            Err(e) => wire::write_error(reply.init_err(), &e),
        }
        Ok(())
    }

    async fn setconf(
        self: Rc<Self>,
        params: controller::SetconfParams,
        results: controller::SetconfResults,
    ) -> Result<(), capnp::Error> {
        let document = params.get()?.get_document()?.to_vec();
        let out = self.call(Request::SetConf { document }).await;
        write_reply(results, out);
        Ok(())
    }

    async fn register(
        self: Rc<Self>,
        params: controller::RegisterParams,
        results: controller::RegisterResults,
    ) -> Result<(), capnp::Error> {
        let registration: Registration = wire::read_registration(params.get()?.get_registration()?)?;
        let out = self.call(Request::Register(registration)).await;
        write_reply(results, out);
        Ok(())
    }

    async fn heartbeat(
        self: Rc<Self>,
        params: controller::HeartbeatParams,
        results: controller::HeartbeatResults,
    ) -> Result<(), capnp::Error> {
        let p = params.get()?;
        let request = Request::Heartbeat {
            service: p.get_service()?.to_str()?.to_string(),
            instance: p.get_instance()?.to_str()?.to_string(),
        };
        let out = self.call(request).await;
        write_reply(results, out);
        Ok(())
    }

    async fn deregister(
        self: Rc<Self>,
        params: controller::DeregisterParams,
        results: controller::DeregisterResults,
    ) -> Result<(), capnp::Error> {
        let p = params.get()?;
        let request = Request::Deregister {
            service: p.get_service()?.to_str()?.to_string(),
            instance: p.get_instance()?.to_str()?.to_string(),
        };
        let out = self.call(request).await;
        write_reply(results, out);
        Ok(())
    }

    async fn list(
        self: Rc<Self>,
        params: controller::ListParams,
        mut results: controller::ListResults,
    ) -> Result<(), capnp::Error> {
        let service = params.get()?.get_service()?.to_str()?.to_string();
        let out = self.call(Request::List { service }).await;
        let reply = results.get().init_reply();
        match out {
            Ok(Response::List(items)) => {
                let count = wire::list_len(items.len())?;
                let mut list = reply.init_ok(count);
                for (i, r) in (0..count).zip(&items) {
                    wire::write_registration(list.reborrow().get(i), r);
                }
            }
            Ok(_) => wire::write_error(reply.init_err(), &mismatch()),
            Err(e) => wire::write_error(reply.init_err(), &e),
        }
        Ok(())
    }
}

/// The write methods all answer a `WriteReply`.
trait WriteResults {
    fn reply(&mut self) -> keelson_capnp::controller_capnp::write_reply::Builder<'_>;
}

macro_rules! write_results {
    ($($t:ty),*) => {$(
        impl WriteResults for $t {
            fn reply(&mut self) -> keelson_capnp::controller_capnp::write_reply::Builder<'_> {
                self.get().init_reply()
            }
        }
    )*};
}
write_results!(
    controller::SetconfResults,
    controller::RegisterResults,
    controller::HeartbeatResults,
    controller::DeregisterResults
);

fn write_reply(mut results: impl WriteResults, out: Result<Response, CtrlError>) {
    let reply = results.reply();
    match out {
        Ok(Response::Write(a)) => wire::write_ack(reply.init_ok(), &a),
        Ok(_) => wire::write_error(reply.init_err(), &mismatch()),
        Err(e) => wire::write_error(reply.init_err(), &e),
    }
}

/// Serves the controller's RPC on `listener` until shutdown.
pub async fn serve(ctl: Arc<Controller>, listener: TcpListener, shutdown: Shutdown) -> Result<(), ServeError> {
    // Moved to the RPC thread's runtime.
    let listener = listener.into_std()?;
    let main = tokio::runtime::Handle::current();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new().name("controller-rpc".into()).spawn(move || {
        let result = (|| -> Result<(), ServeError> {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, accept_loop(ctl, listener, main, shutdown))
        })();
        let _ = done_tx.send(result);
    })?;
    done_rx.await.unwrap_or(Err(ServeError::Thread))
}

async fn accept_loop(
    ctl: Arc<Controller>,
    listener: std::net::TcpListener,
    main: tokio::runtime::Handle,
    shutdown: Shutdown,
) -> Result<(), ServeError> {
    let listener = TcpListener::from_std(listener)?;
    let tls = ctl.settings().tls.as_ref().map(|t| t.acceptor());
    let bootstrap: controller::Client = capnp_rpc::new_client(RpcServer { ctl, main });
    loop {
        let accepted = tokio::select! {
            _ = shutdown.clone().wait() => return Ok(()),
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                // Out of descriptors and the like: keep serving the
                // connections we have and try again shortly.
                tracing::warn!(target: "keelson::controller", "accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let bootstrap = bootstrap.clone();
        let tls = tls.clone();
        // The handshake runs in the connection's task, so a slow or
        // hostile client never holds up the accept loop.
        tokio::task::spawn_local(async move {
            let outcome = match tls {
                None => {
                    let (reader, writer) = stream.into_split();
                    serve_connection(reader.compat(), writer.compat_write(), bootstrap).await
                }
                Some(acceptor) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls_stream)) => {
                        let (reader, writer) = tokio::io::split(tls_stream);
                        serve_connection(reader.compat(), writer.compat_write(), bootstrap).await
                    }
                    Ok(Err(e)) => {
                        tracing::info!(target: "keelson::controller", "TLS handshake with {peer} refused: {e}");
                        return;
                    }
                    Err(_) => {
                        tracing::info!(target: "keelson::controller", "TLS handshake with {peer} timed out");
                        return;
                    }
                },
            };
            if let Err(e) = outcome {
                tracing::debug!(target: "keelson::controller", "RPC connection from {peer} ended: {e}");
            }
        });
    }
}

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs the RPC system of one accepted connection until it closes.
async fn serve_connection<R, W>(reader: R, writer: W, bootstrap: controller::Client) -> Result<(), capnp::Error>
where
    R: futures::AsyncRead + Unpin + 'static,
    W: futures::AsyncWrite + Unpin + 'static,
{
    let network = crate::client::network(reader, writer, rpc_twoparty_capnp::Side::Server);
    RpcSystem::new(network, Some(bootstrap.client)).await
}
