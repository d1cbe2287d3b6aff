//! A MySQL write transaction rolled back under its connection without the
//! error that should say so (what a Galera brute-force abort does when a
//! command that gets no answer swallows its report) must neither let a
//! later write commit on its own nor be reported as committed. The server
//! side of that is played here by a ROLLBACK sent inside the transaction,
//! which the transaction's bookkeeping does not see. Against the MariaDB
//! that KEELSON_TEST_MYSQL names (skipped without it), in a database of its
//! own, dropped at the end.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keelson_db::{DatabaseUrl, Db, DbError, PoolSettings};

async fn count(db: &Db) -> i64 {
    let rows = db.fetch_all("SELECT COUNT(*) FROM t", &[]).await.expect("count");
    rows[0].i64(0).expect("count")
}

#[tokio::test]
async fn writes_after_a_silent_rollback_are_refused_and_commit_reports_it() {
    let Some(base) = std::env::var("KEELSON_TEST_MYSQL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("KEELSON_TEST_MYSQL is not set: skipped");
        return;
    };
    let base = base.trim_end_matches('/').to_string();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").subsec_nanos();
    let name = format!("kt_{}_{nanos}_lost_tx", std::process::id());
    let settings = PoolSettings { max_connections: 1, ..PoolSettings::default() };
    let admin = Db::connect(&DatabaseUrl::parse(&base).expect("url"), &settings).await.expect("connect");
    admin.execute_raw(&format!("CREATE DATABASE {name}")).await.expect("create database");
    let db = Db::connect(&DatabaseUrl::parse(&format!("{base}/{name}")).expect("url"), &settings).await.expect("db");
    db.execute_raw("CREATE TABLE t (id INTEGER PRIMARY KEY AUTO_INCREMENT, v INTEGER)").await.expect("table");

    // A write transaction that commits.
    let mut tx = db.begin().await.expect("begin");
    tx.execute("INSERT INTO t (v) VALUES (1)", &[]).await.expect("insert");
    tx.commit().await.expect("commit");
    assert_eq!(count(&db).await, 1);

    // Rolled back under it, then a write: refused, as a write conflict to
    // retry, and nothing of it stays.
    let mut tx = db.begin().await.expect("begin");
    tx.execute("INSERT INTO t (v) VALUES (2)", &[]).await.expect("insert");
    tx.execute("ROLLBACK", &[]).await.expect("the server's rollback");
    let refused = tx.execute("INSERT INTO t (v) VALUES (3)", &[]).await.expect_err("a write outside the transaction");
    assert!(refused.is_write_conflict(), "{refused:?}");
    drop(tx);
    assert_eq!(count(&db).await, 1);

    // Rolled back under it after its last write: COMMIT says so.
    let mut tx = db.begin().await.expect("begin");
    tx.execute("INSERT INTO t (v) VALUES (4)", &[]).await.expect("insert");
    tx.execute("ROLLBACK", &[]).await.expect("the server's rollback");
    let lost = tx.commit().await.expect_err("no transaction to commit");
    assert!(matches!(lost, DbError::TransactionLost), "{lost:?}");
    assert!(lost.is_write_conflict());
    assert_eq!(count(&db).await, 1);

    // Statements outside transactions still write (DDL, as db sync runs
    // it), on the connection the write transactions left read-only.
    db.execute_raw("ALTER TABLE t ADD COLUMN w INTEGER").await.expect("DDL outside a transaction");
    let mut tx = db.begin().await.expect("begin");
    tx.execute_raw("CREATE TABLE u (id INTEGER PRIMARY KEY)").await.expect("DDL in a transaction");
    tx.execute("INSERT INTO u (id) VALUES (1)", &[]).await.expect("a write after DDL");
    tx.commit().await.expect("commit after DDL");

    db.close().await;
    admin.execute_raw(&format!("DROP DATABASE {name}")).await.expect("drop database");
    admin.close().await;
}
