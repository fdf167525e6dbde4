#include "png_decode.hpp"

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace gearshift::report::testing {
namespace {

std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | std::uint32_t{p[3]};
}

std::uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return static_cast<std::uint8_t>(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

}  // namespace

Image read_png(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::vector<std::uint8_t> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  static const std::uint8_t sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
  if (d.size() < 8 || !std::equal(sig, sig + 8, d.begin())) throw std::runtime_error(path + ": not a PNG file");
  Image im;
  std::vector<std::uint8_t> idat;
  for (std::size_t at = 8; at + 8 <= d.size();) {
    const std::uint32_t len = be32(&d[at]);
    const std::string type(d.begin() + static_cast<long>(at) + 4, d.begin() + static_cast<long>(at) + 8);
    if (at + 12 + len > d.size()) throw std::runtime_error(path + ": truncated chunk " + type);
    const std::uint8_t* body = &d[at + 8];
    if (type == "IHDR") {
      im.width = be32(body);
      im.height = be32(body + 4);
      const int depth = body[8], colour = body[9], interlace = body[12];
      if (depth != 8 || interlace != 0 || (colour != 0 && colour != 2 && colour != 6))
        throw std::runtime_error(path + ": only 8-bit, non-interlaced grey/RGB/RGBA PNGs are read");
      im.channels = colour == 0 ? 1 : colour == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      idat.insert(idat.end(), body, body + len);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + len;
  }
  if (im.channels == 0) throw std::runtime_error(path + ": no IHDR chunk");
  const std::size_t stride = std::size_t{im.width} * im.channels;
  std::vector<std::uint8_t> raw((stride + 1) * im.height);
  uLongf size = static_cast<uLongf>(raw.size());
  if (uncompress(raw.data(), &size, idat.data(), static_cast<uLong>(idat.size())) != Z_OK || size != raw.size())
    throw std::runtime_error(path + ": corrupt image data");
  im.pixels.resize(stride * im.height);
  const std::size_t bpp = im.channels;
  for (std::uint32_t y = 0; y < im.height; ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* in = &raw[y * (stride + 1) + 1];
    std::uint8_t* out = &im.pixels[y * stride];
    const std::uint8_t* up = y > 0 ? &im.pixels[(y - 1) * stride] : nullptr;
    for (std::size_t x = 0; x < stride; ++x) {
      const int a = x >= bpp ? out[x - bpp] : 0, b = up ? up[x] : 0, c = up && x >= bpp ? up[x - bpp] : 0;
      int v = in[x];
      switch (filter) {
        case 0: break;
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) / 2; break;
        case 4: v += paeth(a, b, c); break;
        default: throw std::runtime_error(path + ": bad row filter");
      }
      out[x] = static_cast<std::uint8_t>(v);
    }
  }
  return im;
}

double luminance_variance(const Image& im) {
  const std::size_t n = std::size_t{im.width} * im.height;
  if (n == 0) return 0;
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* p = &im.pixels[i * im.channels];
    const double l = im.channels < 3 ? p[0] : 0.2126 * p[0] + 0.7152 * p[1] + 0.0722 * p[2];
    sum += l;
    sq += l * l;
  }
  const double mean = sum / static_cast<double>(n);
  return sq / static_cast<double>(n) - mean * mean;
}

}  // namespace gearshift::report::testing
