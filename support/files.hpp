// support/files.hpp
#pragma once
#include <string>

namespace tiletune {

//! A file-name suffix no other writer uses: processes in different containers may share a
//! folder and a pid, and one process writes from several threads.
std::string unique_suffix();

//! Replaces `path` whole: written to `path.tmp.SUFFIX` beside it, then renamed, so a reader never
//! sees half a file (and measure::remove_orphans knows a dead writer's leftovers by the name).
//! Error(Io) if it cannot.
void write_file_atomically(const std::string& path, const std::string& text);

//! Whether `path` names a regular file (an op or suite argument that is not a library name).
bool is_file(const std::string& path);
//! The whole file; Error(Io) if it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace tiletune
