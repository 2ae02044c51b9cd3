// cli/table.hpp — internal to cli/: the terminal tables and number formats the subcommands share.
#pragma once
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace tiletune::cli {

struct Row {
  std::vector<std::string> cells;
};
//! Columns padded to their widest cell; text columns (op, sizes, ...) left-aligned.
void print_table(const std::vector<std::string>& header, const std::vector<Row>& rows);
std::string fmt(const char* format, double v);
std::string join(const std::vector<std::string>& parts, const char* sep);
std::string ms(double seconds);  //!< "1.234" milliseconds; "-" when not finite
//! The command line's tuning options with what the common options add.
tuner::TuneOptions tune_options(const CommonOptions& c, const tuner::TuneOptions& t, db::ModelStore* models);

}  // namespace tiletune::cli
