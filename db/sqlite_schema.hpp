// db/sqlite_schema.hpp
#pragma once
#include <sqlite3.h>

#include <string>

namespace tiletune::db::sqlite {

//! Brings the database file at `path`, open as `db`, to this build's schema: each step not yet
//! applied, under the write lock, since several processes may open a new file at once.
//! Error(Database) for an SQLite file of another program, or of a newer tiletune.
void migrate(sqlite3* db, const std::string& path);

}  // namespace tiletune::db::sqlite
