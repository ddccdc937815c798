#include "tools/bench_plot.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace gpupool::tools {
namespace {

constexpr double kWidth = 520, kHeight = 380, kLeft = 70, kRight = 20, kTop = 40, kBottom = 60;
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string sizeLabel(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  std::ostringstream s;
  s << bytes << units[u];
  return s.str();
}

void panel(std::ostringstream& svg, const PlotPanel& p, double x0) {
  double minX = 1e300, maxX = 0, minY = 1e300, maxY = 0;
  for (auto& s : p.series) {
    for (auto& [x, y] : s.points) {
      if (x <= 0 || (p.logY && y <= 0)) continue;
      minX = std::min(minX, x);
      maxX = std::max(maxX, x);
      minY = std::min(minY, y);
      maxY = std::max(maxY, y);
    }
  }
  if (maxX <= 0) return;
  if (!p.logY) minY = 0;
  if (maxY <= minY) maxY = minY + 1;
  double lx0 = std::log2(minX), lx1 = std::max(std::log2(maxX), lx0 + 1);
  double ly0 = p.logY ? std::log10(minY) : minY, ly1 = p.logY ? std::log10(maxY) : maxY;
  if (p.logY) {
    ly0 = std::floor(ly0);
    ly1 = std::max(std::ceil(ly1), ly0 + 1);
  } else {
    ly1 *= 1.05;
  }
  double plotW = kWidth - kLeft - kRight, plotH = kHeight - kTop - kBottom;
  auto px = [&](double x) { return x0 + kLeft + (std::log2(x) - lx0) / (lx1 - lx0) * plotW; };
  auto py = [&](double y) {
    double v = p.logY ? std::log10(y) : y;
    return kTop + plotH - (v - ly0) / (ly1 - ly0) * plotH;
  };
  svg << "<text x='" << x0 + kWidth / 2 << "' y='22' text-anchor='middle' font-size='15'>"
      << p.title << "</text>\n";
  svg << "<rect x='" << x0 + kLeft << "' y='" << kTop << "' width='" << plotW << "' height='"
      << plotH << "' fill='none' stroke='#444'/>\n";
  for (double l = std::ceil(lx0); l <= lx1; l += 2) {
    double x = x0 + kLeft + (l - lx0) / (lx1 - lx0) * plotW;
    svg << "<line x1='" << x << "' y1='" << kTop << "' x2='" << x << "' y2='" << kTop + plotH
        << "' stroke='#ddd'/>\n<text x='" << x << "' y='" << kTop + plotH + 16
        << "' text-anchor='middle' font-size='11'>" << sizeLabel(std::exp2(l)) << "</text>\n";
  }
  int ticks = 5;
  for (int i = 0; i <= ticks; ++i) {
    double v = ly0 + (ly1 - ly0) * i / ticks;
    double y = kTop + plotH - plotH * i / ticks;
    double label = p.logY ? std::pow(10, v) : v;
    svg << "<line x1='" << x0 + kLeft << "' y1='" << y << "' x2='" << x0 + kLeft + plotW << "' y2='"
        << y << "' stroke='#eee'/>\n<text x='" << x0 + kLeft - 6 << "' y='" << y + 4
        << "' text-anchor='end' font-size='11'>" << std::setprecision(3) << label << "</text>\n";
  }
  svg << "<text x='" << x0 + kWidth / 2 << "' y='" << kHeight - 18
      << "' text-anchor='middle' font-size='12'>transfer size</text>\n";
  svg << "<text transform='translate(" << x0 + 16 << "," << kTop + plotH / 2
      << ") rotate(-90)' text-anchor='middle' font-size='12'>" << p.yLabel << "</text>\n";
  for (size_t i = 0; i < p.series.size(); ++i) {
    const auto& s = p.series[i];
    const char* color = kColors[i % 6];
    svg << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='";
    for (auto& [x, y] : s.points) {
      if (x > 0 && (!p.logY || y > 0)) svg << px(x) << "," << py(y) << " ";
    }
    svg << "'/>\n";
    double ly = kTop + 14 + 16 * static_cast<double>(i);
    svg << "<line x1='" << x0 + kLeft + 10 << "' y1='" << ly << "' x2='" << x0 + kLeft + 30
        << "' y2='" << ly << "' stroke='" << color << "' stroke-width='2'/>\n<text x='"
        << x0 + kLeft + 35 << "' y='" << ly + 4 << "' font-size='11'>" << s.name << "</text>\n";
  }
}

}  // namespace

bool writePlot(const std::string& path, const std::vector<PlotPanel>& panels, std::string* error) {
  std::ostringstream svg;
  double total = kWidth * static_cast<double>(panels.size());
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << total << "' height='" << kHeight
      << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  for (size_t i = 0; i < panels.size(); ++i) panel(svg, panels[i], kWidth * static_cast<double>(i));
  svg << "</svg>\n";
  std::ofstream out(path);
  out << svg.str();
  if (!out) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace gpupool::tools
