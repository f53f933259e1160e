// The gdb stub's TCP side (GdbServer in harness/gdb_stub.h): one client at a time on a
// listening socket, acknowledgements and retransmission, the interrupt byte while the
// machine runs, and the ends of a session. A client that goes away (closes, resets,
// stops reading for kSendTimeoutSeconds) ends its session with one line on stderr, and
// the run continues without gdb as if it had detached; another gdb may attach later.
#include "harness/gdb_stub.h"

#include <fmt/format.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace vmxsim {

namespace {

constexpr int kSendTimeoutSeconds = 10;
/// How often a wait for gdb looks at the machine's stop flag (a signal to vmxsim).
constexpr int kWaitPollMs = 200;

void closeFd(int &Fd) {
  if (Fd >= 0)
    ::close(Fd);
  Fd = -1;
}

} // namespace

bool GdbServer::parseAddress(const std::string &Text, GdbServerOptions &O, std::string &Why) {
  const size_t Colon = Text.rfind(':');
  std::string Host = Colon == std::string::npos ? "" : Text.substr(0, Colon);
  const std::string PortText = Colon == std::string::npos ? Text : Text.substr(Colon + 1);
  if (Host.size() >= 2 && Host.front() == '[' && Host.back() == ']') // [::1]:1234
    Host = Host.substr(1, Host.size() - 2);
  if (PortText.empty() || PortText.size() > 5 ||
      PortText.find_first_not_of("0123456789") != std::string::npos ||
      std::strtoul(PortText.c_str(), nullptr, 10) > 65535) {
    Why = fmt::format("'{}' is not [HOST]:PORT with a port of 0..65535", Text);
    return false;
  }
  O.Host = Host.empty() ? "127.0.0.1" : Host;
  O.Port = uint16_t(std::strtoul(PortText.c_str(), nullptr, 10));
  return true;
}

std::unique_ptr<GdbServer> GdbServer::listen(Machine &M, const GdbServerOptions &O,
                                             Error &Err) {
  addrinfo Hints{};
  Hints.ai_family = AF_UNSPEC;
  Hints.ai_socktype = SOCK_STREAM;
  Hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo *Found = nullptr;
  const std::string PortText = std::to_string(O.Port);
  if (int Rc = ::getaddrinfo(O.Host.c_str(), PortText.c_str(), &Hints, &Found); Rc != 0) {
    Err = Error(ErrorCode::HostFailure,
                fmt::format("--gdb: cannot resolve '{}': {}", O.Host, ::gai_strerror(Rc)));
    return nullptr;
  }
  std::unique_ptr<GdbServer> S(new GdbServer(M, O));
  std::string Last = "no address";
  for (addrinfo *A = Found; A && S->ListenFd < 0; A = A->ai_next) {
    int Fd = ::socket(A->ai_family, A->ai_socktype | SOCK_CLOEXEC, A->ai_protocol);
    if (Fd < 0) {
      Last = std::strerror(errno);
      continue;
    }
    const int One = 1;
    ::setsockopt(Fd, SOL_SOCKET, SO_REUSEADDR, &One, sizeof(One));
    if (::bind(Fd, A->ai_addr, A->ai_addrlen) != 0 || ::listen(Fd, 1) != 0) {
      Last = std::strerror(errno);
      ::close(Fd);
      continue;
    }
    S->ListenFd = Fd;
  }
  ::freeaddrinfo(Found);
  if (S->ListenFd < 0) {
    Err = Error(ErrorCode::HostFailure,
                fmt::format("--gdb: cannot listen on {}:{}: {}", O.Host, O.Port, Last));
    return nullptr;
  }
  sockaddr_storage Addr{};
  socklen_t Len = sizeof(Addr);
  ::getsockname(S->ListenFd, reinterpret_cast<sockaddr *>(&Addr), &Len);
  S->Port = ntohs(Addr.ss_family == AF_INET6
                      ? reinterpret_cast<sockaddr_in6 *>(&Addr)->sin6_port
                      : reinterpret_cast<sockaddr_in *>(&Addr)->sin_port);
  return S;
}

GdbServer::~GdbServer() {
  closeFd(ClientFd);
  closeFd(ListenFd);
}

bool GdbServer::stopRequested() const {
  const std::atomic<bool> *F = M.config().StopFlag;
  return F && F->load(std::memory_order_relaxed);
}

RunResult GdbServer::interrupted(const char *What) {
  M.finishOutputs();
  RunResult R;
  R.Reason = RunReason::Interrupted;
  R.ExitStatus = kExitInterrupted;
  for (unsigned I = 0; I < M.numCpus(); ++I)
    R.Retired += M.cpu(I).Retired;
  R.Cycles = M.bsp().Cycles;
  R.Rip = M.bsp().S.Rip;
  R.What = What;
  return R;
}

bool GdbServer::acceptClient(int TimeoutMs) {
  pollfd P{ListenFd, POLLIN, 0};
  if (::poll(&P, 1, TimeoutMs) <= 0 || !(P.revents & POLLIN))
    return false;
  sockaddr_storage Addr{};
  socklen_t Len = sizeof(Addr);
  const int Fd = ::accept4(ListenFd, reinterpret_cast<sockaddr *>(&Addr), &Len, SOCK_CLOEXEC);
  if (Fd < 0)
    return false;
  const int One = 1;
  ::setsockopt(Fd, IPPROTO_TCP, TCP_NODELAY, &One, sizeof(One));
  timeval Tv{kSendTimeoutSeconds, 0};
  ::setsockopt(Fd, SOL_SOCKET, SO_SNDTIMEO, &Tv, sizeof(Tv));
  ClientFd = Fd;
  Reader = gdb::GdbPacketReader{};
  Pending.clear();
  LastSent.clear();
  // The CPU gdb first sees: the one with the fewest instructions retired is as good as
  // any; CPU 0 keeps it simple and the same every time.
  Stub.attached(0);
  const Cpu &C = M.bsp();
  std::fprintf(stderr, "vmxsim: gdb attached; the machine is stopped (CPU 0 at RIP=%#llx, "
                       "%llu instructions retired)\n",
               static_cast<unsigned long long>(C.S.Rip),
               static_cast<unsigned long long>(C.Retired));
  return true;
}

void GdbServer::dropClient(const char *Why, bool RunGoesOn) {
  std::fprintf(stderr, "vmxsim: gdb: %s; %s\n", Why,
               RunGoesOn ? "the run continues without gdb" : "the run stops");
  closeFd(ClientFd);
  Stub.reset();
}

bool GdbServer::sendRaw(const std::string &Bytes) {
  size_t Done = 0;
  while (Done < Bytes.size()) {
    const ssize_t N = ::send(ClientFd, Bytes.data() + Done, Bytes.size() - Done, MSG_NOSIGNAL);
    if (N < 0 && errno == EINTR)
      continue;
    if (N <= 0)
      return false;
    Done += size_t(N);
  }
  return true;
}

bool GdbServer::send(const std::string &Payload) {
  LastSent = gdb::framePacket(Payload);
  return sendRaw(LastSent);
}

GdbStub::ClientState GdbServer::pollClient() {
  using St = GdbStub::ClientState;
  // An interrupt byte that came with the packet that started the run is queued already.
  auto Queued = std::find_if(Pending.begin(), Pending.end(), [](const gdb::GdbPacketEvent &E) {
    return E.K == gdb::GdbPacketEvent::Kind::Interrupt;
  });
  bool Interrupt = Queued != Pending.end();
  if (Interrupt)
    Pending.erase(Queued);
  for (;;) {
    pollfd P{ClientFd, POLLIN, 0};
    if (::poll(&P, 1, 0) <= 0)
      break;
    char Buf[4096];
    const ssize_t N = ::recv(ClientFd, Buf, sizeof(Buf), MSG_DONTWAIT);
    if (N < 0 && (errno == EINTR || errno == EAGAIN))
      break;
    if (N <= 0)
      return St::Gone;
    for (ssize_t I = 0; I < N; ++I)
      if (auto E = Reader.feed(uint8_t(Buf[I]))) {
        if (E->K == gdb::GdbPacketEvent::Kind::Interrupt)
          Interrupt = true;
        else if (E->K != gdb::GdbPacketEvent::Kind::Ack)
          Pending.push_back(std::move(*E)); // answered once the machine stops
      }
  }
  return Interrupt ? St::Interrupt : St::Quiet;
}

std::optional<RunResult> GdbServer::serve() {
  using K = gdb::GdbPacketEvent::Kind;
  Stub.setPoll([this] { return pollClient(); });
  for (;;) {
    if (Pending.empty()) {
      pollfd P{ClientFd, POLLIN, 0};
      const int Rc = ::poll(&P, 1, kWaitPollMs);
      if (stopRequested()) {
        dropClient("vmxsim was stopped by a signal", false);
        return interrupted("a signal");
      }
      if (Rc <= 0)
        continue;
      char Buf[4096];
      const ssize_t N = ::recv(ClientFd, Buf, sizeof(Buf), 0);
      if (N < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (N <= 0) {
        dropClient(Reader.inPacket() ? "the connection closed in the middle of a packet"
                                     : "the connection closed");
        return std::nullopt;
      }
      for (ssize_t I = 0; I < N; ++I)
        if (auto E = Reader.feed(uint8_t(Buf[I])))
          Pending.push_back(std::move(*E));
      continue;
    }
    gdb::GdbPacketEvent E = std::move(Pending.front());
    Pending.erase(Pending.begin());
    bool Ok = true;
    switch (E.K) {
    case K::Ack:
    case K::Interrupt: // the machine is stopped already
      break;
    case K::Nack:
      if (!LastSent.empty())
        Ok = sendRaw(LastSent);
      break;
    case K::BadChecksum:
      if (!Stub.noAck())
        Ok = sendRaw("-");
      break;
    case K::Overlong:
      Ok = (Stub.noAck() || sendRaw("+")) && send("E01");
      break;
    case K::Packet: {
      if (!Stub.noAck())
        Ok = sendRaw("+");
      GdbStub::Reply R = Stub.handle(E.Payload);
      for (const std::string &P : R.Packets)
        Ok = Ok && send(P);
      switch (R.After) {
      case GdbStub::Reply::Then::Stay:
        if (Stub.runEnd()) { // gdb has its W: the run is over
          closeFd(ClientFd);
          return *Stub.runEnd();
        }
        break;
      case GdbStub::Reply::Then::Detach:
        std::fprintf(stderr, "vmxsim: gdb detached; the run continues\n");
        closeFd(ClientFd);
        return std::nullopt;
      case GdbStub::Reply::Then::Kill:
        std::fprintf(stderr, "vmxsim: gdb killed the run\n");
        closeFd(ClientFd);
        return interrupted("gdb's kill");
      case GdbStub::Reply::Then::Gone:
        dropClient("the client went away while the machine ran");
        return std::nullopt;
      }
      break;
    }
    }
    if (!Ok) {
      dropClient("the connection failed while sending", !Stub.runEnd());
      if (Stub.runEnd())
        return *Stub.runEnd();
      return std::nullopt;
    }
  }
}

RunResult GdbServer::run() {
  if (Opts.Wait)
    while (!acceptClient(kWaitPollMs))
      if (stopRequested())
        return interrupted("a signal");
  for (;;) {
    if (ClientFd >= 0) {
      if (std::optional<RunResult> End = serve())
        return *End;
      continue;
    }
    ErrorOr<RunResult> R = M.runUntil({StopWhen::instructions(GdbStub::kChunkInsns)});
    if (!R || R->Reason != RunReason::Stopped)
      return R ? *R : interrupted("a run-control error");
    acceptClient(0);
  }
}

} // namespace vmxsim
