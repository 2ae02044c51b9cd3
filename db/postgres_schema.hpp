// db/postgres_schema.hpp
#pragma once
#include "db/postgres_connection.hpp"

namespace tiletune::db {

//! Brings the database to this build's schema, each step not yet applied in one transaction
//! under an advisory lock, so that daemons starting together migrate once. Run before the
//! connection is shared. Error(NotFound) for a database with no tiletune schema unless
//! `create`; Error(Database) for one of another program, or of a newer tiletune.
void migrate(PgConnection& db, bool create);

}  // namespace tiletune::db
