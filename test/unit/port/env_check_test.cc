// SPDX-License-Identifier: BSD-3-Clause
// uroced's refusal to start with a foreign libibverbs.so.1 reachable by the loader.
#include "env_check.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cstring>

#include <cstdio>
#include <string>

namespace uroce::daemon {
namespace {

class EnvCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uroce-envcheck-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    sys_ = root_ + "/sys";
    shim_ = root_ + "/shim";
    empty_ = root_ + "/empty";
    link_ = root_ + "/link";
    for (const std::string &d : {sys_, shim_, empty_, link_})
      ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    touch(sys_ + "/libibverbs.so.1.14.44.0");
    ASSERT_EQ(symlink("libibverbs.so.1.14.44.0", (sys_ + "/libibverbs.so.1").c_str()), 0);
    touch(shim_ + "/libibverbs.so.1");
    touch(shim_ + "/libother.so");
    // a directory whose libibverbs.so.1 is a symlink to the system one is fine
    ASSERT_EQ(symlink((sys_ + "/libibverbs.so.1").c_str(), (link_ + "/libibverbs.so.1").c_str()),
              0);
  }
  void TearDown() override {
    for (const std::string &f :
         {sys_ + "/libibverbs.so.1", sys_ + "/libibverbs.so.1.14.44.0", shim_ + "/libibverbs.so.1",
          shim_ + "/libother.so", link_ + "/libibverbs.so.1"})
      unlink(f.c_str());
    for (const std::string &d : {sys_, shim_, empty_, link_, root_})
      rmdir(d.c_str());
  }
  static void touch(const std::string &p) {
    FILE *f = std::fopen(p.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  std::string check(const std::string &llp, const std::string &pre) {
    return check_ibverbs_env(llp.empty() ? nullptr : llp.c_str(),
                             pre.empty() ? nullptr : pre.c_str(), {sys_});
  }
  std::string root_, sys_, shim_, empty_, link_;
};

TEST_F(EnvCheck, CleanEnvironment) {
  EXPECT_EQ(check("", ""), "");
  EXPECT_EQ(check(empty_, ""), "");
  EXPECT_EQ(check(sys_, ""), "");
  EXPECT_EQ(check(link_ + ":" + empty_, ""), "");
  EXPECT_EQ(check("", sys_ + "/libibverbs.so.1"), "");
  EXPECT_EQ(check("", empty_ + "/libfoo.so"), "");
}

TEST_F(EnvCheck, ShimOnLibraryPath) {
  const std::string m = check(empty_ + ":" + shim_, "");
  EXPECT_NE(m.find("refusing to start"), std::string::npos) << m;
  EXPECT_NE(m.find("LD_LIBRARY_PATH directory '" + shim_ + "'"), std::string::npos) << m;
  EXPECT_NE(check(shim_ + ";" + sys_, ""), "");  // ';' separates too, as in glibc
}

TEST_F(EnvCheck, EmptyEntryMeansCurrentDirectory) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(shim_.c_str()), 0);
  const std::string m = check(empty_ + "::" + sys_, "");
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_NE(m.find("directory '.'"), std::string::npos) << m;
}

TEST_F(EnvCheck, Preload) {
  std::string m = check("", shim_ + "/libibverbs.so.1");
  EXPECT_NE(m.find("LD_PRELOAD names"), std::string::npos) << m;
  m = check("", "libibverbs.so.1");  // bare name: not provably the system one
  EXPECT_NE(m.find("LD_PRELOAD names"), std::string::npos) << m;
  m = check("", empty_ + "/libfoo.so " + shim_ + "/libother.so");
  EXPECT_NE(m.find("lies in a directory"), std::string::npos) << m;
}

TEST(EnvCheckDefaults, SystemDirsListed) {
  const auto dirs = default_system_lib_dirs();
  EXPECT_NE(std::find(dirs.begin(), dirs.end(), "/usr/lib/x86_64-linux-gnu"), dirs.end());
}

}  // namespace
}  // namespace uroce::daemon
