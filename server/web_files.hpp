// server/web_files.hpp: the dashboard's files (web/, compiled in: the daemon serves nothing
// from the disk or the internet).
#pragma once
#include <string>

namespace tiletune::server {

//! A web/ file by its path under web/ ("index.html", "vendor/uplot/uPlot.iife.min.js");
//! Error(NotFound) for any other name.
const std::string& web_file(const std::string& name);
//! The Content-Type of a web/ file, from its extension.
std::string web_content_type(const std::string& name);

}  // namespace tiletune::server
