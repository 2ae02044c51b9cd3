// Store locations: which engine a --db value names, and the checks of a PostgreSQL URL.
#include "db/store_url.hpp"

#include <libpq-fe.h>

#include <map>
#include <memory>

#include "db/store.hpp"
#include "support/error.hpp"

namespace tiletune::db {

namespace {

//! The URL's connection parameters (those it sets), or Error(Database) naming what is wrong.
std::map<std::string, std::string> url_parameters(const std::string& url) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
  if (!options) {
    std::string why = error ? error : "out of memory";
    if (error) PQfreemem(error);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    throw_error(ErrorKind::Database, "bad PostgreSQL URL '" + url + "': " + why);
  }
  std::map<std::string, std::string> out;
  for (auto* o = options; o->keyword; ++o)
    if (o->val && *o->val) out[o->keyword] = o->val;
  PQconninfoFree(options);
  return out;
}

}  // namespace

bool is_postgres_url(const std::string& where) {
  return where.rfind("postgresql://", 0) == 0 || where.rfind("postgres://", 0) == 0;
}

void check_store_url(const std::string& url) {
  if (url_parameters(url).count("password"))
    throw_error(ErrorKind::InvalidInput,
                "the PostgreSQL URL carries a password, which any user of this machine can read on a command "
                "line: give it in PGPASSWORD, in ~/.pgpass, or in a file named by ?passfile=FILE");
}

std::string describe_store_url(const std::string& url) {
  auto p = url_parameters(url);
  std::string host = p.count("host") ? p["host"] : "the default socket";
  std::string port = p.count("port") ? ":" + p["port"] : "";
  std::string db = p.count("dbname") ? p["dbname"] : (p.count("user") ? p["user"] : "(default)");
  return "PostgreSQL database '" + db + "' on " + host + port;
}

std::unique_ptr<Store> open_store(const std::string& where, bool create) {
  return is_postgres_url(where) ? open_postgres_store(where, create) : open_sqlite_store(where, create);
}

}  // namespace tiletune::db
