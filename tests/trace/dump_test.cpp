// `vmxsim trace dump`: the exact text for a hand-built trace covering every record
// shape (tests/trace/golden/every_shape.txt) and for a xen-3.0 trace (xen30_*.txt;
// regenerate with VMXSIM_UPDATE_GOLDEN=1 and review the diff), and the command itself.
#include "trace_test_util.h"

#include "trace/dump.h"
#include "tests/support/files.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace vmxsim::trace;
using namespace vmxsim::trace::testing;

using vmxsim::test::readFile;

namespace {

std::string dumpToString(const std::vector<uint8_t> &Bytes, ReadOrder Order, bool &Clean) {
  TraceReader R(Order);
  R.openMemory(Bytes.data(), Bytes.size());
  char *Buf = nullptr;
  size_t Len = 0;
  std::FILE *F = open_memstream(&Buf, &Len);
  Clean = dumpTrace(R, F);
  std::fclose(F);
  std::string Text(Buf, Len);
  std::free(Buf);
  return Text;
}

void checkGolden(const std::string &Name, const std::string &Text) {
  const std::string Path = std::string(VMXSIM_SOURCE_DIR) + "/tests/trace/golden/" + Name;
  if (std::getenv("VMXSIM_UPDATE_GOLDEN")) {
    std::ofstream(Path, std::ios::binary) << Text;
    return;
  }
  EXPECT_EQ(Text, readFile(Path)) << "golden file " << Path;
}

} // namespace

TEST(TraceDump, EveryRecordShapeInFileOrderEqualsGolden) {
  bool Clean = false;
  checkGolden("every_shape_file_order.txt", dumpToString(everyShapeTrace(), ReadOrder::File, Clean));
  EXPECT_TRUE(Clean);
}

TEST(TraceDump, EveryRecordShapeMergedEqualsGolden) {
  bool Clean = false;
  checkGolden("every_shape_merged.txt", dumpToString(everyShapeTrace(), ReadOrder::Merged, Clean));
  EXPECT_TRUE(Clean);
}

TEST(TraceDump, Xen30TraceInFileOrderEqualsGolden) {
  bool Clean = false;
  checkGolden("xen30_file_order.txt", dumpToString(xen30Trace(), ReadOrder::File, Clean));
  EXPECT_TRUE(Clean);
}

TEST(TraceDump, Xen30TraceMergedEqualsGolden) {
  bool Clean = false;
  checkGolden("xen30_merged.txt", dumpToString(xen30Trace(), ReadOrder::Merged, Clean));
  EXPECT_TRUE(Clean);
}

TEST(TraceDump, CommandPrintsRecordsThenTheErrorOfATruncatedFile) {
  std::vector<uint8_t> File = everyShapeTrace();
  const std::string Path = std::string(VMXSIM_BINARY_DIR) + "/tests/trace_dump_truncated.xt";
  File.resize(50);
  {
    std::ofstream Out(Path, std::ios::binary);
    Out.write(reinterpret_cast<const char *>(File.data()), std::streamsize(File.size()));
  }
  const std::string OutPath = Path + ".txt", ErrPath = Path + ".err";
  const std::string Cmd = std::string(VMXSIM_BINARY_DIR) + "/vmxsim trace dump --file-order " +
                          Path + " >" + OutPath + " 2>" + ErrPath;
  const int Status = std::system(Cmd.c_str());
  ASSERT_TRUE(WIFEXITED(Status));
  EXPECT_EQ(WEXITSTATUS(Status), 2);
  bool Clean = true;
  EXPECT_EQ(readFile(OutPath), dumpToString(File, ReadOrder::File, Clean));
  EXPECT_FALSE(Clean);
  TraceError E;
  readAll(File, ReadOrder::File, &E);
  EXPECT_EQ(readFile(ErrPath), "vmxsim: error: " + Path + ": " + E.str() + "\n");
}
