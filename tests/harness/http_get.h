// A plain HTTP/1.1 GET over loopback, for tests that scrape gpupoold's /metrics.
#pragma once

#include <string>

namespace gpupool::e2e {

// GET `url` (http://IPV4:PORT/PATH) and return the whole response, headers included; empty when
// nothing answers.
std::string httpGet(const std::string& url);

}  // namespace gpupool::e2e
