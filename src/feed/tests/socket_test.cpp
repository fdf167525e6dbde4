// The feed's transport: a missing or stale socket costs the connecting process only the bounded wait, a live one
// carries lines both ways, and the listener's private directory goes with it.
#include "feed/socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

namespace gearshift::feed {
namespace {

namespace fs = std::filesystem;

TEST(FeedSocket, MissingOrStaleSocketFailsAtOnce) {
  std::string why;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(connect_socket("/nonexistent/gearshift/feed.sock", 500, &why), -1);
  EXPECT_NE(why.find("does not exist"), std::string::npos) << why;
  // A socket file nobody listens on any more (a killed `gearshift run`).
  const std::string stale = (fs::path(::testing::TempDir()) / ("stale-" + std::to_string(getpid()) + ".sock")).string();
  fs::remove(stale);
  const int s = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, stale.c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  close(s);  // bound, never listening
  EXPECT_EQ(connect_socket(stale, 500, &why), -1);
  EXPECT_NE(why.find("stale"), std::string::npos) << why;
  fs::remove(stale);
  EXPECT_EQ(connect_socket(std::string(200, 'x'), 500, &why), -1);
  EXPECT_NE(why.find("too long"), std::string::npos) << why;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
}

TEST(FeedSocket, CarriesLinesBothWaysAndRemovesItsDirectory) {
  std::string dir;
  {
    Listener l;
    dir = fs::path(l.path()).parent_path().string();
    struct stat st {};
    ASSERT_EQ(stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);  // private: only this user connects
    EXPECT_EQ(l.accept_one(), -1);        // nobody waiting: returns at once
    std::string why;
    const int c = connect_socket(l.path(), 500, &why);
    ASSERT_GE(c, 0) << why;
    int s = -1;
    for (int i = 0; i < 100 && s < 0; ++i, usleep(1000)) s = l.accept_one();
    ASSERT_GE(s, 0);
    ASSERT_TRUE(write_all(c, "H 1 5 -1 -1 -1 -\n"));
    char buf[64] = {};
    ssize_t n = -1;
    for (int i = 0; i < 100 && n < 0; ++i, usleep(1000)) n = read(s, buf, sizeof buf);
    EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), "H 1 5 -1 -1 -1 -\n");
    ASSERT_TRUE(write_all(s, "M 5000\n"));
    n = read(c, buf, sizeof buf);
    EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), "M 5000\n");
    close(s);
    EXPECT_FALSE(write_all(c, std::string(1 << 20, 'x')));  // the reader is gone: false, no SIGPIPE
    close(c);
  }
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace gearshift::feed
