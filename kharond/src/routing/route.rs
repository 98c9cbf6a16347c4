//! The route a connection takes: the one lookup of a [`Target`] in the routing table
//! ([`Route::of`]), owned, so that it outlives the table it was read from, and the words every
//! message, log line, `Status` row and trace use for it. The rules themselves (suffixes, longest
//! first, exclusions) are `kharon_routing::table`'s, whose [`table::Route`] is the table's
//! answer with the rule that decided; this is the part of it a connection keeps. The dial along a
//! route is [`dial`](crate::routing::dial)'s.

use std::fmt;

use kharon_routing::table::{self, RoutingTable, Via};

use crate::routing::target::Target;

/// How a target is reached. Owned: it outlives the table snapshot it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Direct,
    /// Through this jump host's chain (its ssh_config alias).
    Jumphost(String),
}

impl Route {
    /// The route `table` gives `target`: an address the client resolved goes direct (there is no
    /// name to match), a name by its suffixes.
    pub fn of(table: &RoutingTable, target: &Target) -> Self {
        match target {
            Target::Ip(_) => Route::Direct,
            Target::Name(name, _) => match table.lookup(name) {
                table::Route::Direct => Route::Direct,
                table::Route::Jumphost(route) => Route::Jumphost(route.jumphost.to_owned()),
            },
        }
    }

    /// The jump host alias to connect through, if the route uses one.
    pub fn jumphost(&self) -> Option<&str> {
        match self {
            Route::Direct => None,
            Route::Jumphost(jumphost) => Some(jumphost),
        }
    }

    pub fn via(&self) -> Via {
        self.jumphost().map_or(Via::Direct, |_| Via::Jumphost)
    }

    /// How the control API and the logs name the route in one word: "direct", or the jump host
    /// alias (the `path` of `Test` and `FetchObject` answers, a `Status` route row).
    pub fn label(&self) -> &str {
        self.jumphost().unwrap_or(Via::Direct.as_str())
    }
}

/// How messages name the route: "via jump host J" or "directly".
impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Direct => f.write_str("directly"),
            Route::Jumphost(jumphost) => write!(f, "via jump host {jumphost}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kharon_routing::inventory::Cluster;

    #[test]
    fn names_follow_the_table_and_addresses_go_direct() {
        let cluster: Cluster = serde_json::from_str(
            r#"{"id": "c-a", "facts": {"jumphost": "jump-a", "jumphostDomains": "a.example"}}"#,
        )
        .unwrap();
        let table = RoutingTable::compile(&[cluster]);
        let routed = Route::of(&table, &Target::Name("api.a.example".into(), 443));
        assert_eq!(routed, Route::Jumphost("jump-a".into()));
        assert_eq!((routed.via(), routed.jumphost()), (Via::Jumphost, Some("jump-a")));
        assert_eq!((routed.to_string(), routed.label()), ("via jump host jump-a".to_owned(), "jump-a"));
        let direct = Route::of(&table, &Target::Name("example.org".into(), 443));
        assert_eq!(
            (direct.to_string(), direct.jumphost(), direct.label()),
            ("directly".to_owned(), None, "direct")
        );
        // Even an address inside a routed range: the client resolved it, there is no name to route.
        assert_eq!(Route::of(&table, &Target::Ip("10.0.0.1:443".parse().unwrap())), Route::Direct);
    }
}
