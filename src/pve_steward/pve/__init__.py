"""PVE domain types with no I/O: identifiers, guest config parsing, payload conversion."""
