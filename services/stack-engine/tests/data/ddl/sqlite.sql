CREATE TABLE IF NOT EXISTS orchestration_schema (
  version INTEGER NOT NULL,
  PRIMARY KEY (version)
);

CREATE TABLE IF NOT EXISTS raw_template (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  template TEXT NOT NULL,
  files TEXT,
  environment TEXT,
  created_at DATETIME,
  updated_at DATETIME
);

CREATE TABLE IF NOT EXISTS stack (
  id VARCHAR(36) NOT NULL,
  name VARCHAR(255) NOT NULL,
  raw_template_id INTEGER,
  prev_raw_template_id INTEGER,
  tenant VARCHAR(64),
  username VARCHAR(255),
  user_id VARCHAR(64),
  owner_id VARCHAR(36),
  parent_resource_name VARCHAR(255),
  timeout_mins INTEGER,
  disable_rollback INTEGER NOT NULL,
  nested_depth INTEGER NOT NULL,
  stack_user_project_id VARCHAR(64),
  tags TEXT,
  params TEXT,
  current_traversal VARCHAR(36) NOT NULL DEFAULT '',
  current_deps TEXT,
  action VARCHAR(32),
  status VARCHAR(32),
  status_reason TEXT,
  created_at DATETIME,
  updated_at DATETIME,
  deleted_at DATETIME,
  PRIMARY KEY (id)
);

CREATE INDEX IF NOT EXISTS ix_stack_tenant_name ON stack (tenant, name);

CREATE INDEX IF NOT EXISTS ix_stack_owner_id ON stack (owner_id);

CREATE TABLE IF NOT EXISTS resource (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  uuid VARCHAR(36) NOT NULL,
  stack_id VARCHAR(36) NOT NULL,
  root_stack_id VARCHAR(36) NOT NULL,
  name VARCHAR(255) NOT NULL,
  resource_type VARCHAR(255) NOT NULL,
  physical_resource_id VARCHAR(255),
  rsrc_metadata TEXT,
  properties_data TEXT,
  attr_data TEXT,
  engine_id VARCHAR(36),
  atomic_key INTEGER NOT NULL DEFAULT 0,
  requires TEXT,
  replaces INTEGER,
  replaced_by INTEGER,
  current_template_id INTEGER,
  action VARCHAR(32),
  status VARCHAR(32),
  status_reason TEXT,
  created_at DATETIME,
  updated_at DATETIME,
  CONSTRAINT uq_resource_uuid UNIQUE (uuid)
);

CREATE INDEX IF NOT EXISTS ix_resource_stack_id ON resource (stack_id);

CREATE INDEX IF NOT EXISTS ix_resource_engine_id ON resource (engine_id);

CREATE TABLE IF NOT EXISTS resource_data (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  resource_id INTEGER NOT NULL,
  data_key VARCHAR(255) NOT NULL,
  data_value TEXT,
  redact INTEGER NOT NULL DEFAULT 0,
  created_at DATETIME,
  updated_at DATETIME,
  CONSTRAINT uq_resource_data_key UNIQUE (resource_id, data_key)
);

CREATE TABLE IF NOT EXISTS sync_point (
  entity_id VARCHAR(36) NOT NULL,
  traversal_id VARCHAR(36) NOT NULL,
  is_update INTEGER NOT NULL,
  stack_id VARCHAR(36) NOT NULL,
  required INTEGER NOT NULL,
  satisfied INTEGER NOT NULL DEFAULT 0,
  extra_data TEXT,
  created_at DATETIME,
  updated_at DATETIME,
  PRIMARY KEY (entity_id, traversal_id, is_update)
);

CREATE INDEX IF NOT EXISTS ix_sync_point_stack ON sync_point (stack_id, traversal_id);

CREATE TABLE IF NOT EXISTS sync_point_input (
  entity_id VARCHAR(36) NOT NULL,
  traversal_id VARCHAR(36) NOT NULL,
  is_update INTEGER NOT NULL,
  predecessor VARCHAR(64) NOT NULL,
  input_data TEXT,
  PRIMARY KEY (entity_id, traversal_id, is_update, predecessor)
);

CREATE INDEX IF NOT EXISTS ix_sync_point_input_traversal ON sync_point_input (traversal_id);

CREATE TABLE IF NOT EXISTS event (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  uuid VARCHAR(36) NOT NULL,
  stack_id VARCHAR(36) NOT NULL,
  resource_name VARCHAR(255),
  physical_resource_id VARCHAR(255),
  resource_action VARCHAR(32),
  resource_status VARCHAR(32),
  resource_status_reason TEXT,
  resource_type VARCHAR(255),
  resource_properties TEXT,
  created_at DATETIME,
  CONSTRAINT uq_event_uuid UNIQUE (uuid)
);

CREATE INDEX IF NOT EXISTS ix_event_stack_id ON event (stack_id, id);

CREATE TABLE IF NOT EXISTS service (
  id VARCHAR(36) NOT NULL,
  engine_id VARCHAR(36) NOT NULL,
  host VARCHAR(255),
  hostname VARCHAR(255),
  binary_name VARCHAR(255),
  topic VARCHAR(255),
  report_interval INTEGER,
  worker_endpoint VARCHAR(255),
  created_at DATETIME,
  updated_at DATETIME,
  deleted_at DATETIME,
  PRIMARY KEY (id),
  CONSTRAINT uq_service_engine_id UNIQUE (engine_id)
);

CREATE TABLE IF NOT EXISTS software_config (
  id VARCHAR(36) NOT NULL,
  name VARCHAR(255),
  "group" VARCHAR(255),
  config TEXT,
  tenant VARCHAR(64) NOT NULL,
  created_at DATETIME,
  updated_at DATETIME,
  PRIMARY KEY (id)
);

CREATE INDEX IF NOT EXISTS ix_software_config_tenant ON software_config (tenant);

CREATE TABLE IF NOT EXISTS software_deployment (
  id VARCHAR(36) NOT NULL,
  config_id VARCHAR(36) NOT NULL,
  server_id VARCHAR(255) NOT NULL,
  input_values TEXT,
  output_values TEXT,
  tenant VARCHAR(64) NOT NULL,
  stack_user_project_id VARCHAR(64),
  action VARCHAR(255),
  status VARCHAR(255),
  status_reason TEXT,
  created_at DATETIME,
  updated_at DATETIME,
  PRIMARY KEY (id)
);

CREATE INDEX IF NOT EXISTS ix_software_deployment_tenant ON software_deployment (tenant);

CREATE INDEX IF NOT EXISTS ix_software_deployment_server_id ON software_deployment (server_id);

CREATE TABLE IF NOT EXISTS signing_key (
  name VARCHAR(64) NOT NULL,
  secret VARCHAR(255) NOT NULL,
  created_at DATETIME,
  PRIMARY KEY (name)
);

CREATE TABLE IF NOT EXISTS watchdog_retrigger (
  stack_id VARCHAR(36) NOT NULL,
  retriggers INTEGER NOT NULL,
  stuck_traversal VARCHAR(36) NOT NULL,
  started_traversal VARCHAR(36),
  updated_at DATETIME,
  PRIMARY KEY (stack_id)
);

CREATE TABLE IF NOT EXISTS user_creds (
  stack_id VARCHAR(36) NOT NULL,
  trust_id TEXT NOT NULL,
  trustor_user_id VARCHAR(64) NOT NULL,
  tenant_id VARCHAR(64) NOT NULL,
  decrypt_method VARCHAR(64) NOT NULL,
  created_at DATETIME,
  PRIMARY KEY (stack_id)
);

CREATE TABLE IF NOT EXISTS snapshot (
  id VARCHAR(36) NOT NULL,
  name VARCHAR(255),
  stack_id VARCHAR(36) NOT NULL,
  tenant VARCHAR(64) NOT NULL,
  data TEXT,
  action VARCHAR(32),
  status VARCHAR(32),
  status_reason TEXT,
  created_at DATETIME,
  updated_at DATETIME,
  PRIMARY KEY (id)
);

CREATE INDEX IF NOT EXISTS ix_snapshot_stack_id ON snapshot (stack_id);
