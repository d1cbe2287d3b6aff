CREATE TABLE IF NOT EXISTS orchestration_schema (
  version INTEGER NOT NULL,
  PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS raw_template (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  template LONGTEXT NOT NULL,
  files LONGTEXT,
  environment LONGTEXT,
  created_at DATETIME(6),
  updated_at DATETIME(6)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

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
  tags LONGTEXT,
  params LONGTEXT,
  current_traversal VARCHAR(36) NOT NULL DEFAULT '',
  current_deps LONGTEXT,
  action VARCHAR(32),
  status VARCHAR(32),
  status_reason LONGTEXT,
  created_at DATETIME(6),
  updated_at DATETIME(6),
  deleted_at DATETIME(6),
  PRIMARY KEY (id),
  INDEX ix_stack_tenant_name (tenant, name),
  INDEX ix_stack_owner_id (owner_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS resource (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  uuid VARCHAR(36) NOT NULL,
  stack_id VARCHAR(36) NOT NULL,
  root_stack_id VARCHAR(36) NOT NULL,
  name VARCHAR(255) NOT NULL,
  resource_type VARCHAR(255) NOT NULL,
  physical_resource_id VARCHAR(255),
  rsrc_metadata LONGTEXT,
  properties_data LONGTEXT,
  attr_data LONGTEXT,
  engine_id VARCHAR(36),
  atomic_key INTEGER NOT NULL DEFAULT 0,
  requires LONGTEXT,
  replaces INTEGER,
  replaced_by INTEGER,
  current_template_id INTEGER,
  action VARCHAR(32),
  status VARCHAR(32),
  status_reason LONGTEXT,
  created_at DATETIME(6),
  updated_at DATETIME(6),
  CONSTRAINT uq_resource_uuid UNIQUE (uuid),
  INDEX ix_resource_stack_id (stack_id),
  INDEX ix_resource_engine_id (engine_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS resource_data (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  resource_id INTEGER NOT NULL,
  data_key VARCHAR(255) NOT NULL,
  data_value LONGTEXT,
  redact INTEGER NOT NULL DEFAULT 0,
  created_at DATETIME(6),
  updated_at DATETIME(6),
  CONSTRAINT uq_resource_data_key UNIQUE (resource_id, data_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS sync_point (
  entity_id VARCHAR(36) NOT NULL,
  traversal_id VARCHAR(36) NOT NULL,
  is_update INTEGER NOT NULL,
  stack_id VARCHAR(36) NOT NULL,
  required INTEGER NOT NULL,
  satisfied INTEGER NOT NULL DEFAULT 0,
  extra_data LONGTEXT,
  created_at DATETIME(6),
  updated_at DATETIME(6),
  PRIMARY KEY (entity_id, traversal_id, is_update),
  INDEX ix_sync_point_stack (stack_id, traversal_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS sync_point_input (
  entity_id VARCHAR(36) NOT NULL,
  traversal_id VARCHAR(36) NOT NULL,
  is_update INTEGER NOT NULL,
  predecessor VARCHAR(64) NOT NULL,
  input_data LONGTEXT,
  PRIMARY KEY (entity_id, traversal_id, is_update, predecessor),
  INDEX ix_sync_point_input_traversal (traversal_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS event (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  uuid VARCHAR(36) NOT NULL,
  stack_id VARCHAR(36) NOT NULL,
  resource_name VARCHAR(255),
  physical_resource_id VARCHAR(255),
  resource_action VARCHAR(32),
  resource_status VARCHAR(32),
  resource_status_reason LONGTEXT,
  resource_type VARCHAR(255),
  resource_properties LONGTEXT,
  created_at DATETIME(6),
  CONSTRAINT uq_event_uuid UNIQUE (uuid),
  INDEX ix_event_stack_id (stack_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS service (
  id VARCHAR(36) NOT NULL,
  engine_id VARCHAR(36) NOT NULL,
  host VARCHAR(255),
  hostname VARCHAR(255),
  binary_name VARCHAR(255),
  topic VARCHAR(255),
  report_interval INTEGER,
  worker_endpoint VARCHAR(255),
  created_at DATETIME(6),
  updated_at DATETIME(6),
  deleted_at DATETIME(6),
  PRIMARY KEY (id),
  CONSTRAINT uq_service_engine_id UNIQUE (engine_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS software_config (
  id VARCHAR(36) NOT NULL,
  name VARCHAR(255),
  `group` VARCHAR(255),
  config LONGTEXT,
  tenant VARCHAR(64) NOT NULL,
  created_at DATETIME(6),
  updated_at DATETIME(6),
  PRIMARY KEY (id),
  INDEX ix_software_config_tenant (tenant)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS software_deployment (
  id VARCHAR(36) NOT NULL,
  config_id VARCHAR(36) NOT NULL,
  server_id VARCHAR(255) NOT NULL,
  input_values LONGTEXT,
  output_values LONGTEXT,
  tenant VARCHAR(64) NOT NULL,
  stack_user_project_id VARCHAR(64),
  action VARCHAR(255),
  status VARCHAR(255),
  status_reason LONGTEXT,
  created_at DATETIME(6),
  updated_at DATETIME(6),
  PRIMARY KEY (id),
  INDEX ix_software_deployment_tenant (tenant),
  INDEX ix_software_deployment_server_id (server_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS signing_key (
  name VARCHAR(64) NOT NULL,
  secret VARCHAR(255) NOT NULL,
  created_at DATETIME(6),
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS watchdog_retrigger (
  stack_id VARCHAR(36) NOT NULL,
  retriggers INTEGER NOT NULL,
  stuck_traversal VARCHAR(36) NOT NULL,
  started_traversal VARCHAR(36),
  updated_at DATETIME(6),
  PRIMARY KEY (stack_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS user_creds (
  stack_id VARCHAR(36) NOT NULL,
  trust_id LONGTEXT NOT NULL,
  trustor_user_id VARCHAR(64) NOT NULL,
  tenant_id VARCHAR(64) NOT NULL,
  decrypt_method VARCHAR(64) NOT NULL,
  created_at DATETIME(6),
  PRIMARY KEY (stack_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS snapshot (
  id VARCHAR(36) NOT NULL,
  name VARCHAR(255),
  stack_id VARCHAR(36) NOT NULL,
  tenant VARCHAR(64) NOT NULL,
  data LONGTEXT,
  action VARCHAR(32),
  status VARCHAR(32),
  status_reason LONGTEXT,
  created_at DATETIME(6),
  updated_at DATETIME(6),
  PRIMARY KEY (id),
  INDEX ix_snapshot_stack_id (stack_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
