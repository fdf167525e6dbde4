// A minimal PNG reader for the browser test's screenshot: 8-bit greyscale, RGB or RGBA, not interlaced (what
// chromium's --screenshot writes), through zlib. Enough to measure whether a picture is blank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gearshift::report::testing {

struct Image {
  std::uint32_t width = 0, height = 0;
  unsigned channels = 0;              // 1, 3 or 4
  std::vector<std::uint8_t> pixels;   // rows top to bottom, `channels` bytes per pixel
};

// Throws std::runtime_error naming what is wrong (not a PNG, unsupported kind, corrupt data).
Image read_png(const std::string& path);

// Variance of the pixels' luminance (0..255 scale): 0 for a blank picture.
double luminance_variance(const Image& image);

}  // namespace gearshift::report::testing
