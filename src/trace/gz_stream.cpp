#include "trace/gz_stream.hpp"

#include <stdexcept>

#include <zlib.h>

#include "trace/error.hpp"

namespace gearshift::trace {

GzStreamBuf::GzStreamBuf(const std::string& path, std::size_t chunk_bytes) : buffer_(chunk_bytes) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot open for reading");
  gzbuffer(f, 1 << 17);
  file_ = f;
  setg(buffer_.data(), buffer_.data(), buffer_.data());
}

GzStreamBuf::~GzStreamBuf() {
  if (file_ != nullptr) gzclose(static_cast<gzFile>(file_));
}

GzStreamBuf::int_type GzStreamBuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  consumed_before_ += static_cast<std::uint64_t>(egptr() - eback());
  int n = gzread(static_cast<gzFile>(file_), buffer_.data(), static_cast<unsigned>(buffer_.size()));
  if (n < 0) {
    int errnum = 0;
    const char* msg = gzerror(static_cast<gzFile>(file_), &errnum);
    error_ = msg != nullptr ? msg : "decompression error";
    n = 0;
  } else if (n == 0) {
    int errnum = 0;
    const char* msg = gzerror(static_cast<gzFile>(file_), &errnum);
    if (errnum != Z_OK && errnum != Z_STREAM_END && msg != nullptr) error_ = msg;
  }
  setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
  if (n == 0) return traits_type::eof();
  return traits_type::to_int_type(*gptr());
}

std::unique_ptr<GzStreamBuf> open_trace_file(const std::string& path) {
  try {
    return std::make_unique<GzStreamBuf>(path);
  } catch (const std::runtime_error&) {
    throw TraceError(path, "cannot open for reading (missing file or no permission)");
  }
}

}  // namespace gearshift::trace
