// An SVG of `gpupool bench` results: latency and bandwidth against transfer size, one line per
// series (gpupool and the raw wire), log-scaled sizes.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpupool::tools {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (size in bytes, value)
};

struct PlotPanel {
  std::string title;
  std::string yLabel;
  bool logY = false;
  std::vector<PlotSeries> series;
};

// Writes the panels side by side. Returns false with *error when the file cannot be written.
bool writePlot(const std::string& path, const std::vector<PlotPanel>& panels, std::string* error);

}  // namespace gpupool::tools
