// The README's table of every VMX control and capability per profile is the output of
// `vmxsim vmx-profiles` (cpu/vmx/profile_table.h), generated from vmx_controls.def and
// the profiles: it stays true when either changes. And a few rows checked by value.
#include "cpu/vmx/profile_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

using namespace vmxsim;

TEST(VmxProfileTable, TheReadmeShowsTheTableTheProfilesGive) {
  std::ifstream F(std::string(VMXSIM_SOURCE_DIR) + "/README.md", std::ios::binary);
  ASSERT_TRUE(F);
  const std::string Readme((std::istreambuf_iterator<char>(F)), std::istreambuf_iterator<char>());
  const std::string Begin = "<!-- vmx-profiles: the output of `vmxsim vmx-profiles` -->\n";
  const std::string End = "<!-- vmx-profiles end -->\n";
  const size_t B = Readme.find(Begin), E = Readme.find(End);
  ASSERT_NE(B, std::string::npos);
  ASSERT_NE(E, std::string::npos);
  ASSERT_LT(B, E);
  EXPECT_EQ(Readme.substr(B + Begin.size(), E - B - Begin.size()), vmxProfilesReport())
      << "README.md: replace the table with the output of build/vmxsim vmx-profiles";
}

TEST(VmxProfileTable, RowsSayWhatEachProfileAllows) {
  const std::string T = vmxProfileTable();
  // "Process posted interrupts": offered by full and kvm-nested, not by minimal.
  EXPECT_NE(T.find("| pin-based | 7 | Process posted interrupts | 0/1 | 0/1 | 0 | 0/1 |\n"),
            std::string::npos);
  // A reserved default1 bit is 1 everywhere.
  EXPECT_NE(T.find("| pin-based | 1 | reserved (default1) | 1 | 1 | 1 | 1 |\n"), std::string::npos);
  // CR3-load exiting: default1, which the TRUE_ MSR lets software clear.
  EXPECT_NE(T.find("| primary processor-based | 15 | CR3-load exiting | 0/1 | 0/1 | 0/1 | 0/1 |\n"),
            std::string::npos);
  // PLE: full only; #VE: full only (QEMU's Sapphire Rapids model lists neither).
  EXPECT_NE(T.find("| secondary processor-based | 10 | PAUSE-loop exiting | 0/1 | 0 | 0 | 0 |\n"),
            std::string::npos);
  EXPECT_NE(T.find("| secondary processor-based | 18 | EPT-violation #VE | 0/1 | 0 | 0 | 0 |\n"),
            std::string::npos);
  EXPECT_NE(T.find("| capability | | IA32_VMX_MISC[29]: VMWRITE to any field, exit-information "
                   "fields too | yes | yes | no | yes |\n"),
            std::string::npos);
}

// "full" names the processor it follows, and every place it differs from it has a reason.
TEST(VmxProfileTable, EveryDifferenceFromTheReferenceProcessorHasAReason) {
  const std::string D = vmxSapphireRapidsDifferences();
  EXPECT_EQ(D.find("no reason recorded"), std::string::npos) << D;
  // Exactly these rows differ: the four controls KVM does not offer L1 and XSAVES, and the
  // advanced EPT-violation information.
  const char *Rows[] = {
      "- secondary processor-based bit 10, PAUSE-loop exiting: full 0/1, Sapphire Rapids 0: ",
      "- secondary processor-based bit 18, EPT-violation #VE: full 0/1, Sapphire Rapids 0: ",
      "- secondary processor-based bit 20, Enable XSAVES/XRSTORS: full 0, Sapphire Rapids 0/1: ",
      "- secondary processor-based bit 22, Mode-based execute control for EPT: full 0/1, "
      "Sapphire Rapids 0: ",
      "- secondary processor-based bit 25, Use TSC scaling: full 0/1, Sapphire Rapids 0: ",
      "- IA32_VMX_EPT_VPID_CAP[22]: advanced VM-exit information for EPT violations: full yes, "
      "Sapphire Rapids no: ",
  };
  size_t Lines = 0;
  for (char C : D)
    Lines += C == '\n';
  EXPECT_EQ(Lines, std::size(Rows)) << D;
  for (const char *R : Rows)
    EXPECT_NE(D.find(R), std::string::npos) << R << "\n" << D;
}
