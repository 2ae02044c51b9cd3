#include "server/web_files.hpp"

#include <map>

#include "support/error.hpp"

namespace tiletune::server {

namespace web {
const std::map<std::string, std::string>& embedded_files();  // generated from web/
}

const std::string& web_file(const std::string& name) {
  auto it = web::embedded_files().find(name);
  if (it == web::embedded_files().end()) throw_error(ErrorKind::NotFound, "no dashboard file '" + name + "'");
  return it->second;
}

std::string web_content_type(const std::string& name) {
  static const std::map<std::string, std::string> types = {{".html", "text/html; charset=utf-8"},
                                                           {".js", "text/javascript; charset=utf-8"},
                                                           {".css", "text/css; charset=utf-8"}};
  size_t dot = name.rfind('.');
  auto it = dot == std::string::npos ? types.end() : types.find(name.substr(dot));
  return it == types.end() ? "text/plain; charset=utf-8" : it->second;
}

}  // namespace tiletune::server
