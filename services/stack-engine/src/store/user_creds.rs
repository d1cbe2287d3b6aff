//! `user_creds`: a root stack's stored credentials (Heat's table of that
//! name): the trust its deferred operations act through, encrypted with
//! `auth_encryption_key` (`decrypt_method` names how), the trustor and its
//! project. One row per root stack; nested stacks use their root's. The
//! row goes when the stack's DELETE completes (after the trust is deleted).

use keelson_db::{Db, DbError, Tx};

/// A stored row, still encrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCredsRow {
    pub stack_id: String,
    pub trust_id: String,
    pub trustor_user_id: String,
    pub tenant_id: String,
    pub decrypt_method: String,
}

pub async fn insert_tx(tx: &mut Tx, row: &UserCredsRow) -> Result<(), DbError> {
    tx.execute(
        "INSERT INTO user_creds (stack_id, trust_id, trustor_user_id, tenant_id, decrypt_method, created_at) \
         VALUES (?, ?, ?, ?, ?, ?)",
        &[
            row.stack_id.clone().into(),
            row.trust_id.clone().into(),
            row.trustor_user_id.clone().into(),
            row.tenant_id.clone().into(),
            row.decrypt_method.clone().into(),
            keelson_db::now().into(),
        ],
    )
    .await?;
    Ok(())
}

pub async fn get(db: &Db, stack_id: &str) -> Result<Option<UserCredsRow>, DbError> {
    let rows = db
        .fetch_all(
            "SELECT stack_id, trust_id, trustor_user_id, tenant_id, decrypt_method FROM user_creds WHERE stack_id = ?",
            &[stack_id.into()],
        )
        .await?;
    rows.first()
        .map(|r| {
            Ok(UserCredsRow {
                stack_id: r.string(0)?,
                trust_id: r.string(1)?,
                trustor_user_id: r.string(2)?,
                tenant_id: r.string(3)?,
                decrypt_method: r.string(4)?,
            })
        })
        .transpose()
}

pub async fn delete(db: &Db, stack_id: &str) -> Result<(), DbError> {
    super::write_one(db, "user_creds deletion", "DELETE FROM user_creds WHERE stack_id = ?", &[stack_id.into()])
        .await?;
    Ok(())
}
