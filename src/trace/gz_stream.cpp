#include "trace/gz_stream.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

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

int GzStreamBuf::read_some(char* into, std::size_t n) {
  if (!error_.empty()) return 0;
  int got = gzread(static_cast<gzFile>(file_), into, static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30)));
  int errnum = 0;
  if (got < 0) {
    const char* msg = gzerror(static_cast<gzFile>(file_), &errnum);
    error_ = msg != nullptr ? msg : "decompression error";
    return 0;
  }
  if (got == 0) {
    const char* msg = gzerror(static_cast<gzFile>(file_), &errnum);
    if (errnum != Z_OK && errnum != Z_STREAM_END && msg != nullptr) error_ = msg;
  }
  return got;
}

GzStreamBuf::int_type GzStreamBuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  consumed_before_ += static_cast<std::uint64_t>(egptr() - eback());
  int n = read_some(buffer_.data(), buffer_.size());
  setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
  if (n == 0) return traits_type::eof();
  return traits_type::to_int_type(*gptr());
}

std::streamsize GzStreamBuf::xsgetn(char* s, std::streamsize n) {
  std::streamsize got = std::min<std::streamsize>(n, egptr() - gptr());
  std::memcpy(s, gptr(), static_cast<std::size_t>(got));
  gbump(static_cast<int>(got));
  // The rest straight from zlib into the caller's buffer (one copy less for Utf8RepairStreamBuf).
  while (got < n) {
    consumed_before_ += static_cast<std::uint64_t>(egptr() - eback());
    setg(buffer_.data(), buffer_.data(), buffer_.data());
    int r = read_some(s + got, static_cast<std::size_t>(n - got));
    if (r <= 0) break;
    consumed_before_ += static_cast<std::uint64_t>(r);
    got += r;
  }
  return got;
}

bool GzStreamBuf::compressed() const { return gzdirect(static_cast<gzFile>(file_)) == 0; }

std::unique_ptr<GzStreamBuf> open_trace_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw TraceError(path, "is a directory, not a trace file");
  try {
    return std::make_unique<GzStreamBuf>(path);
  } catch (const std::runtime_error&) {
    throw TraceError(path, "cannot open for reading (missing file or no permission)");
  }
}

namespace {

constexpr char kReplacement[3] = {'\xEF', '\xBF', '\xBD'};  // U+FFFD

// Index of the first byte >= 0x80 in [i, n), or n; 32 bytes at a time (the common case is all ASCII).
std::size_t skip_ascii(const unsigned char* p, std::size_t i, std::size_t n) {
  constexpr std::uint64_t kHigh = 0x8080808080808080ULL;
  while (i + 32 <= n) {
    std::uint64_t w[4];
    std::memcpy(w, p + i, 32);
    if (((w[0] | w[1] | w[2] | w[3]) & kHigh) != 0) break;
    i += 32;
  }
  while (i + 8 <= n) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    if ((w & kHigh) != 0) break;
    i += 8;
  }
  while (i < n && p[i] < 0x80) ++i;
  return i;
}

}  // namespace

Utf8RepairStreamBuf::Utf8RepairStreamBuf(std::streambuf& source, std::size_t chunk_bytes)
    : source_(source), chunk_(chunk_bytes), in_(chunk_bytes + 4) {
  setg(in_.data(), in_.data(), in_.data());
}

std::uint64_t Utf8RepairStreamBuf::source_position(std::uint64_t repaired) const {
  if (repaired < out_before_) {  // an earlier chunk: estimated with the growth of all earlier chunks
    std::uint64_t growth = out_before_ - in_before_;
    return repaired > growth ? repaired - growth : 0;
  }
  std::uint64_t off = repaired - out_before_;
  // The replacements that end at or before `off` say how much the text grew before it.
  auto it = std::upper_bound(replacements_.begin(), replacements_.end(), off,
                             [](std::uint64_t o, const Replacement& r) { return o < r.out_end; });
  std::uint64_t grown = it == replacements_.begin() ? 0 : std::prev(it)->extra_after;
  std::uint64_t src = off - grown;
  if (it != replacements_.end()) src = std::min<std::uint64_t>(src, it->out_end - it->extra_after);  // inside one
  return in_before_ + src;
}

Utf8RepairStreamBuf::int_type Utf8RepairStreamBuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  while (true) {
    out_before_ += static_cast<std::uint64_t>(egptr() - eback());
    in_before_ += in_chunk_;
    in_chunk_ = 0;
    replacements_.clear();
    std::memcpy(in_.data(), carry_.data(), carry_size_);
    std::size_t total = carry_size_;
    carry_size_ = 0;
    if (!source_done_) {
      std::streamsize n = source_.sgetn(in_.data() + total, static_cast<std::streamsize>(chunk_));
      if (n <= 0) source_done_ = true;
      else total += static_cast<std::size_t>(n);
    }
    setg(in_.data(), in_.data(), in_.data());
    if (total == 0) return traits_type::eof();

    const auto* p = reinterpret_cast<const unsigned char*>(in_.data());
    std::size_t i = 0;
    std::size_t end = total;  // source bytes of this chunk handed out (the rest is carried)
    std::size_t copied = 0;   // source bytes already copied to out_ (when repairing)
    bool repairing = false;
    while (true) {
      i = skip_ascii(p, i, total);
      if (i >= total) break;
      unsigned char b = p[i];
      std::size_t need = 0;  // continuation bytes the lead byte asks for (0: not a lead byte)
      unsigned char lo = 0x80, hi = 0xBF;  // range of the first continuation byte (Unicode table 3-7)
      if (b >= 0xC2 && b <= 0xDF) need = 1;
      else if (b == 0xE0) need = 2, lo = 0xA0;
      else if (b == 0xED) need = 2, hi = 0x9F;
      else if (b >= 0xE1 && b <= 0xEF) need = 2;
      else if (b == 0xF0) need = 3, lo = 0x90;
      else if (b == 0xF4) need = 3, hi = 0x8F;
      else if (b >= 0xF1 && b <= 0xF3) need = 3;
      std::size_t len = 1;  // the maximal subpart: lead byte and the fitting continuation bytes
      bool ok = need > 0;
      bool carried = false;
      for (std::size_t k = 1; ok && k <= need; ++k) {
        if (i + k >= total) {
          if (!source_done_) carried = true;  // the rest may come with the next chunk
          ok = false;
          break;
        }
        unsigned char c = p[i + k];
        if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) {
          ok = false;
          break;
        }
        ++len;
      }
      if (carried) {
        carry_size_ = total - i;
        std::memcpy(carry_.data(), in_.data() + i, carry_size_);
        end = i;
        break;
      }
      if (ok) {
        i += need + 1;
        continue;
      }
      if (!repairing) {
        out_.clear();
        repairing = true;
      }
      out_.insert(out_.end(), in_.data() + copied, in_.data() + i);
      out_.insert(out_.end(), kReplacement, kReplacement + 3);
      if (replaced_bytes_ == 0) first_replaced_at_ = in_before_ + i;
      replaced_bytes_ += len;
      i += len;
      copied = i;
      replacements_.push_back(Replacement{static_cast<std::uint32_t>(out_.size()),
                                          static_cast<std::uint32_t>(out_.size() - i)});
    }
    in_chunk_ = end;
    if (repairing) {
      out_.insert(out_.end(), in_.data() + copied, in_.data() + end);
      setg(out_.data(), out_.data(), out_.data() + out_.size());
    } else {
      setg(in_.data(), in_.data(), in_.data() + end);
    }
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    // Only an incomplete sequence came (a tiny read): read on.
  }
}

}  // namespace gearshift::trace
