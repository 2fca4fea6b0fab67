//! Name mapping (Redisson's `NameMapper`, docs/LAYOUT.md §1.1): every name a client is given
//! is mapped once, when the handle is made, and every key, channel and queue name of the
//! primitive is derived from the mapped name, exactly as Redisson derives them from
//! `getRawName()`.

use std::fmt;
use std::sync::Arc;

/// Maps the names given to a [`Client`](crate::Client) (`client.lock("order:42")`) to the
/// names its Redis keys are derived from, as Redisson's `NameMapper.map` does. A Rust service
/// and a Java service that map names the same way share their locks.
///
/// Set one with [`ClientBuilder::name_mapper`](crate::ClientBuilder::name_mapper), or the
/// common case, a prefix, with [`Config::key_prefix`](crate::Config::key_prefix).
///
/// ```
/// use redisson_sync::config::NameMapper;
///
/// let prefix = NameMapper::prefix("app:");
/// assert_eq!(prefix.map("order:42"), "app:order:42");
/// let custom = NameMapper::new(|name| format!("{{tenant-7}}:{name}"));
/// assert_eq!(custom.map("order:42"), "{tenant-7}:order:42");
/// ```
#[derive(Clone, Default)]
pub struct NameMapper(Repr);

#[derive(Clone, Default)]
enum Repr {
    /// Names are used as given (Redisson's `NameMapper.direct()`).
    #[default]
    Identity,
    Prefix(Arc<str>),
    Custom(Arc<dyn Fn(&str) -> String + Send + Sync>),
}

impl NameMapper {
    /// Uses names as given (the default; Redisson's `NameMapper.direct()`).
    pub fn identity() -> Self {
        Self(Repr::Identity)
    }

    /// Puts `prefix` before every name.
    pub fn prefix(prefix: impl Into<String>) -> Self {
        let prefix: String = prefix.into();
        if prefix.is_empty() {
            return Self::identity();
        }
        Self(Repr::Prefix(prefix.into()))
    }

    /// Maps names with `map` (which must be a pure function of the name: the same name must
    /// always map to the same key, in every process that shares the lock).
    pub fn new(map: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        Self(Repr::Custom(Arc::new(map)))
    }

    /// The mapped name.
    pub fn map(&self, name: &str) -> String {
        match &self.0 {
            Repr::Identity => name.to_owned(),
            Repr::Prefix(prefix) => format!("{prefix}{name}"),
            Repr::Custom(map) => map(name),
        }
    }

    /// Whether names are used as given.
    pub(crate) fn is_identity(&self) -> bool {
        matches!(self.0, Repr::Identity)
    }
}

impl fmt::Debug for NameMapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Identity => f.write_str("NameMapper::identity()"),
            Repr::Prefix(p) => write!(f, "NameMapper::prefix({p:?})"),
            Repr::Custom(_) => f.write_str("NameMapper::new(..)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_as_configured() {
        assert_eq!(NameMapper::identity().map("a"), "a");
        assert_eq!(NameMapper::default().map("a"), "a");
        assert!(NameMapper::prefix("").is_identity());
        assert_eq!(NameMapper::prefix("p:").map("a"), "p:a");
        assert_eq!(NameMapper::new(|n| n.to_uppercase()).map("a"), "A");
        assert_eq!(
            format!("{:?}", NameMapper::prefix("p:")),
            "NameMapper::prefix(\"p:\")"
        );
    }
}
