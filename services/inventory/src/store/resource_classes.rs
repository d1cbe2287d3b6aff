//! Resource classes: ids 0-20 are os-resource-classes' standard classes in
//! order; custom classes (`CUSTOM_*`) are numbered from 10000.

use keelson_db::{now, Cells, Tx};
use keelson_placement_standard::MIN_CUSTOM_RESOURCE_CLASS_ID;

use super::{write_retrying, Store};
use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct ResourceClassRow {
    pub id: i64,
    pub name: String,
    pub created_at: Option<chrono::NaiveDateTime>,
    pub updated_at: Option<chrono::NaiveDateTime>,
}

impl ResourceClassRow {
    /// Standard classes report no modification time (upstream answers
    /// "now" for them).
    pub fn last_modified(&self) -> Option<chrono::NaiveDateTime> {
        if self.id < MIN_CUSTOM_RESOURCE_CLASS_ID {
            None
        } else {
            self.updated_at.or(self.created_at)
        }
    }
}

fn not_found(name: &str) -> Error {
    Error::NotFound(format!("No such resource class {name}."))
}

impl ResourceClassRow {
    /// Columns in the order [`ResourceClassRow::from_row`] reads them.
    const COLUMNS: &'static str = "id, name, created_at, updated_at";

    fn from_row(r: &impl Cells) -> Result<Self> {
        Ok(ResourceClassRow {
            id: r.i64(0)?,
            name: r.string(1)?,
            created_at: r.opt_time(2)?,
            updated_at: r.opt_time(3)?,
        })
    }
}

/// The statement reading a class by its (unique) name.
fn find_by_name() -> String {
    format!("SELECT {} FROM resource_classes WHERE name = ?", ResourceClassRow::COLUMNS)
}

async fn find(tx: &mut Tx, name: &str) -> Result<Option<ResourceClassRow>> {
    tx.fetch_optional(&find_by_name(), &[name.into()]).await?.map(|r| ResourceClassRow::from_row(&r)).transpose()
}

impl Store {
    pub async fn list_resource_classes(&self) -> Result<Vec<ResourceClassRow>> {
        let sql = format!("SELECT {} FROM resource_classes ORDER BY id", ResourceClassRow::COLUMNS);
        let mut classes = Vec::new();
        self.db
            .for_each_row(&sql, &[], |r| -> Result<()> {
                classes.push(ResourceClassRow::from_row(r)?);
                Ok(())
            })
            .await?;
        Ok(classes)
    }

    /// One statement, outside any transaction.
    pub async fn get_resource_class(&self, name: &str) -> Result<ResourceClassRow> {
        let mut found = None;
        self.db
            .for_each_row(&find_by_name(), &[name.into()], |r| -> Result<()> {
                found = Some(ResourceClassRow::from_row(r)?);
                Ok(())
            })
            .await?;
        found.ok_or_else(|| not_found(name))
    }

    /// Creates a custom class. `Ok(None)` when a class of that name exists.
    async fn insert_class(&self, name: &str) -> Result<Option<ResourceClassRow>> {
        write_retrying("resource class create", || self.try_insert_class(name)).await
    }

    async fn try_insert_class(&self, name: &str) -> Result<Option<ResourceClassRow>> {
        // Two creators may pick the same next id; the loser retries with
        // a fresh one (upstream retries up to 100 times too).
        for _ in 0..100 {
            let mut tx = self.db.begin().await?;
            if find(&mut tx, name).await?.is_some() {
                return Ok(None);
            }
            let max = tx.fetch_optional("SELECT MAX(id) FROM resource_classes", &[]).await?;
            let max_id = max.map(|r| r.opt_i64(0)).transpose()?.flatten().unwrap_or(0);
            let id = if max_id < MIN_CUSTOM_RESOURCE_CLASS_ID { MIN_CUSTOM_RESOURCE_CLASS_ID } else { max_id + 1 };
            let ts = now();
            match tx
                .execute(
                    "INSERT INTO resource_classes (id, name, created_at) VALUES (?, ?, ?)",
                    &[id.into(), name.into(), ts.into()],
                )
                .await
            {
                Ok(_) => {
                    tx.commit().await?;
                    return Ok(Some(ResourceClassRow {
                        id,
                        name: name.to_string(),
                        created_at: Some(ts),
                        updated_at: None,
                    }));
                }
                Err(e) if e.is_unique_violation() || e.is_retryable() => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::conflict(format!(
            "Max retries of DB transaction exceeded attempting to create resource class: {name}, please try again."
        )))
    }

    /// POST /resource_classes: 409 when the name is taken.
    pub async fn create_resource_class(&self, name: &str) -> Result<ResourceClassRow> {
        self.insert_class(name).await?.ok_or_else(|| {
            Error::Conflict(crate::error::DUPLICATE_NAME, format!("Conflicting resource class already exists: {name}"))
        })
    }

    /// PUT /resource_classes/{name} from 1.7: (class, created).
    pub async fn ensure_resource_class(&self, name: &str) -> Result<(ResourceClassRow, bool)> {
        match self.insert_class(name).await? {
            Some(rc) => Ok((rc, true)),
            None => Ok((self.get_resource_class(name).await?, false)),
        }
    }

    /// PUT /resource_classes/{name} before 1.7: renames a custom class.
    pub async fn rename_resource_class(&self, name: &str, new_name: &str) -> Result<ResourceClassRow> {
        write_retrying("resource class rename", || self.try_rename_resource_class(name, new_name)).await
    }

    async fn try_rename_resource_class(&self, name: &str, new_name: &str) -> Result<ResourceClassRow> {
        let mut tx = self.db.begin().await?;
        let rc = find(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
        if rc.id < MIN_CUSTOM_RESOURCE_CLASS_ID {
            return Err(Error::BadRequest(format!("Cannot update standard resource class {name}")));
        }
        let ts = now();
        match tx
            .execute(
                "UPDATE resource_classes SET name = ?, updated_at = ? WHERE id = ?",
                &[new_name.into(), ts.into(), rc.id.into()],
            )
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_unique_violation() => {
                return Err(Error::Conflict(
                    crate::error::DUPLICATE_NAME,
                    format!("Resource class already exists: {new_name}"),
                ));
            }
            Err(e) => return Err(e.into()),
        }
        tx.commit().await?;
        Ok(ResourceClassRow { id: rc.id, name: new_name.to_string(), created_at: rc.created_at, updated_at: Some(ts) })
    }

    pub async fn delete_resource_class(&self, name: &str) -> Result<()> {
        write_retrying("resource class delete", || self.try_delete_resource_class(name)).await
    }

    async fn try_delete_resource_class(&self, name: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let rc = find(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
        if rc.id < MIN_CUSTOM_RESOURCE_CLASS_ID {
            return Err(Error::BadRequest(format!(
                "Error in delete resource class: Cannot delete standard resource class {name}."
            )));
        }
        let used =
            tx.fetch_optional("SELECT COUNT(*) FROM inventories WHERE resource_class_id = ?", &[rc.id.into()]).await?;
        if used.map(|r| r.i64(0)).transpose()?.unwrap_or(0) > 0 {
            return Err(Error::conflict(format!(
                "Error in delete resource class: Cannot delete resource class {name}. Class is in use in inventory."
            )));
        }
        tx.execute("DELETE FROM resource_classes WHERE id = ?", &[rc.id.into()]).await?;
        tx.commit().await?;
        Ok(())
    }
}
