// A std::streambuf over zlib's gzFile: reads gzip-compressed and plain files alike, in fixed-size chunks,
// so importers stream files of any size with bounded memory. Counts the decompressed bytes consumed so
// that errors can name a position.
#pragma once

#include <cstdint>
#include <memory>
#include <streambuf>
#include <string>
#include <vector>

namespace gearshift::trace {

class GzStreamBuf : public std::streambuf {
 public:
  // Opens `path` for reading; throws std::runtime_error naming the path when it cannot be opened.
  explicit GzStreamBuf(const std::string& path, std::size_t chunk_bytes = 1 << 16);
  ~GzStreamBuf() override;
  GzStreamBuf(const GzStreamBuf&) = delete;
  GzStreamBuf& operator=(const GzStreamBuf&) = delete;

  // Decompressed bytes handed out so far (the position of the next character), bytes.
  std::uint64_t position() const { return consumed_before_ + static_cast<std::uint64_t>(gptr() - eback()); }
  // Set when zlib reported a corrupt or truncated compressed stream.
  const std::string& error() const { return error_; }

 protected:
  int_type underflow() override;

 private:
  void* file_ = nullptr;  // gzFile
  std::vector<char> buffer_;
  std::uint64_t consumed_before_ = 0;
  std::string error_;
};

// Opens a trace file for streaming; throws TraceError ("cannot open for reading ...") naming the path.
std::unique_ptr<GzStreamBuf> open_trace_file(const std::string& path);

}  // namespace gearshift::trace
