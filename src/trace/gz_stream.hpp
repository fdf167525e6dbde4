// Stream buffers under the importers: GzStreamBuf reads gzip-compressed and plain files alike, in fixed-size
// chunks, so importers stream files of any size with bounded memory, and counts the decompressed bytes
// consumed so that errors can name a position; Utf8RepairStreamBuf sits between it and a JSON parser.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <streambuf>
#include <string>
#include <vector>

namespace gearshift::trace {

// A std::streambuf over zlib's gzFile.
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
  // Whether the file is gzip data (false: a plain file, read as it is). Known once a byte was asked for.
  bool compressed() const;

 protected:
  int_type underflow() override;
  std::streamsize xsgetn(char* s, std::streamsize n) override;

 private:
  int read_some(char* into, std::size_t n);  // gzread; 0 at the end or on an error (then error_ is set)
  void* file_ = nullptr;  // gzFile
  std::vector<char> buffer_;
  std::uint64_t consumed_before_ = 0;
  std::string error_;
};

// A std::streambuf that passes bytes through from another streambuf and replaces each ill-formed UTF-8
// sequence by U+FFFD (EF BF BD), so that a JSON parser that insists on UTF-8 (nlohmann-json) reads names
// with stray Latin-1 or binary bytes (kineto#80) instead of rejecting the file. It works chunk by chunk
// (bounded memory); a sequence split across two chunks is joined first. Replacement follows Unicode's
// "substitution of maximal subparts" (chapter 3, U+FFFD substitution): each maximal subpart of an ill-formed
// sequence becomes one U+FFFD, so `e9 ff fe` gives three and a truncated `e2 82` gives one.
//
// Replacing grows the text (1 to 3 source bytes become 3), so the parser's positions are positions in the
// repaired text; source_position() maps them back to the source bytes, for error messages.
class Utf8RepairStreamBuf : public std::streambuf {
 public:
  explicit Utf8RepairStreamBuf(std::streambuf& source, std::size_t chunk_bytes = 1 << 16);

  // Repaired bytes handed out so far (the 0-based position of the next one).
  std::uint64_t position() const { return out_before_ + static_cast<std::uint64_t>(gptr() - eback()); }
  // The number of source bytes behind the first `repaired` bytes of the repaired text. Exact for positions
  // in the chunk being read and after; earlier ones (never asked for by a streaming parser) are estimated.
  std::uint64_t source_position(std::uint64_t repaired) const;
  // Source bytes behind what was handed out so far.
  std::uint64_t source_position() const { return source_position(position()); }

  // Source bytes replaced so far (each ill-formed byte counts once), and the 0-based source offset of the
  // first of them (meaningful when replaced_bytes() > 0).
  std::uint64_t replaced_bytes() const { return replaced_bytes_; }
  std::uint64_t first_replaced_at() const { return first_replaced_at_; }

 protected:
  int_type underflow() override;

 private:
  struct Replacement {
    std::uint32_t out_end;     // offset in the chunk's repaired text just after this U+FFFD
    std::uint32_t extra_after; // repaired minus source bytes in the chunk up to out_end
  };

  std::streambuf& source_;
  std::size_t chunk_;
  std::vector<char> in_;   // source bytes of the current chunk (carried bytes first)
  std::vector<char> out_;  // repaired text of the current chunk, when it needed repair
  std::vector<Replacement> replacements_;  // of the current chunk, in order
  std::array<char, 4> carry_{};  // an incomplete sequence at the end of the last chunk (at most 3 bytes)
  std::size_t carry_size_ = 0;
  bool source_done_ = false;
  std::uint64_t out_before_ = 0;  // repaired bytes of the chunks before the current one
  std::uint64_t in_before_ = 0;   // source bytes of the chunks before the current one
  std::uint64_t in_chunk_ = 0;    // source bytes of the current chunk (without the carried tail)
  std::uint64_t replaced_bytes_ = 0;
  std::uint64_t first_replaced_at_ = 0;
};

// Opens a trace file for streaming; throws TraceError naming the path when it is missing, unreadable or a
// directory.
std::unique_ptr<GzStreamBuf> open_trace_file(const std::string& path);

}  // namespace gearshift::trace
