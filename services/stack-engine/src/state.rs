//! Heat's stack and resource actions and statuses (the `action` and
//! `status` columns). Rows decode them once when read and encode them when
//! written; everything else matches on the enums, so a misspelt state does
//! not compile. Events and API documents print [`Action::as_str`] and
//! [`Status::as_str`], Heat's upper-case names.

use std::fmt;
use std::str::FromStr;

/// A state name no variant has (a corrupt row, an unknown filter value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {text:?}")]
pub struct UnknownState {
    pub what: &'static str,
    pub text: String,
}

/// Heat's resource and stack actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Action {
    /// A resource not created yet (a new row's state is INIT_COMPLETE).
    #[default]
    Init,
    Create,
    Delete,
    Update,
    Rollback,
    Suspend,
    Resume,
    Adopt,
    Snapshot,
    Check,
    /// A stack's update back to one of its snapshots.
    Restore,
}

impl Action {
    pub const ALL: [Action; 11] = [
        Action::Init,
        Action::Create,
        Action::Delete,
        Action::Update,
        Action::Rollback,
        Action::Suspend,
        Action::Resume,
        Action::Adopt,
        Action::Snapshot,
        Action::Check,
        Action::Restore,
    ];

    /// Heat's name, e.g. `CREATE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Init => "INIT",
            Action::Create => "CREATE",
            Action::Delete => "DELETE",
            Action::Update => "UPDATE",
            Action::Rollback => "ROLLBACK",
            Action::Suspend => "SUSPEND",
            Action::Resume => "RESUME",
            Action::Adopt => "ADOPT",
            Action::Snapshot => "SNAPSHOT",
            Action::Check => "CHECK",
            Action::Restore => "RESTORE",
        }
    }
}

/// Heat's resource and stack statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Status {
    InProgress,
    Failed,
    /// The default: a new resource row is INIT_COMPLETE.
    #[default]
    Complete,
}

impl Status {
    pub const ALL: [Status; 3] = [Status::InProgress, Status::Failed, Status::Complete];

    /// Heat's name, e.g. `IN_PROGRESS`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "IN_PROGRESS",
            Status::Failed => "FAILED",
            Status::Complete => "COMPLETE",
        }
    }
}

impl FromStr for Action {
    type Err = UnknownState;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Action::ALL
            .into_iter()
            .find(|a| a.as_str() == text)
            .ok_or_else(|| UnknownState { what: "action", text: text.to_string() })
    }
}

impl FromStr for Status {
    type Err = UnknownState;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Status::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| UnknownState { what: "status", text: text.to_string() })
    }
}

impl TryFrom<&str> for Action {
    type Error = UnknownState;

    fn try_from(text: &str) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl TryFrom<&str> for Status {
    type Error = UnknownState;

    fn try_from(text: &str) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Event writers take an action as text: Heat's events also record
/// `SIGNAL`, which is no resource action.
impl AsRef<str> for Action {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Status {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// API documents show the name.
impl serde::Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl serde::Serialize for Status {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl From<Action> for keelson_db::Value {
    fn from(a: Action) -> Self {
        a.as_str().into()
    }
}

impl From<Status> for keelson_db::Value {
    fn from(s: Status) -> Self {
        s.as_str().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_unknown_text_is_refused() {
        for a in Action::ALL {
            assert_eq!(a.as_str().parse::<Action>(), Ok(a));
        }
        for s in Status::ALL {
            assert_eq!(Status::try_from(s.as_str()), Ok(s));
        }
        assert_eq!("create".parse::<Action>(), Err(UnknownState { what: "action", text: "create".into() }));
        assert!("".parse::<Status>().is_err());
        assert_eq!(format!("{}_{}", Action::Init, Status::Complete), "INIT_COMPLETE");
    }
}
