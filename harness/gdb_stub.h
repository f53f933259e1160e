// A GDB remote-protocol stub on a Machine (`vmxsim run --gdb [HOST]:PORT`; the
// "Debugging with gdb" section of README.md). Two parts:
//
// - GdbStub answers one packet payload at a time (no sockets: the unit tests drive it
//   with exact payloads). Registers through a target description of its own
//   (i386:x86-64 core with x87, SSE, fs_base/gs_base, and the feature
//   "org.vmxsim.x86.control": cr0, cr2, cr3, cr4, cr8, efer), memory by linear address
//   through the selected CPU's paging (Machine::readLinear; an unmapped address answers
//   E14, never a fault), breakpoints as the run control's execute stops (StopWhen::execute:
//   guest memory is never patched), write, read and access watchpoints as its write,
//   read and access stops (Z2, Z3, Z4), single-step,
//   vCPUs as threads (thread N+1 = CPU N, named "CPU N"), and `monitor` commands.
// - GdbServer listens on a TCP socket and runs the machine under the stub to the end of
//   the run, accepting a gdb at any time (or, with Wait, before the first instruction).
//
// How it runs the machine: Machine::runUntil with the breakpoints, watchpoints and step as
// conditions and one more, kChunkInsns instructions, after which it looks for gdb's
// interrupt byte and continues. The run control makes a run stopped and continued any
// number of times the same run, byte for byte, as one never stopped (harness/run_control.h):
// so attaching gdb, breakpoints, watchpoints, stepping and interrupting change nothing the
// guest sees and nothing in the traces (tests/harness/gdb_stub_test.cpp and
// tests/harness/gdb_e2e_test.sh check it).
#pragma once
#include "harness/gdb_packet.h"
#include "harness/machine.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vmxsim {

class GdbStub {
public:
  /// Instructions (of all CPUs together) between two looks for gdb's interrupt byte.
  static constexpr uint64_t kChunkInsns = uint64_t(1) << 18;

  /// What the client did while the machine ran, asked between chunks.
  enum class ClientState : uint8_t { Quiet, Interrupt, Gone };
  using PollFn = std::function<ClientState()>;

  struct Reply {
    /// Payloads to send in order (none: send nothing, as after 'k').
    std::vector<std::string> Packets;
    enum class Then : uint8_t {
      Stay,   ///< wait for the next packet
      Detach, ///< 'D': the session ends, the run continues without gdb
      Kill,   ///< 'k' / vKill: the session and the run end (GdbServer: status 12)
      Gone,   ///< the client went away while the machine ran: the session ends
    } After = Then::Stay;
  };

  explicit GdbStub(Machine &M);
  /// Polled between chunks of a run (default: always Quiet).
  void setPoll(PollFn P) { Poll = std::move(P); }
  /// A gdb attached with the machine stopped: every CPU is where gdb first sees it, and
  /// the stop reply ('?') names CPU Cpu.
  void attached(unsigned Cpu);
  /// One packet's payload (unescaped) in; what to send back.
  Reply handle(std::string_view Packet);
  /// Whether gdb asked for no acknowledgements (QStartNoAckMode).
  bool noAck() const { return NoAck; }
  /// The run's end, once it ended under the stub (gdb got a W packet, or Kill).
  const std::optional<RunResult> &runEnd() const { return End; }
  /// Forgets the session: breakpoints, watchpoints, the selected threads, no-ack mode.
  void reset();

  /// The target description (qXfer:features:read:target.xml).
  static std::string targetXml();

  /// The most bytes one watchpoint may cover (Z2/Z3/Z4 with more get E01): 256 pages,
  /// far more than any variable gdb watches, and few enough ranges for the run control.
  static constexpr uint64_t kMaxWatchBytes = uint64_t(1) << 20;

private:
  struct Watch {
    char Type = '2'; ///< the Z packet's type: '2' write, '3' read, '4' access
    uint64_t La = 0, Len = 0;
    std::vector<std::pair<uint64_t, uint64_t>> Pieces; ///< machine-physical (base, size)
  };
  /// What one condition of a run stands for.
  struct Meaning {
    enum class Kind : uint8_t { Chunk, Break, Watch, Step, Event } K;
    uint64_t Addr = 0;
    bool Hardware = false;
    char WatchType = '2'; ///< Watch: the Z packet's type
  };
  struct Stop {
    std::string Reply; ///< the stop reply ("T05thread:01;swbreak:;", "W07", ...)
    std::string Text;  ///< one line for a monitor command
    bool Gone = false;
  };

  Stop resume(std::optional<unsigned> StepCpu, const std::vector<StopWhen> &Events);
  Stop stopAt(unsigned Cpu, int Signal, const std::string &Why, const std::string &Text);
  Stop runOver(const RunResult &R);
  void noteSeen();
  std::string stopReply() const;
  std::string readRegisters(unsigned Cpu) const;
  Reply monitor(const std::string &Command);
  Reply vCont(std::string_view Args);
  Reply xfer(std::string_view Args);
  Reply breakpoint(bool Insert, std::string_view Args);
  std::optional<unsigned> threadCpu(std::string_view Id, bool AllowAny) const;

  Machine &M;
  PollFn Poll;
  bool NoAck = false;
  unsigned GCpu = 0, CCpu = 0; ///< Hg and Hc
  bool CAll = true; ///< Hc-1 / Hc0 (no one CPU): a step steps the Hg CPU
  std::string LastStop;
  std::map<uint64_t, uint8_t> Breaks; ///< linear address -> 1 software, 2 hardware
  std::vector<Watch> Watches;
  /// Per CPU, (retired, RIP) when gdb last saw the machine stopped: a CPU still there is
  /// not held at a breakpoint it sits on (it would never move on), one that moved is.
  std::vector<std::pair<uint64_t, uint64_t>> Seen;
  std::optional<RunResult> End;
};

struct GdbServerOptions {
  std::string Host = "127.0.0.1";
  uint16_t Port = 0; ///< 0: any free port (the listening line names it)
  bool Wait = false; ///< run nothing before a gdb attaches and continues
};

class GdbServer {
public:
  /// Parses "[HOST]:PORT" ("" or no host: loopback). False with Why on bad text.
  static bool parseAddress(const std::string &Text, GdbServerOptions &O, std::string &Why);
  /// Listens; null with Err set (one line) when it cannot.
  static std::unique_ptr<GdbServer> listen(Machine &M, const GdbServerOptions &O, Error &Err);
  ~GdbServer();
  GdbServer(const GdbServer &) = delete;
  GdbServer &operator=(const GdbServer &) = delete;
  /// The port it listens on (the chosen one for port 0).
  uint16_t port() const { return Port; }
  /// Runs the machine to the end of its run under the stub; prints one line on stderr
  /// for each attach, detach and disconnect. A kill ('k') ends the run as a signal
  /// would (RunReason::Interrupted, status 12, What "gdb's kill").
  RunResult run();

private:
  GdbServer(Machine &M, const GdbServerOptions &O) : M(M), Stub(M), Opts(O) {}
  bool acceptClient(int TimeoutMs);
  /// Serves the client until its session ends; the run's end if it ended.
  std::optional<RunResult> serve();
  GdbStub::ClientState pollClient();
  bool send(const std::string &Payload);
  bool sendRaw(const std::string &Bytes);
  /// Ends the session with one line on stderr: Why, and whether the run goes on.
  void dropClient(const char *Why, bool RunGoesOn = true);
  RunResult interrupted(const char *What);
  bool stopRequested() const;

  Machine &M;
  GdbStub Stub;
  GdbServerOptions Opts;
  int ListenFd = -1, ClientFd = -1;
  uint16_t Port = 0;
  gdb::GdbPacketReader Reader;
  std::vector<gdb::GdbPacketEvent> Pending;
  std::string LastSent;
};

/// Checks the gdb writes of the machine's --replay-input log against its register set
/// and CPUs (BadInputLog, one line naming the log's line).
Error checkGdbWrites(const Machine &M);

/// `run --replay-input LOG` of a log that holds gdb's writes (harness/input_log.h): runs
/// M to each logged stop in turn and makes the writes there, as the stub made them; the
/// caller then runs on to the end. Errors, one line each: BadInputLog (checkGdbWrites; a
/// memory write the CPU's paging does not map or that is not RAM), InputLogMismatch (a
/// stop the run passes, or that it ends before: Ended is then that end).
Error replayGdbWrites(Machine &M, std::optional<RunResult> &Ended);

} // namespace vmxsim
