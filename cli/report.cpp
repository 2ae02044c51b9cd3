// tiletune report --html OUT.html: the dashboard's pages as one self-contained file, for people
// who use only the CLI. The page, its scripts and styles are the daemon's own (web/), inlined;
// the answers the pages would ask the daemon for are computed here and embedded
// (window.TT_REPORT), so the file opens offline and from any folder.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "server/service.hpp"
#include "server/web_files.hpp"
#include "support/error.hpp"

namespace tiletune::cli {

using nlohmann::json;

namespace {

//! `text` with `from` (which must occur) replaced by `to`.
std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  if (at == std::string::npos) throw_error(ErrorKind::Internal, "web/index.html lacks '" + from + "'");
  return text.replace(at, from.size(), to);
}

//! Text safe inside a <script> or <style> element: no "</" that could close it.
std::string inline_safe(std::string text) {
  for (size_t at = 0; (at = text.find("</", at)) != std::string::npos; at += 3) text.replace(at, 2, "<\\/");
  return text;
}

//! JSON text safe inside a <script> element whatever its strings hold ("</script>", "<!--"):
//! every '<' written as \u003c, which JSON and JavaScript read as the same character.
std::string json_in_script(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size());
  for (char ch : json_text) out += ch == '<' ? std::string("\\u003c") : std::string(1, ch);
  return out;
}

}  // namespace

int run_report(const CommonOptions& c, const std::string& out) {
  if (c.db.rfind("postgresql://", 0) != 0 && c.db.rfind("postgres://", 0) != 0 && !std::filesystem::exists(c.db))
    throw_error(ErrorKind::NotFound, "no database '" + c.db + "'");
  server::ServiceOptions so;
  so.db_path = c.db;
  so.backend = c.backend_options;
  server::Service service(so);  // not started: it only answers
  json answers;
  json overview = service.dashboard();
  overview["measurements_per_second"] = nullptr;  // a rate is the daemon's; a file has none
  answers["/v1/dashboard"] = overview;
  for (auto& w : overview["workloads"]) {
    std::string keys = "workload=" + w["workload"].get<std::string>() + "&target=" + w["target"].get<std::string>();
    server::dashboard::WorkloadQuery query;  // the daemon's defaults: no filters, the knobs that matter most
    query.workload = w["workload"];
    query.target = w["target"];
    answers["/v1/dashboard/workload?" + keys] = service.dashboard_workload(query);
    try {
      answers["/v1/best?" + keys] = service.best(w["workload"], w["target"]);
    } catch (const Error&) {
      // No correct kernel, or a target whose backend this machine lacks: the page says so.
    }
  }
  for (auto& t : overview["targets"])
    answers["/v1/dashboard/model?target=" + t["key"].get<std::string>()] = service.dashboard_model(t["key"], "", "");
  for (auto& j : overview["jobs"])
    if (j.contains("request") && j["request"].contains("tasks"))
      answers["/v1/models/" + j["id"].get<std::string>()] = service.model(j["id"]);

  std::string page = server::web_file("index.html");
  page = replace_once(page, R"(<link rel="stylesheet" href="/ui/vendor/uplot/uPlot.min.css">)",
                      "<style>" + inline_safe(server::web_file("vendor/uplot/uPlot.min.css")) + "</style>");
  page = replace_once(page, R"(<link rel="stylesheet" href="/ui/style.css">)",
                      "<style>" + inline_safe(server::web_file("style.css")) + "</style>");
  page = replace_once(page, R"(<script src="/ui/vendor/uplot/uPlot.iife.min.js"></script>)",
                      "<script>" + inline_safe(server::web_file("vendor/uplot/uPlot.iife.min.js")) + "</script>");
  // A PostgreSQL URL may hold a user name (never a password: that comes from PGPASSWORD or a
  // passfile), but the file is for sharing: the database is named without it.
  std::string where = c.db;
  if (auto scheme = where.find("://"); scheme != std::string::npos)
    if (auto at = where.find('@', scheme); at != std::string::npos) where.erase(scheme + 3, at + 1 - (scheme + 3));
  json report = {{"database", where}, {"answers", answers}};
  page = replace_once(page, R"(<script src="/ui/app.js"></script>)",
                      "<script>window.TT_REPORT = " + json_in_script(report.dump()) + ";</script>\n<script>" +
                          inline_safe(server::web_file("app.js")) + "</script>");
  std::ofstream file(out, std::ios::binary);
  file << page;
  if (!file) throw_error(ErrorKind::Io, "cannot write " + out);
  std::cout << "wrote " << out << ": " << overview["workloads"].size() << " workloads, " << overview["records"]
            << " records\n";
  return 0;
}

}  // namespace tiletune::cli
