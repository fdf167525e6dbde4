#include "trace/gz_stream.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "trace/error.hpp"

namespace gearshift::trace {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// The repaired text of `in`, read through chunks of `chunk` bytes.
std::string repaired(const std::string& in, std::size_t chunk = 1 << 16, std::uint64_t* replaced = nullptr) {
  std::stringbuf src(in);
  Utf8RepairStreamBuf buf(src, chunk);
  std::string out;
  for (auto c = buf.sbumpc(); c != std::char_traits<char>::eof(); c = buf.sbumpc())
    out += std::char_traits<char>::to_char_type(c);
  if (replaced != nullptr) *replaced = buf.replaced_bytes();
  return out;
}

TEST(Utf8Repair, ValidTextPassesUnchangedInAnyChunking) {
  // ASCII, 2-, 3- and 4-byte sequences (é, €, the boundary U+D7FF and U+E000, U+10FFFF, an emoji).
  const std::string valid = "kernel \xC3\xA9 \xE2\x82\xAC \xED\x9F\xBF \xEE\x80\x80 \xF4\x8F\xBF\xBF \xF0\x9F\x98\x80 end";
  for (std::size_t chunk : {1, 2, 3, 5, 7, 64, 1 << 16}) {
    std::uint64_t replaced = 99;
    EXPECT_EQ(repaired(valid, chunk, &replaced), valid) << "chunk " << chunk;
    EXPECT_EQ(replaced, 0u);
  }
}

TEST(Utf8Repair, EachMaximalSubpartBecomesOneReplacementCharacter) {
  struct Case {
    std::string in, out;
    std::uint64_t replaced;
  };
  const Case cases[] = {
      {"nvjet\xE9\xFF\xFE" "90", "nvjet" + kFffd + kFffd + kFffd + "90", 3},  // kineto#80: three lone bytes
      {"a\xE2\x82z", "a" + kFffd + "z", 2},           // a 3-byte sequence missing its last byte: one subpart
      {"a\xC0\xAFz", "a" + kFffd + kFffd + "z", 2},   // overlong lead C0: never valid, then a lone continuation
      {"a\xED\xA0\x80z", "a" + kFffd + kFffd + kFffd + "z", 3},  // an encoded surrogate (CESU-8)
      {"a\xF4\x90\x80\x80z", "a" + kFffd + kFffd + kFffd + kFffd + "z", 4},  // beyond U+10FFFF
      {"a\xF0\x9F\x98", "a" + kFffd, 3},              // a 4-byte sequence cut by the end of the input
      {"\x80", kFffd, 1},
  };
  for (const auto& c : cases)
    for (std::size_t chunk : {1, 2, 3, 4, 1 << 16}) {
      std::uint64_t replaced = 0;
      EXPECT_EQ(repaired(c.in, chunk, &replaced), c.out) << "chunk " << chunk << " input " << c.in;
      EXPECT_EQ(replaced, c.replaced) << "chunk " << chunk;
    }
}

TEST(Utf8Repair, PositionsMapBackToSourceBytes) {
  // "ab" E9 "cd" FF FE "e": repaired "ab" FFFD "cd" FFFD FFFD "e".
  const std::string in = "ab\xE9" "cd\xFF\xFE" "e";
  for (std::size_t chunk : {1, 3, 1 << 16}) {
    std::stringbuf src(in);
    Utf8RepairStreamBuf buf(src, chunk);
    std::string out;
    std::vector<std::uint64_t> source_of;  // source position after each repaired byte handed out
    for (auto c = buf.sbumpc(); c != std::char_traits<char>::eof(); c = buf.sbumpc()) {
      out += std::char_traits<char>::to_char_type(c);
      source_of.push_back(buf.source_position());
    }
    ASSERT_EQ(out, "ab" + kFffd + "cd" + kFffd + kFffd + "e");
    EXPECT_EQ(buf.first_replaced_at(), 2u);
    // After "ab": 2; after the first U+FFFD: 3; after "cd": 5; after both: 7; after "e": 8.
    EXPECT_EQ(source_of[1], 2u) << "chunk " << chunk;
    EXPECT_EQ(source_of[4], 3u) << "chunk " << chunk;
    EXPECT_EQ(source_of[6], 5u) << "chunk " << chunk;
    EXPECT_EQ(source_of[12], 7u) << "chunk " << chunk;
    EXPECT_EQ(source_of[13], 8u) << "chunk " << chunk;
    EXPECT_EQ(buf.source_position(), in.size());
  }
}

TEST(GzStream, ADirectoryIsRefusedByName) {
  std::string dir = std::filesystem::temp_directory_path().string();
  try {
    open_trace_file(dir);
    FAIL() << "no error";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gearshift::trace
