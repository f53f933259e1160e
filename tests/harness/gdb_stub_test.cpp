// The gdb stub without sockets (harness/gdb_packet.h, harness/gdb_stub.h): the packet
// layer's framing, checksums and escapes; exact replies to the packets gdb sends; a
// table of garbage with its exact replies; a deterministic fuzz of both layers; and the
// determinism rule: a run stopped at breakpoints, stepped, watched and continued under
// the stub is the uninterrupted run byte for byte (serial output, both traces, clocks).
#include "harness/gdb_stub.h"
#include "cpu/vmx/vmx_state.h"
#include "harness/gtest/vmxsim_gtest.h"
#include "harness/loader.h"
#include "tests/support/files.h"
#include "tests/support/random.h"
#include "tests/support/traced_run.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::gdb;
using vmxsim::test::readFile;
using vmxsim::test::SplitMix64;
using vmxsim::test::TracedMachine;
using vmxsim::testing::GroundTruth;

namespace {

using K = GdbPacketEvent::Kind;

std::vector<GdbPacketEvent> feedAll(GdbPacketReader &R, std::string_view Bytes) {
  std::vector<GdbPacketEvent> Out;
  for (char C : Bytes)
    if (auto E = R.feed(uint8_t(C)))
      Out.push_back(*E);
  return Out;
}

/// A TracedMachine whose temporary files are named after this test.
struct Traced : TracedMachine {
  Traced(const std::string &Image, const std::string &Append, unsigned Cpus,
         const std::string &Tag)
      : TracedMachine(Image, Append, Cpus, Tag, "gdbstub") {}
};

/// The same run: result, clocks, serial output and both traces (the ground truth of at
/// least MinTraceBytes, so that an empty one cannot pass).
void expectSameRun(const TracedMachine::Outcome &A, const TracedMachine::Outcome &B,
                   size_t MinTraceBytes) {
  EXPECT_EQ(A.Result.Reason, B.Result.Reason);
  EXPECT_EQ(A.Result.ExitStatus, B.Result.ExitStatus);
  EXPECT_EQ(A.Result.Retired, B.Result.Retired);
  EXPECT_EQ(A.Cycles, B.Cycles);
  EXPECT_EQ(A.Retired, B.Retired);
  EXPECT_EQ(A.Serial, B.Serial);
  EXPECT_GT(A.GtBytes.size(), MinTraceBytes);
  EXPECT_TRUE(A.GtBytes == B.GtBytes) << "the ground truth differs";
  EXPECT_TRUE(A.HvBytes == B.HvBytes) << "the hypervisor's trace differs";
}

std::string one(GdbStub &S, const std::string &P) {
  GdbStub::Reply R = S.handle(P);
  EXPECT_EQ(R.Packets.size(), 1u) << P;
  return R.Packets.empty() ? "<none>" : R.Packets[0];
}

std::string rcmd(const std::string &Cmd) { return "qRcmd," + toHex(Cmd); }

/// The text of a qRcmd's O packets; expects the final OK.
std::string monitorText(GdbStub &S, const std::string &Cmd) {
  GdbStub::Reply R = S.handle(rcmd(Cmd));
  EXPECT_FALSE(R.Packets.empty());
  if (R.Packets.empty())
    return "";
  EXPECT_EQ(R.Packets.back(), "OK");
  std::string Text;
  for (size_t I = 0; I + 1 < R.Packets.size(); ++I) {
    EXPECT_EQ(R.Packets[I][0], 'O');
    Text += fromHex(R.Packets[I].substr(1)).value_or("<bad hex>");
  }
  return Text;
}

uint64_t regValue(GdbStub &S, unsigned N) {
  auto B = fromHex(one(S, fmt::format("p{:x}", N)));
  EXPECT_TRUE(B);
  uint64_t V = 0;
  for (size_t I = 0; B && I < B->size() && I < 8; ++I)
    V |= uint64_t(uint8_t((*B)[I])) << (8 * I);
  return V;
}

constexpr unsigned kRip = 16;

/// The address of CpusDone, the hypervisor core's count of the CPUs that finished their
/// guest (hvm/images/hv/main.c: 0 -> 1 once per CPU, near the end of the run).
uint64_t cpusDoneAddress() {
  const std::string Elf = readFile(std::string(VMXSIM_IMAGE_DIR) + "/hv.elf");
  uint64_t Addr = 0, Size = 0;
  EXPECT_TRUE(findElfSymbol({reinterpret_cast<const uint8_t *>(Elf.data()), Elf.size()},
                            "CpusDone", Addr, Size));
  EXPECT_EQ(Size, 4u);
  return Addr;
}

} // namespace

// --- The packet layer ---

TEST(GdbPacket, FramesWithChecksumAndEscapes) {
  EXPECT_EQ(framePacket(""), "$#00");
  EXPECT_EQ(framePacket("OK"), "$OK#9a");
  // '$' '#' '}' '*' go as '}' and the byte XOR 0x20; the checksum covers what is sent.
  EXPECT_EQ(framePacket("a$b#c}d*"), "$a}\x04" "b}\x03" "c}]d}\x0a#ec");
  GdbPacketReader R;
  auto E = feedAll(R, framePacket("a$b#c}d*"));
  ASSERT_EQ(E.size(), 1u);
  EXPECT_EQ(E[0].K, K::Packet);
  EXPECT_EQ(E[0].Payload, "a$b#c}d*");
}

TEST(GdbPacket, ReaderEventsForAcksInterruptsAndGarbage) {
  struct Case {
    const char *Name;
    std::string In;
    std::vector<std::pair<K, std::string>> Want;
  };
  const Case Cases[] = {
      {"ack, nack, interrupt", "+-\x03", {{K::Ack, ""}, {K::Nack, ""}, {K::Interrupt, ""}}},
      {"a good packet", "$g#67", {{K::Packet, "g"}}},
      {"upper-case checksum digits", "$qC#B4", {{K::Packet, "qC"}}},
      {"a wrong checksum", "$g#68", {{K::BadChecksum, ""}}},
      {"a checksum that is not hex", "$g#zz", {{K::BadChecksum, ""}}},
      {"noise between packets is dropped", "xyz\n$g#67 \r", {{K::Packet, "g"}}},
      {"a '$' inside restarts the packet", "$gar$g#67", {{K::Packet, "g"}}},
      {"0x03 inside a packet is data", "$\x03#03", {{K::Packet, "\x03"}}},
      {"an escape at the very end is dropped", "$a}#de", {{K::Packet, "a"}}},
      {"truncated: no event", "$m0,4#", {}},
      {"empty packet", "$#00", {{K::Packet, ""}}},
  };
  for (const Case &C : Cases) {
    GdbPacketReader R;
    auto E = feedAll(R, C.In);
    ASSERT_EQ(E.size(), C.Want.size()) << C.Name;
    for (size_t I = 0; I < E.size(); ++I) {
      EXPECT_EQ(E[I].K, C.Want[I].first) << C.Name;
      EXPECT_EQ(E[I].Payload, C.Want[I].second) << C.Name;
    }
  }
}

TEST(GdbPacket, OverlongPacketsAreDroppedWholeAndTheNextOneIsRead) {
  GdbPacketReader R;
  const std::string Long(kMaxPacketBytes + 1, 'a');
  auto E = feedAll(R, framePacket(Long) + framePacket("?"));
  ASSERT_EQ(E.size(), 2u);
  EXPECT_EQ(E[0].K, K::Overlong);
  EXPECT_EQ(E[0].Payload, "");
  EXPECT_EQ(E[1].K, K::Packet);
  EXPECT_EQ(E[1].Payload, "?");
  // Exactly the limit is accepted.
  E = feedAll(R, framePacket(std::string(kMaxPacketBytes, 'b')));
  ASSERT_EQ(E.size(), 1u);
  EXPECT_EQ(E[0].K, K::Packet);
  EXPECT_EQ(E[0].Payload.size(), kMaxPacketBytes);
  // A body of never-ending bytes is not buffered without bound.
  GdbPacketReader Flood;
  Flood.feed('$');
  for (size_t I = 0; I < 10 * kMaxPacketBytes; ++I)
    EXPECT_FALSE(Flood.feed('x'));
  EXPECT_TRUE(Flood.inPacket());
}

TEST(GdbPacket, HexHelpers) {
  EXPECT_EQ(toHex(std::string("\x00\x7f\xff", 3)), "007fff");
  EXPECT_EQ(fromHex("007fFF"), std::string("\x00\x7f\xff", 3));
  EXPECT_FALSE(fromHex("abc"));
  EXPECT_FALSE(fromHex("zz"));
  EXPECT_EQ(parseHexNumber("ffffffffffffffff"), ~uint64_t(0));
  EXPECT_FALSE(parseHexNumber("10000000000000000"));
  EXPECT_FALSE(parseHexNumber(""));
  EXPECT_FALSE(parseHexNumber("-1"));
  EXPECT_EQ(hexLittleEndian(0x1234, 4), "34120000");
}

// --- Packets and replies ---

TEST(GdbStub, AnswersTheQueriesGdbStartsWith) {
  Traced T("vmx_e2e.elf", "", 1, "queries");
  ASSERT_TRUE(T.M);
  GdbStub S(*T.M);
  S.attached(0);
  EXPECT_EQ(one(S, "qSupported:multiprocess+;swbreak+;hwbreak+;qRelocInsn+;xmlRegisters=i386"),
            "PacketSize=4000;qXfer:features:read+;qXfer:threads:read+;QStartNoAckMode+;"
            "swbreak+;hwbreak+;vContSupported+");
  EXPECT_FALSE(S.noAck());
  EXPECT_EQ(one(S, "QStartNoAckMode"), "OK");
  EXPECT_TRUE(S.noAck());
  EXPECT_EQ(one(S, "?"), "T05thread:01;");
  EXPECT_EQ(one(S, "qfThreadInfo"), "m01");
  EXPECT_EQ(one(S, "qsThreadInfo"), "l");
  EXPECT_EQ(one(S, "qC"), "QC01");
  EXPECT_EQ(one(S, "qAttached"), "1");
  EXPECT_EQ(one(S, "vCont?"), "vCont;c;C;s;S");
  EXPECT_EQ(one(S, "Hg1"), "OK");
  EXPECT_EQ(one(S, "Hc-1"), "OK");
  EXPECT_EQ(one(S, "T1"), "OK");
  EXPECT_EQ(one(S, "T2"), "E02");
  EXPECT_EQ(one(S, "qXfer:threads:read::0,fff"),
            "l<?xml version=\"1.0\"?>\n<threads>\n<thread id=\"01\" core=\"0\" "
            "name=\"CPU 0\"/>\n</threads>\n");
  // The target description, read in pieces as gdb does, is the whole document.
  const std::string Xml = GdbStub::targetXml();
  std::string Got;
  for (uint64_t Off = 0;;) {
    const std::string R = one(S, fmt::format("qXfer:features:read:target.xml:{:x},100", Off));
    ASSERT_TRUE(R[0] == 'm' || R[0] == 'l') << R;
    Got += R.substr(1);
    Off += R.size() - 1;
    if (R[0] == 'l')
      break;
  }
  EXPECT_EQ(Got, Xml);
  EXPECT_NE(Xml.find("<architecture>i386:x86-64</architecture>"), std::string::npos);
  EXPECT_NE(Xml.find("<feature name=\"org.gnu.gdb.i386.segments\">\n<reg name=\"fs_base\" "
                     "bitsize=\"64\" type=\"int\" regnum=\"57\"/>"),
            std::string::npos);
  EXPECT_NE(Xml.find("<reg name=\"efer\" bitsize=\"64\" type=\"int64\" regnum=\"64\" "
                     "group=\"general\"/>"),
            std::string::npos);
  EXPECT_EQ(one(S, "qXfer:features:read:other.xml:0,10"), "E00");
  // The ends of a session: detach answers OK, kill nothing (gdb expects no reply).
  GdbStub::Reply R = S.handle("D");
  EXPECT_EQ(R.Packets, std::vector<std::string>{"OK"});
  EXPECT_EQ(R.After, GdbStub::Reply::Then::Detach);
  EXPECT_FALSE(S.noAck()); // the session is forgotten
  R = S.handle("k");
  EXPECT_TRUE(R.Packets.empty());
  EXPECT_EQ(R.After, GdbStub::Reply::Then::Kill);
  R = S.handle("vKill;1");
  EXPECT_EQ(R.Packets, std::vector<std::string>{"OK"});
  EXPECT_EQ(R.After, GdbStub::Reply::Then::Kill);
}

TEST(GdbStub, RegistersAndMemoryOfTheSelectedCpu) {
  Traced T("vmx_e2e.elf", "", 1, "regs");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  GdbStub S(M);
  S.attached(0);
  // Into long mode first: the first VM exit.
  EXPECT_NE(monitorText(S, "exit").find("stopped: the VM exit"), std::string::npos);
  const CpuState &St = M.cpu(0).S;
  const std::string G = one(S, "g");
  // 24 of 8 or 4 bytes, 8 x87 of 10, 8 x87 control of 4, 16 XMM of 16, MXCSR, 2 bases,
  // 6 control registers: 1200 hex digits.
  EXPECT_EQ(G.size(), 2u * (16 * 8 + 8 + 4 + 6 * 4 + 8 * 10 + 8 * 4 + 16 * 16 + 4 + 2 * 8 + 6 * 8));
  EXPECT_EQ(G.substr(0, 16), hexLittleEndian(St.Gpr[0], 8));        // rax
  EXPECT_EQ(G.substr(16, 16), hexLittleEndian(St.Gpr[3], 8));       // rbx
  EXPECT_EQ(G.substr(16 * 16, 16), hexLittleEndian(St.Rip, 8));     // rip
  EXPECT_EQ(G.substr(17 * 16, 8), hexLittleEndian(St.Rflags, 4));   // eflags
  EXPECT_EQ(G.substr(17 * 16 + 8, 8), hexLittleEndian(St.Seg[1].Selector, 4)); // cs
  EXPECT_EQ(regValue(S, kRip), St.Rip);
  EXPECT_EQ(regValue(S, 59), St.Cr0);
  EXPECT_EQ(regValue(S, 61), St.Cr3);
  EXPECT_EQ(regValue(S, 64), St.Efer);
  EXPECT_EQ(one(S, "p41"), "E03");
  // P and G write what they are given.
  EXPECT_EQ(one(S, "P0=efcdab8967452301"), "OK");
  EXPECT_EQ(M.cpu(0).S.Gpr[0], 0x0123456789abcdefu);
  EXPECT_EQ(one(S, "G" + G), "OK");
  EXPECT_EQ(one(S, "g"), G);
  EXPECT_EQ(M.cpu(0).S.Gpr[0], St.Gpr[0]);
  // Memory through the paging: the code at RIP, then an address no table maps.
  uint8_t Code[4];
  ASSERT_FALSE(M.readLinear(0, Gla(St.Rip), Code, 4));
  EXPECT_EQ(one(S, fmt::format("m{:x},4", St.Rip)),
            toHex(std::string(reinterpret_cast<char *>(Code), 4)));
  EXPECT_EQ(one(S, "m7fff00000000,4"), "E14");
  EXPECT_EQ(one(S, "M7fff00000000,1:00"), "E14");
  // A write and its read-back; X with binary data (escapes undone by the packet layer).
  const uint64_t Scratch = 0x7000;
  std::string Old(8, '\0');
  ASSERT_FALSE(M.readLinear(0, Gla(Scratch), Old.data(), 8));
  EXPECT_EQ(one(S, "M7000,4:deadbeef"), "OK");
  EXPECT_EQ(one(S, "m7000,4"), "deadbeef");
  EXPECT_EQ(one(S, std::string("X7000,2:") + "#}"), "OK");
  EXPECT_EQ(one(S, "m7000,2"), "237d");
  EXPECT_EQ(one(S, "X7000,0:"), "OK");
  EXPECT_EQ(one(S, fmt::format("M7000,8:{}", toHex(Old))), "OK");
}

TEST(GdbStub, GarbageGetsExactReplies) {
  Traced T("vmx_e2e.elf", "", 1, "garbage");
  ASSERT_TRUE(T.M);
  GdbStub S(*T.M);
  S.attached(0);
  const uint64_t Retired = T.M->cpu(0).Retired;
  const std::pair<const char *, const char *> Table[] = {
      {"", ""},                 // nothing
      {"!", ""},                // extended mode: not offered
      {"qUnknownThing", ""},    // unknown query
      {"vMustReplyEmpty", ""},  //
      {"Qfoo", ""},             //
      {"\x01\x02", ""},         // bytes that are no packet letter
      {"m", "E01"},             // truncated
      {"m1000", "E01"},         //
      {"m1000,", "E01"},        //
      {"mzz,4", "E01"},         //
      {"m1000,4x", "E01"},      //
      {"M1000,2:abc", "E01"},   // odd hex
      {"M1000,2:ab", "E01"},    // fewer bytes than the length
      {"M1000,1:zz", "E01"},    //
      {"X1000,3:ab", "E01"},    //
      {"p", "E01"},             //
      {"pxyz", "E01"},          //
      {"p10000", "E03"},        // no such register
      {"P10=12", "E01"},        // rip needs 8 bytes
      {"P=", "E01"},            //
      {"G00", "E01"},           // a torn register
      {"Gzz", "E01"},           //
      {"Hx1", "E01"},           //
      {"Hg", "E01"},            //
      {"Hg9", "E02"},           // no such thread
      {"Hgzz", "E02"},          //
      {"T", "E02"},             //
      {"Z0", "E01"},            //
      {"Z0,1000", "E01"},       //
      {"Zq,1000,1", ""},        // a kind of breakpoint there is no such packet for
      {"Z5,1000,4", ""},        // no such kind of watchpoint
      {"Z2,1000,0", "E01"},     // an empty range
      {"Z3,1000,0", "E01"},     //
      {"Z4,1000,0", "E01"},     //
      {"Z2,ffffffffffffffff,2", "E01"}, // a range that wraps
      {"Z3,ffffffffffffffff,2", "E01"}, //
      {"Z4,1000,100001", "E01"}, // more than GdbStub::kMaxWatchBytes
      {"Z3,1000,100001", "E01"}, //
      {"Z3,1000", "E01"},       //
      {"Z4,zz,4", "E01"},       //
      {"z3,1000,4", "OK"},      // removing what is not set
      {"vCont", "E01"},         //
      {"vCont;", "E01"},        //
      {"vCont;x", "E01"},       //
      {"vCont;s:9", "E02"},     //
      {"vCont;C1", "E01"},      //
      {"vCont;t", "E01"},       // non-stop's stop action: not offered
      {"c1000", "E01"},         // resuming elsewhere: not offered
      {"C05;1000", "E01"},      //
      {"qRcmd,zz", "E01"},      //
      {"qXfer:features:read:target.xml:zz", "E01"},
      {"qXfer:memory-map:read::0,10", ""},
      {"qThreadExtraInfo,9", "E02"},
  };
  for (auto [In, Want] : Table)
    EXPECT_EQ(one(S, In), Want) << "packet \"" << In << "\"";
  EXPECT_EQ(T.M->cpu(0).Retired, Retired); // nothing ran
  EXPECT_EQ(one(S, "?"), "T05thread:01;");
  // Monitor commands it does not know, or used wrongly, say so and end with OK.
  EXPECT_EQ(monitorText(S, "frobnicate"),
            "unknown monitor command \"frobnicate\"; monitor help lists them\n");
  EXPECT_EQ(monitorText(S, "exit NoSuchReason"),
            "no exit reason \"NoSuchReason\" (cpu/vmx/exit_reasons.def)\n");
  EXPECT_EQ(monitorText(S, "exit 9999"),
            "no exit reason \"9999\" (cpu/vmx/exit_reasons.def)\n");
  EXPECT_EQ(monitorText(S, "entry now"), "usage: monitor entry\n");
  EXPECT_EQ(monitorText(S, "trace"), "usage: monitor trace N (N >= 1)\n");
  EXPECT_EQ(monitorText(S, "trace 0"), "usage: monitor trace N (N >= 1)\n");
  EXPECT_EQ(monitorText(S, "trace 99999999999"), "usage: monitor trace N (N >= 1)\n");
  EXPECT_EQ(monitorText(S, "vmcs"), "CPU 0 has no current VMCS\n");
  EXPECT_EQ(monitorText(S, "snapshot take a"),
            "usage: monitor snapshot save FILE | monitor snapshot restore FILE\n");
  EXPECT_EQ(monitorText(S, "snapshot restore /nonexistent/x.snap").rfind("snapshot: ", 0), 0u);
  EXPECT_EQ(T.M->cpu(0).Retired, Retired);
}

TEST(GdbStub, FuzzedBytesNeverCrashTheLayers) {
  Traced T("vmx_e2e.elf", "", 1, "fuzz");
  ASSERT_TRUE(T.M);
  GdbStub S(*T.M);
  S.attached(0);
  // Packets that do not run the machine, mutated; and raw bytes into the reader.
  const std::string Seeds[] = {"g", "m1000,40", "M1000,2:abcd", "p10", "P0=0011223344556677",
                               "Hg1", "qXfer:features:read:target.xml:0,100", "T1", "Z0,1000,1",
                               "z0,1000,1", "Z2,2000,8", "z2,2000,8", "Z3,2000,8",
                               "z3,2000,8", "Z4,1fff,3", "z4,1fff,3", "qRcmd,68656c70",
                               "qRcmd,76 6d6373", "X1000,1:a", "qThreadExtraInfo,1"};
  SplitMix64 Rng(0x9db);
  GdbPacketReader R;
  for (unsigned I = 0; I < 20000; ++I) {
    std::string P = Seeds[Rng.nextBelow(std::size(Seeds))];
    const unsigned Edits = unsigned(Rng.nextBelow(4));
    for (unsigned E = 0; E < Edits && !P.empty(); ++E) {
      const size_t At = size_t(Rng.nextBelow(P.size()));
      switch (Rng.nextBelow(3)) {
      case 0:
        P[At] = char(Rng.nextBelow(256));
        break;
      case 1:
        P.erase(At, 1);
        break;
      default:
        P.insert(At, 1, "0123456789abcdef,:;-"[Rng.nextBelow(20)]);
        break;
      }
    }
    // Only packets that cannot run the machine: the fuzz is about parsing.
    if (!P.empty() && (P[0] == 'c' || P[0] == 's' || P[0] == 'C' || P[0] == 'S' ||
                       P[0] == 'v' || P[0] == 'D' || P[0] == 'k' || P[0] == 'q'))
      if (P.rfind("qXfer", 0) != 0 && P.rfind("qThread", 0) != 0)
        continue;
    (void)S.handle(P);
    for (char C : framePacket(P))
      (void)R.feed(uint8_t(Rng.nextBelow(8) == 0 ? char(Rng.nextBelow(256)) : C));
  }
  EXPECT_EQ(one(S, "qC"), "QC01");
}

// --- Running under the stub ---

TEST(GdbStub, BreakpointsStepsAndWatchpointsStopExactly) {
  Traced T("vmx_e2e.elf", "", 1, "stops");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  GdbStub S(M);
  S.attached(0);
  // The first VM exit: in root operation at the host RIP, the exit handler's entry.
  const std::string First = monitorText(S, "exit");
  EXPECT_EQ(First,
            fmt::format("CPU 0 stopped: the VM exit at RIP={:#x} ({} instructions retired)\n",
                        M.cpu(0).S.Rip, M.cpu(0).Retired));
  const uint64_t HostRip = *M.readVmcs(0, "HostRip");
  EXPECT_EQ(M.cpu(0).S.Rip, HostRip);
  // A software breakpoint there: the next exit's handler, before it runs (RIP at the
  // breakpoint, nothing of the instruction done), with swbreak in the stop reply.
  EXPECT_EQ(one(S, fmt::format("Z0,{:x},1", HostRip)), "OK");
  auto G = GroundTruth::read(M);
  ASSERT_TRUE(G);
  const size_t Exits = G->exits().size();
  EXPECT_EQ(one(S, "c"), "T05thread:01;swbreak:;");
  EXPECT_EQ(regValue(S, kRip), HostRip);
  G = GroundTruth::read(M);
  ASSERT_TRUE(G);
  EXPECT_EQ(G->exits().size(), Exits + 1);
  // Continuing from the breakpoint moves on to the next exit's.
  EXPECT_EQ(one(S, "vCont;c"), "T05thread:01;swbreak:;");
  G = GroundTruth::read(M);
  ASSERT_TRUE(G);
  EXPECT_EQ(G->exits().size(), Exits + 2);
  EXPECT_EQ(one(S, fmt::format("z0,{:x},1", HostRip)), "OK");
  // Single steps: one instruction each, RIP by RIP as a plain run passes them.
  std::vector<uint64_t> Rips;
  for (unsigned I = 0; I < 5; ++I) {
    EXPECT_EQ(one(S, I % 2 ? "s" : "vCont;s:1"), "T05thread:01;");
    Rips.push_back(M.cpu(0).S.Rip);
  }
  const uint64_t RetiredAfter = M.cpu(0).Retired;
  {
    Traced P("vmx_e2e.elf", "", 1, "stops-plain");
    ASSERT_TRUE(P.M);
    ASSERT_TRUE(P.M->runUntil({StopWhen::instructions(RetiredAfter - 5)}));
    for (unsigned I = 0; I < 5; ++I) {
      ASSERT_TRUE(P.M->runUntil({StopWhen::instructions(1)}));
      EXPECT_EQ(P.M->cpu(0).S.Rip, Rips[I]) << "step " << I;
    }
  }
  // A hardware breakpoint reports hwbreak.
  EXPECT_EQ(one(S, fmt::format("Z1,{:x},1", HostRip)), "OK");
  EXPECT_EQ(one(S, "c"), "T05thread:01;hwbreak:;");
  EXPECT_EQ(one(S, fmt::format("z1,{:x},1", HostRip)), "OK");
  // monitor trace shows the last records of both traces.
  const std::string Trace = monitorText(S, "trace 2");
  EXPECT_NE(Trace.find("ground truth: the last 2 of "), std::string::npos) << Trace;
  EXPECT_NE(Trace.find("hypervisor trace: the last 2 of "), std::string::npos) << Trace;
  // monitor vmcs names the fields of the current VMCS.
  const std::string Vmcs = monitorText(S, "vmcs");
  EXPECT_NE(Vmcs.find(fmt::format("  {:<40} {:#x}\n", "HostRip", HostRip)), std::string::npos)
      << Vmcs;
  // A step across a guest instruction that exits ends at the host RIP.
  EXPECT_NE(monitorText(S, "entry").find("the VM entry"), std::string::npos);
  EXPECT_TRUE(M.cpu(0).NonRoot);
  for (unsigned I = 0; I < 1000 && M.cpu(0).NonRoot; ++I)
    EXPECT_EQ(one(S, "s"), "T05thread:01;");
  EXPECT_FALSE(M.cpu(0).NonRoot);
  EXPECT_EQ(M.cpu(0).S.Rip, HostRip);
}

TEST(GdbStub, WriteWatchpointStopsAfterTheStoringInstruction) {
  const uint64_t Addr = cpusDoneAddress();
  ASSERT_NE(Addr, 0u);
  Traced T("hv.elf", "scenario=mixed", 1, "watch");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  GdbStub S(M);
  S.attached(0);
  EXPECT_NE(monitorText(S, "exit"), ""); // paging is on
  EXPECT_EQ(one(S, fmt::format("Z2,{:x},4", Addr)), "OK");
  EXPECT_EQ(one(S, "c"), fmt::format("T05thread:01;watch:{:x};", Addr));
  EXPECT_EQ(one(S, fmt::format("m{:x},4", Addr)), "01000000");
  // Where the run control's write stop is in a plain run from the first exit on (the
  // boot's clearing of the BSS writes it too): after the same instruction.
  Traced P("hv.elf", "scenario=mixed", 1, "watch-plain");
  ASSERT_TRUE(P.M);
  ASSERT_TRUE(P.M->runUntil({StopWhen::vmExit()}));
  ErrorOr<RunResult> R = P.M->runUntil({StopWhen::write(Hpa(Addr), 4)});
  ASSERT_TRUE(R);
  EXPECT_EQ(R->Reason, RunReason::Stopped);
  EXPECT_EQ(M.cpu(0).S.Rip, P.M->cpu(0).S.Rip);
  EXPECT_EQ(M.cpu(0).Retired, P.M->cpu(0).Retired);
  EXPECT_EQ(one(S, fmt::format("z2,{:x},4", Addr)), "OK");
  // Watching memory no table maps, or that is not RAM (the local APIC's page, mapped
  // by the hypervisor's identity tables), is refused.
  EXPECT_EQ(one(S, "Z2,7fff00000000,4"), "E14");
  EXPECT_EQ(one(S, "Z2,fee00000,4"), "E14");
}

TEST(GdbStub, MonitorExitOfAReasonStopsThereAndTheThreadsAreTheCpus) {
  Traced T("hv.elf", "scenario=mixed", 2, "threads");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  GdbStub S(M);
  S.attached(0);
  EXPECT_EQ(one(S, "qfThreadInfo"), "m01,02");
  EXPECT_EQ(one(S, "qXfer:threads:read::0,fff"),
            "l<?xml version=\"1.0\"?>\n<threads>\n"
            "<thread id=\"01\" core=\"0\" name=\"CPU 0\"/>\n"
            "<thread id=\"02\" core=\"1\" name=\"CPU 1\"/>\n</threads>\n");
  const std::string Text = monitorText(S, "exit CPUID");
  auto G = GroundTruth::read(M);
  ASSERT_TRUE(G);
  unsigned Cpu = 2;
  for (unsigned C = 0; C < 2; ++C)
    for (const auto &E : G->exits(C))
      if ((E.Reason & 0xffff) == 10)
        Cpu = C;
  ASSERT_LT(Cpu, 2u);
  EXPECT_EQ(Text, fmt::format("CPU {} stopped: the VM exit (CPUID) at RIP={:#x} ({} "
                              "instructions retired)\n",
                              Cpu, M.cpu(Cpu).S.Rip, M.cpu(Cpu).Retired));
  EXPECT_EQ(*M.readVmcs(Cpu, "ExitReason"), 10u);
  EXPECT_EQ(one(S, "?"), fmt::format("T05thread:0{};", Cpu + 1));
  EXPECT_EQ(one(S, "qC"), fmt::format("QC0{}", Cpu + 1));
  // Each thread's registers are its CPU's.
  for (unsigned C = 0; C < 2; ++C) {
    EXPECT_EQ(one(S, fmt::format("Hg{}", C + 1)), "OK");
    EXPECT_EQ(regValue(S, kRip), M.cpu(C).S.Rip);
  }
  // A step of CPU 2's thread: its one instruction (the other CPU runs as scheduled).
  const uint64_t Before = M.cpu(1).Retired;
  EXPECT_EQ(one(S, "vCont;s:2;c"), "T05thread:02;");
  EXPECT_TRUE(M.cpu(1).Retired == Before + 1 || !M.cpu(1).NonRoot);
}

TEST(GdbStub, ReadAndAccessWatchpointsStopAfterTheReadingInstruction) {
  // CpusDone: the CPU's atomic increment reads it (and writes it), then the wait loop
  // of kmain reads it.
  const uint64_t Addr = cpusDoneAddress();
  ASSERT_NE(Addr, 0u);
  Traced Plain("hv.elf", "scenario=mixed", 1, "rwatch-plain");
  ASSERT_TRUE(Plain.M);
  const TracedMachine::Outcome A = Plain.finish();
  Traced T("hv.elf", "scenario=mixed", 1, "rwatch");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  GdbStub S(M);
  S.attached(0);
  EXPECT_NE(monitorText(S, "exit"), ""); // paging is on
  // Where the run control's read and access stops are in a plain run from the first
  // exit on: after the same instructions.
  Traced P("hv.elf", "scenario=mixed", 1, "rwatch-stops");
  ASSERT_TRUE(P.M);
  ASSERT_TRUE(P.M->runUntil({StopWhen::vmExit()}));
  auto sameStop = [&](const StopWhen &Cond) {
    ErrorOr<RunResult> R = P.M->runUntil({Cond});
    ASSERT_TRUE(R);
    EXPECT_EQ(R->Reason, RunReason::Stopped);
    EXPECT_EQ(M.cpu(0).S.Rip, P.M->cpu(0).S.Rip);
    EXPECT_EQ(M.cpu(0).Retired, P.M->cpu(0).Retired);
  };
  // A read watchpoint on the variable's last byte: gdb's packet names the range it set,
  // the stop reply its start.
  EXPECT_EQ(one(S, fmt::format("Z3,{:x},1", Addr + 3)), "OK");
  EXPECT_EQ(one(S, "c"), fmt::format("T05thread:01;rwatch:{:x};", Addr + 3));
  sameStop(StopWhen::read(Hpa(Addr + 3), 1));
  EXPECT_EQ(one(S, fmt::format("m{:x},4", Addr)), "01000000"); // the increment read it
  EXPECT_EQ(one(S, fmt::format("z3,{:x},1", Addr + 3)), "OK");
  // An access watchpoint: the next access is the wait loop's read.
  EXPECT_EQ(one(S, fmt::format("Z4,{:x},4", Addr)), "OK");
  EXPECT_EQ(one(S, "c"), fmt::format("T05thread:01;awatch:{:x};", Addr));
  sameStop(StopWhen::access(Hpa(Addr), 4));
  EXPECT_EQ(one(S, fmt::format("z4,{:x},4", Addr)), "OK");
  // Removing one kind leaves the other: a write watchpoint on the same bytes stays set
  // after z3 and z4 of them (there is no store left: the run ends).
  EXPECT_EQ(one(S, fmt::format("Z2,{:x},4", Addr)), "OK");
  EXPECT_EQ(one(S, fmt::format("z3,{:x},4", Addr)), "OK");
  EXPECT_EQ(one(S, fmt::format("z4,{:x},4", Addr)), "OK");
  // Unmapped memory and memory that is not RAM are refused, as for Z2.
  EXPECT_EQ(one(S, "Z3,7fff00000000,4"), "E14");
  EXPECT_EQ(one(S, "Z4,fee00000,4"), "E14");
  EXPECT_EQ(one(S, "c"), "W01"); // hv: PASS through isa-debug-exit
  // Watched, stopped twice and continued, the run is the run without gdb.
  expectSameRun(A, T.finish(), 10000);
}

TEST(GdbStub, ARunUnderTheStubIsTheUninterruptedRun) {
  Traced Plain("hv.elf", "scenario=mixed", 2, "same-plain");
  Traced T("hv.elf", "scenario=mixed", 2, "same");
  ASSERT_TRUE(Plain.M && T.M);
  Machine &M = *T.M;
  GdbStub S(M);
  unsigned Polls = 0;
  // An interrupt every third chunk, as a gdb pressing Ctrl-C would send.
  S.setPoll([&] {
    return ++Polls % 3 ? GdbStub::ClientState::Quiet : GdbStub::ClientState::Interrupt;
  });
  S.attached(0);
  EXPECT_NE(monitorText(S, "exit"), "");
  const uint64_t HostRip = *M.readVmcs(M.cpu(1).Vmx->haveCurrentVmcs() ? 1 : 0, "HostRip");
  EXPECT_EQ(one(S, fmt::format("Z0,{:x},1", HostRip)), "OK");
  for (unsigned I = 0; I < 20; ++I) {
    // The next exit handler's entry on either CPU, or an interrupt; then a step.
    const std::string R = one(S, "c");
    EXPECT_TRUE(R == "T05thread:01;swbreak:;" || R == "T05thread:02;swbreak:;" ||
                R == "T02thread:01;" || R == "T02thread:02;")
        << R;
    EXPECT_EQ(one(S, "s").substr(0, 10).find("thread:"), 3u);
    for (unsigned C = 1; C <= 2; ++C) {
      EXPECT_EQ(one(S, fmt::format("Hg{}", C)), "OK");
      EXPECT_EQ(one(S, "g").size(), 1200u);
      EXPECT_NE(one(S, "m1000,40"), "");
    }
  }
  EXPECT_EQ(one(S, fmt::format("z0,{:x},1", HostRip)), "OK");
  EXPECT_NE(monitorText(S, "entry"), "");
  EXPECT_EQ(one(S, "D"), "OK");
  expectSameRun(Plain.finish(), T.finish(), 10000);
}

TEST(GdbStub, ARunThatEndsUnderTheStubAnswersW) {
  Traced Plain("vmx_e2e.elf", "", 1, "end-plain");
  Traced T("vmx_e2e.elf", "", 1, "end");
  ASSERT_TRUE(Plain.M && T.M);
  GdbStub S(*T.M);
  S.attached(0);
  const std::string W = one(S, "c");
  ASSERT_TRUE(S.runEnd());
  EXPECT_EQ(W, fmt::format("W{:02x}", S.runEnd()->ExitStatus));
  EXPECT_EQ(one(S, "?"), W);
  EXPECT_EQ(one(S, "c"), W);
  EXPECT_EQ(one(S, "g"), "E05");
  EXPECT_EQ(one(S, "Z0,1000,1"), "E05");
  // The machine's run has ended: run() again returns the same end at once.
  const TracedMachine::Outcome Under = T.finish();
  EXPECT_EQ(Under.Result.Reason, S.runEnd()->Reason);
  EXPECT_EQ(Under.Result.Retired, S.runEnd()->Retired);
  expectSameRun(Plain.finish(), Under, 100);
}

// monitor snapshot save / restore: after a restore the machine is where it was saved, and
// running on from there meets the same exit at the same place.
TEST(GdbStub, MonitorSnapshotSavesAndRestoresTheMachine) {
  Traced T("hv.elf", "scenario=mixed", 2, "snapshot");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  GdbStub S(M);
  S.attached(0);
  monitorText(S, "exit CPUID");
  // The stop selected the CPU that exited (qC names its thread, CPU + 1).
  const std::string Qc = one(S, "qC");
  ASSERT_EQ(Qc.size(), 4u);
  const unsigned Sel = unsigned(Qc[3] - '1');
  ASSERT_LT(Sel, 2u);
  uint64_t Rip[2], Retired[2], Cycles[2];
  for (unsigned C = 0; C < 2; ++C)
    Rip[C] = M.cpu(C).S.Rip, Retired[C] = M.cpu(C).Retired, Cycles[C] = M.cpu(C).Cycles;
  const std::string Path = ::testing::TempDir() + "gdbstub-monitor.snap";
  EXPECT_EQ(monitorText(S, "snapshot save " + Path), "snapshot saved to " + Path + "\n");
  const std::string Next = monitorText(S, "exit");
  uint64_t RipNext[2], RetiredNext[2];
  for (unsigned C = 0; C < 2; ++C)
    RipNext[C] = M.cpu(C).S.Rip, RetiredNext[C] = M.cpu(C).Retired;
  ASSERT_NE(RetiredNext[0] + RetiredNext[1], Retired[0] + Retired[1]);
  EXPECT_EQ(monitorText(S, "snapshot restore " + Path),
            fmt::format("machine restored from {}: CPU {} at RIP={:#x} ({} instructions "
                        "retired); `maint flush register-cache` shows its registers in gdb\n",
                        Path, Sel, Rip[Sel], Retired[Sel]));
  for (unsigned C = 0; C < 2; ++C) {
    EXPECT_EQ(M.cpu(C).S.Rip, Rip[C]);
    EXPECT_EQ(M.cpu(C).Retired, Retired[C]);
    EXPECT_EQ(M.cpu(C).Cycles, Cycles[C]);
  }
  EXPECT_EQ(regValue(S, kRip), Rip[Sel]);
  // Running on from the restored machine meets the same next exit at the same place.
  EXPECT_EQ(monitorText(S, "exit"), Next);
  for (unsigned C = 0; C < 2; ++C) {
    EXPECT_EQ(M.cpu(C).S.Rip, RipNext[C]);
    EXPECT_EQ(M.cpu(C).Retired, RetiredNext[C]);
  }
  std::remove(Path.c_str());
}

// --- gdb's writes in the input log (harness/input_log.h) ---

namespace {

/// The linear (= physical: the core's tables map it so) address of the core's "PASS"
/// string, found in its loaded memory; 0 if not there.
uint64_t findPassString(Machine &M) {
  std::string Mem(0x100000, '\0');
  for (uint64_t Base = 0x100000; Base < 0x400000; Base += 0x100000) {
    if (M.readPhysical(Hpa(Base), Mem.data(), Mem.size()))
      break;
    const size_t At = Mem.find(std::string("\0PASS\0", 6));
    if (At != std::string::npos)
      return Base + At + 1;
  }
  return 0;
}

std::string gdbTemp(const std::string &Name) {
  return vmxsim::test::tempPath("vmxsim_gdb_stub_test", Name);
}

vmxsim::test::CommandResult vmxsimCmd(const std::string &Args) {
  return vmxsim::test::runShell(std::string(VMXSIM_BINARY_DIR) + "/vmxsim " + Args,
                                gdbTemp("out"), gdbTemp("err"));
}

} // namespace

// A gdb session on the hypervisor core (2 CPUs) recorded with --record-input: at the 3rd
// call of the UART's output routine it makes the character 'Z' (rdi), at a later VM exit
// it turns the core's "PASS" into "XASS" (a memory byte), then steps CPU 1 and writes a
// register with its own value (a stop the replay must find too), does the same after an
// interrupt (Ctrl-C), and continues to the end.
// `vmxsim run --replay-input LOG` without gdb is that run byte for byte (serial output,
// both traces); the run without the log is not. Bad entries: one line, status 20.
TEST(GdbStub, WritesAreRecordedAndReplayedByteForByte) {
  // The image is named relative to the images' folder, which the test (and the commands
  // it runs) work in: the kernel command line starts with the image's path and the core
  // prints it, so an absolute path would make the logged instruction and cycle counts
  // depend on where the checkout lives.
  struct WorkIn {
    std::filesystem::path Was = std::filesystem::current_path();
    explicit WorkIn(const std::string &Dir) { std::filesystem::current_path(Dir); }
    ~WorkIn() { std::filesystem::current_path(Was); }
  } InImages(VMXSIM_IMAGE_DIR);
  const std::string Image = "hv.elf";
  const std::string Elf = readFile(Image);
  uint64_t Putc = 0, Size = 0;
  ASSERT_TRUE(findElfSymbol({reinterpret_cast<const uint8_t *>(Elf.data()), Elf.size()},
                            "uartPutc", Putc, Size));
  const std::string Log = gdbTemp("gdb.log"), SerialA = gdbTemp("a.serial"),
                    GtA = gdbTemp("a.gt"), HvA = gdbTemp("a.hv"), SerialB = gdbTemp("b.serial"),
                    GtB = gdbTemp("b.gt"), HvB = gdbTemp("b.hv");
  int Status = -1;
  uint64_t Pass = 0;
  {
    MachineConfig Cfg;
    Cfg.Kernel = Image;
    Cfg.Append = "scenario=mixed";
    Cfg.NumCpus = 2;
    Cfg.Serial = OutputSpec::file(SerialA);
    Cfg.Debugcon = OutputSpec::discard();
    Cfg.GroundTruthFile = GtA;
    Cfg.XentraceFile = HvA;
    Cfg.RecordInput = Log;
    Error Err;
    std::unique_ptr<Machine> M = Machine::create(Cfg, Err);
    ASSERT_TRUE(M) << Err.str();
    Pass = findPassString(*M);
    ASSERT_NE(Pass, 0u);
    GdbStub S(*M);
    S.attached(0);
    EXPECT_EQ(one(S, fmt::format("Z0,{:x},1", Putc)), "OK");
    for (unsigned I = 0; I < 3; ++I)
      EXPECT_EQ(one(S, "c"), "T05thread:01;swbreak:;");
    // "hv: 2 CPUs, ...": the third character, in rdi (gdb's register 5) as uartPutc starts.
    EXPECT_EQ(regValue(S, 5), uint64_t(':'));
    EXPECT_EQ(one(S, "P5=5a00000000000000"), "OK");
    EXPECT_EQ(one(S, fmt::format("z0,{:x},1", Putc)), "OK");
    for (unsigned I = 0; I < 40; ++I)
      EXPECT_NE(monitorText(S, "exit"), "");
    EXPECT_EQ(one(S, fmt::format("M{:x},1:58", Pass)), "OK");
    EXPECT_EQ(one(S, "Hg2"), "OK");
    EXPECT_EQ(one(S, "vCont;s:2"), "T05thread:02;");
    const std::string Rax = one(S, "p0");
    EXPECT_EQ(one(S, "P0=" + Rax), "OK");
    // An interrupt (gdb's Ctrl-C) at the end of a chunk, and a write there too.
    bool Interrupted = false;
    S.setPoll([&] {
      return std::exchange(Interrupted, true) ? GdbStub::ClientState::Quiet
                                              : GdbStub::ClientState::Interrupt;
    });
    EXPECT_EQ(one(S, "c").substr(0, 3), "T02");
    EXPECT_EQ(one(S, "P0=" + one(S, "p0")), "OK");
    const std::string End = one(S, "c");
    ASSERT_TRUE(S.runEnd());
    Status = S.runEnd()->ExitStatus;
    EXPECT_EQ(End, fmt::format("W{:02x}", Status));
  }
  const std::string Serial = readFile(SerialA);
  EXPECT_EQ(Serial.substr(0, 4), "hvZ ") << Serial;
  EXPECT_NE(Serial.find("hv: XASS\n"), std::string::npos) << Serial;
  const std::string LogText = readFile(Log);
  // The four stops, each with its write (the machine line's CRC covers the command line,
  // which names the image's path). CPU 1 had not started at the first; the exit stop
  // selected CPU 1; the step moved CPU 1 by one instruction and one cycle; the interrupt
  // came after a chunk of 2^18 instructions.
  EXPECT_EQ(LogText.substr(LogText.find("gdb ")),
            fmt::format("gdb stop insns=99692 cycles=509788,0\n"
                        "gdb reg cpu=0 name=rdi bytes=5a00000000000000\n"
                        "gdb stop insns=176031 cycles=565975,566031\n"
                        "gdb mem cpu=1 la={:#x} bytes=58\n"
                        "gdb stop insns=176032 cycles=565975,566032\n"
                        "gdb reg cpu=1 name=rax bytes=0a00000000000000\n"
                        "gdb stop insns=438176 cycles=887807,887273\n"
                        "gdb reg cpu=1 name=rax bytes=f29c4068112191e8\n"
                        "end events=8\n",
                        Pass));
  const std::string Common = Image + " --smp 2 --append scenario=mixed -q --debugcon none";
  vmxsim::test::CommandResult R =
      vmxsimCmd("run " + Common + " --serial " + SerialB + " --trace-ground-truth " + GtB +
                " --xentrace " + HvB + " --replay-input " + Log);
  EXPECT_EQ(R.Status, Status) << R.Err;
  EXPECT_EQ(R.Err, "");
  EXPECT_EQ(readFile(SerialB), Serial);
  EXPECT_TRUE(readFile(GtB) == readFile(GtA)) << "the ground truth differs";
  EXPECT_TRUE(readFile(HvB) == readFile(HvA)) << "the hypervisor's trace differs";
  // Without the log: the core's own output.
  R = vmxsimCmd("run " + Common + " --serial " + SerialB);
  EXPECT_EQ(R.Status, 1) << R.Err;
  const std::string Plain = readFile(SerialB);
  EXPECT_NE(Plain, Serial);
  EXPECT_EQ(Plain.substr(0, 4), "hv: ");
  EXPECT_NE(Plain.find("hv: PASS\n"), std::string::npos);

  // Bad entries: one line, status 20.
  auto lineNo = [&](const std::string &Text, const std::string &What) {
    return std::count(Text.begin(), Text.begin() + ptrdiff_t(Text.find(What)), '\n') + 1;
  };
  auto replaced = [&](const std::string &From, const std::string &To) {
    std::string T = LogText;
    const size_t At = T.find(From);
    EXPECT_NE(At, std::string::npos) << From;
    if (At != std::string::npos)
      T.replace(At, From.size(), To);
    return T;
  };
  const std::string Bad = gdbTemp("bad.log");
  struct Case {
    std::string Text, Err;
  } Cases[] = {
      {replaced("name=rdi", "name=nosuchreg"),
       fmt::format("line {}: no register \"nosuchreg\" in gdb's register set (the stub's "
                   "target description)",
                   lineNo(LogText, "name=rdi"))},
      {replaced(fmt::format("la={:#x}", Pass), "la=0xfee00000"),
       fmt::format("line {}: gdb's memory write of 1 bytes at 0xfee00000: ",
                   lineNo(LogText, fmt::format("la={:#x}", Pass)))},
      {LogText.substr(0, LogText.find("end events=")), "truncated input log (no end line)"},
  };
  for (const Case &C : Cases) {
    std::ofstream(Bad, std::ios::binary) << C.Text;
    R = vmxsimCmd("run " + Common + " --serial none --replay-input " + Bad);
    EXPECT_EQ(R.Status, 20) << C.Err;
    EXPECT_EQ(R.Err.substr(0, 15 + Bad.size() + 2 + C.Err.size()),
              "vmxsim: error: " + Bad + ": " + C.Err);
    EXPECT_EQ(std::count(R.Err.begin(), R.Err.end(), '\n'), 1) << R.Err;
  }
  for (const std::string &F : {Log, SerialA, GtA, HvA, SerialB, GtB, HvB, Bad})
    std::remove(F.c_str());
}
