// db/store_url.hpp — where a store lives: an SQLite file path or a PostgreSQL URL.
#pragma once
#include <string>

namespace tiletune::db {

//! "postgresql://..." or "postgres://...": a PostgreSQL database; anything else is a file path.
bool is_postgres_url(const std::string& where);
//! Refuses a URL that cannot be parsed (Error(Database)) or that carries a password
//! (Error(InvalidInput): passwords come from PGPASSWORD, ~/.pgpass or ?passfile=FILE, never
//! from a command line where other users can read it).
void check_store_url(const std::string& url);
//! "PostgreSQL database 'db' on host:port" for messages (the URL holds no password).
std::string describe_store_url(const std::string& url);

}  // namespace tiletune::db
