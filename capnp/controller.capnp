# The keelson controller's wire contract (Cap'n Proto RPC over TCP).
#
# The Rust is generated with Debian's `capnp` compiler and the `capnpc-rust`
# plugin (crate capnpc 0.27) and committed as src/controller_capnp.rs, so a
# fresh machine builds without the compiler:
#
#     capnp compile -orust:capnp/src --src-prefix=capnp capnp/controller.capnp
#
# .ci/check-capnp-drift regenerates it and fails on any difference.
#
# Ordinals are append-only: never reuse or reorder a field, method or
# enumerant (older clients and servers must keep decoding each other).

@0xaf8ba20dd912066b;

# A controller's role. STANDBY and PRIMARY come out of the etcd election;
# INIT is "starting, not yet connected", ELECTING "connected, no primary
# known, campaigning".
enum Role {
  init @0;
  electing @1;
  primary @2;
  standby @3;
}

# One configured controller.
struct CtrlPeer {
  name @0 :Text;
  host @1 :Text;
  port @2 :UInt32;
}

# The answer to `ctrlstatus`: the answering node's local view, cheap to
# build, available in every role (it is how operators find the primary).
struct CtrlStatus {
  clusterName @0 :Text;
  primaryName @1 :Text;       # empty: no elected or known primary ("unknown")
  responderName @2 :Text;     # the node that answered
  responderRole @3 :Role;
  term @4 :UInt64;            # 0: unknown
  configVersion @5 :UInt64;   # first 8 bytes of configChecksum, big-endian; 0: none committed
  configChecksum @6 :Data;    # SHA-256 of the committed configuration's canonical bytes; empty: none
  committedLsn @7 :UInt64;    # last committed log entry (as known to the responder)
  appliedLsn @8 :UInt64;      # last entry the responder applied
  fenced @9 :Bool;            # behind (applied < committed) or cannot recover the log
  peers @10 :List(CtrlPeer);
  peerCount @11 :UInt32;
  quorum @12 :Bool;           # the responder reaches the etcd quorum (its lease is being renewed)
  primaryAddress @13 :Text;   # host:port of the known primary; empty when unknown
}

enum ErrorCode {
  standby @0;      # ERR_STANDBY: not the primary; primaryName/primaryAddress name the one it knows
  notReady @1;     # ERR_NOT_READY: INIT, ELECTING, or a primary still catching up
  noQuorum @2;     # the primary cannot reach the etcd quorum: writes refused
  invalid @3;      # the request is malformed (bad document, bad name)
  notFound @4;     # no such registration
  internal @5;     # the controller failed (etcd error, I/O error)
  deposed @6;      # the write lost the term fence (another primary took over)
}

# A typed refusal; the client's failover wrapper acts on `code`.
struct Error {
  code @0 :ErrorCode;
  message @1 :Text;
  primaryName @2 :Text;       # ERR_STANDBY: the primary this node knows; empty: unknown
  primaryAddress @3 :Text;    # ERR_STANDBY: where to reach it (host:port); empty: unknown
}

# The committed cluster configuration.
struct ClusterConf {
  document @0 :Data;          # canonical JSON bytes (sorted keys, no whitespace)
  version @1 :UInt64;
  checksum @2 :Data;
  lsn @3 :UInt64;             # the committed LSN this read reflects
  term @4 :UInt64;
}

# What a committed write returns.
struct WriteAck {
  term @0 :UInt64;            # the term the entry was committed under
  lsn @1 :UInt64;             # its log position (heartbeats: the current committed LSN)
}

# A service instance in the registry (stack engines and others).
struct Registration {
  service @0 :Text;           # e.g. "stack-engine"
  instance @1 :Text;          # unique within the service
  address @2 :Text;           # where it serves (free form, e.g. http://host:port)
  ttlSeconds @3 :UInt32;      # the registration expires unless heartbeated within this
}

struct StatusReply {
  union {
    ok @0 :CtrlStatus;
    err @1 :Error;
  }
}

struct ConfReply {
  union {
    ok @0 :ClusterConf;
    err @1 :Error;
  }
}

struct WriteReply {
  union {
    ok @0 :WriteAck;
    err @1 :Error;
  }
}

struct ListReply {
  union {
    ok @0 :List(Registration);
    err @1 :Error;
  }
}

interface Controller {
  # Read-only status, answered in every role (incl. a primary without quorum).
  ctrlstatus @0 () -> (reply :StatusReply);
  # The committed configuration (a serving primary).
  clusterconf @1 () -> (reply :ConfReply);
  # Commit a new configuration (a primary with quorum). `document` is JSON.
  setconf @2 (document :Data) -> (reply :WriteReply);
  # Registry writes (a primary with quorum).
  register @3 (registration :Registration) -> (reply :WriteReply);
  heartbeat @4 (service :Text, instance :Text) -> (reply :WriteReply);
  deregister @5 (service :Text, instance :Text) -> (reply :WriteReply);
  # The live registrations of a service (every service when empty).
  list @6 (service :Text) -> (reply :ListReply);
}
