//! What Nova says of its compute nodes, servers and migrations, read over
//! its API for `keelson placement audit --nova-endpoint` (the judging is
//! `keelson_inventory::audit::nova`'s). Credentials come from the
//! environment as the `openstack` client reads them: `OS_AUTH_URL` with
//! `OS_TOKEN`, or with `OS_USERNAME`, `OS_PASSWORD`, `OS_PROJECT_NAME` and
//! the domains (`OS_USER_DOMAIN_NAME`, `OS_PROJECT_DOMAIN_NAME`, `Default`
//! when unset); https as `OS_CACERT`, `OS_CERT`, `OS_KEY` and `OS_INSECURE`
//! say. The user must be an admin: only admins list every
//! project's servers, the hypervisors and the migrations.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use anyhow::{bail, Context as _};
use http::Method;
use keelson_inventory::audit::nova::{Node, NovaView, FINISHED_MIGRATION_STATES};
use keelson_openstack::error::OsError;
use keelson_openstack::http::HttpClient;
use keelson_openstack::session::{AuthMethod, DomainRef, ProjectRef, Scope, Session, UserRef};
use serde_json::Value;

/// The compute API microversion asked for: hypervisor ids are compute node
/// uuids from 2.53, migrations carry their uuid and page from 2.59, and
/// 2.80 lists them for every project.
const COMPUTE_VERSION: &str = "compute 2.80";
/// Items per page (Nova's `[api] max_limit` is 1000 by default).
const PAGE: usize = 500;

/// Nova's API at `endpoint` (`http://nova:8774/v2.1`), authenticated from
/// the environment.
pub struct Nova {
    session: Session,
    endpoint: String,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Nova {
    pub fn from_env(endpoint: &str) -> anyhow::Result<Nova> {
        let Some(auth_url) = env("OS_AUTH_URL") else {
            bail!("--nova-endpoint needs OS_AUTH_URL and OS_TOKEN, or OS_USERNAME, OS_PASSWORD and OS_PROJECT_NAME");
        };
        let method = match (env("OS_TOKEN"), env("OS_USERNAME"), env("OS_PASSWORD"), env("OS_PROJECT_NAME")) {
            (Some(token), ..) => AuthMethod::Existing { token },
            (None, Some(name), Some(password), Some(project)) => {
                let domain = |var| DomainRef::Name(env(var).unwrap_or_else(|| "Default".into()));
                AuthMethod::Password {
                    user: UserRef::Name { name, domain: domain("OS_USER_DOMAIN_NAME") },
                    password,
                    scope: Scope::Project(ProjectRef::Name { name: project, domain: domain("OS_PROJECT_DOMAIN_NAME") }),
                }
            }
            _ => bail!("--nova-endpoint needs OS_TOKEN, or OS_USERNAME, OS_PASSWORD and OS_PROJECT_NAME"),
        };
        // openstackclient's TLS variables.
        let tls = keelson_openstack::TlsSettings {
            ca_file: env("OS_CACERT").map(Into::into),
            cert_file: env("OS_CERT").map(Into::into),
            key_file: env("OS_KEY").map(Into::into),
            insecure: env("OS_INSECURE")
                .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes")),
        };
        let http = HttpClient::new(Duration::from_secs(60), 2).with_tls(&tls)?;
        Ok(Nova { session: Session::new(http, &auth_url, method), endpoint: endpoint.trim_end_matches('/').into() })
    }

    async fn get(&self, url: &str) -> Result<Value, OsError> {
        self.session.call_with(Method::GET, url, &[("openstack-api-version", COMPUTE_VERSION)], None).await?.json()
    }

    /// Every item of a paged collection: `path` with `limit` and `marker`
    /// (the id, or for migrations the uuid, of the last item).
    async fn all(&self, path: &str, collection: &str, marker_key: &str) -> anyhow::Result<Vec<Value>> {
        let mut items: Vec<Value> = Vec::new();
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut marker: Option<String> = None;
        loop {
            let mut url = format!("{}{path}{sep}limit={PAGE}", self.endpoint);
            if let Some(m) = &marker {
                url.push_str(&format!("&marker={m}"));
            }
            let doc = self.get(&url).await.with_context(|| format!("GET {url}"))?;
            let page = match doc.get(collection) {
                Some(Value::Array(page)) => page.clone(),
                _ => bail!("GET {url}: no {collection} list in Nova's answer"),
            };
            let last = page.last().and_then(|item| item.get(marker_key)).and_then(Value::as_str).map(str::to_owned);
            let full = page.len() >= PAGE;
            items.extend(page);
            match last {
                // A marker that comes back again would loop for ever.
                Some(m) if full && marker.as_deref() != Some(m.as_str()) => marker = Some(m),
                _ => return Ok(items),
            }
        }
    }

    /// Nova's compute nodes, servers and in-progress migrations.
    pub async fn view(&self) -> anyhow::Result<NovaView> {
        let mut view = NovaView::default();
        for h in self.all("/os-hypervisors/detail", "hypervisors", "id").await? {
            let (Some(uuid), Some(name), Some(host)) =
                (text(&h, "id"), text(&h, "hypervisor_hostname"), h.get("service").and_then(|s| text(s, "host")))
            else {
                continue;
            };
            view.compute_nodes.insert(uuid, Node { host, name });
        }
        for s in self.all("/servers/detail?all_tenants=1", "servers", "id").await? {
            let Some(id) = text(&s, "id") else { continue };
            let node = match (text(&s, "OS-EXT-SRV-ATTR:host"), text(&s, "OS-EXT-SRV-ATTR:hypervisor_hostname")) {
                (Some(host), Some(name)) => Some(Node { host, name }),
                _ => None,
            };
            view.servers.insert(id, node);
        }
        for m in self.all("/os-migrations", "migrations", "uuid").await? {
            let (Some(uuid), Some(status)) = (text(&m, "uuid"), text(&m, "status")) else { continue };
            if FINISHED_MIGRATION_STATES.contains(&status.as_str()) {
                continue;
            }
            let mut nodes = Vec::new();
            for (host, node) in [("source_compute", "source_node"), ("dest_compute", "dest_node")] {
                if let (Some(host), Some(name)) = (text(&m, host), text(&m, node)) {
                    nodes.push(Node { host, name });
                }
            }
            view.migrations.insert(uuid, nodes);
        }
        Ok(view)
    }

    /// Those of `consumers` Nova still knows neither as a server nor as a
    /// migration in progress: asked one by one, just before a repair.
    pub async fn still_unknown(&self, consumers: &BTreeSet<String>) -> anyhow::Result<BTreeSet<String>> {
        if consumers.is_empty() {
            return Ok(BTreeSet::new());
        }
        let migrations: HashMap<String, NovaMigration> = self
            .all("/os-migrations", "migrations", "uuid")
            .await?
            .iter()
            .filter_map(|m| Some((text(m, "uuid")?, NovaMigration { status: text(m, "status")? })))
            .collect();
        let mut unknown = BTreeSet::new();
        for consumer in consumers {
            if migrations.get(consumer).is_some_and(|m| !FINISHED_MIGRATION_STATES.contains(&m.status.as_str())) {
                continue;
            }
            let url = format!("{}/servers/{consumer}", self.endpoint);
            match self.get(&url).await {
                Err(e) if e.is_not_found() => {
                    unknown.insert(consumer.clone());
                }
                Err(e) => return Err(e).with_context(|| format!("GET {url}")),
                Ok(_) => {}
            }
        }
        Ok(unknown)
    }
}

struct NovaMigration {
    status: String,
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}
