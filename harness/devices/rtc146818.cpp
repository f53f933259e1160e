#include "harness/devices/rtc146818.h"

#include <algorithm>

namespace vmxsim {

namespace {

/// The clock's time and date registers (data sheet, "Address Map"; 0x32 is the century
/// byte PC firmware keeps beside them).
constexpr bool isTimeRegister(uint8_t Idx) {
  using R = Rtc146818;
  return Idx == R::Seconds || Idx == R::Minutes || Idx == R::Hours || Idx == R::DayOfWeek ||
         Idx == R::DayOfMonth || Idx == R::Month || Idx == R::Year || Idx == R::Century;
}

constexpr int64_t kSecondsPerDay = 86400;
// One tick of the 32.768 kHz time base is 1e9 / 32768 = 1953125 / 64 virtual cycles.
constexpr uint64_t kTickNum = 1953125, kTickDen = 64;

int64_t floorDiv(int64_t A, int64_t B) { return A / B - ((A % B != 0) && ((A < 0) != (B < 0))); }
int64_t floorMod(int64_t A, int64_t B) { return A - floorDiv(A, B) * B; }

} // namespace

// Days since 1970-01-01 of a proleptic Gregorian date, counted in 400-year eras of
// 146097 days with years starting on March 1 (so that the leap day is the era's last).
int64_t Rtc146818::daysFromCivil(int64_t Y, unsigned M, unsigned D) {
  // Months outside 1-12 carry into the year; days outside the month count on linearly.
  const int64_t M0 = int64_t(M) - 1;
  Y += floorDiv(M0, 12);
  const int64_t Mon = floorMod(M0, 12) + 1;
  Y -= Mon <= 2;
  const int64_t Era = floorDiv(Y, 400);
  const int64_t YearOfEra = Y - Era * 400;
  const int64_t DayOfYear = (153 * (Mon + (Mon > 2 ? -3 : 9)) + 2) / 5 + int64_t(D) - 1;
  const int64_t DayOfEra = YearOfEra * 365 + YearOfEra / 4 - YearOfEra / 100 + DayOfYear;
  return Era * 146097 + DayOfEra - 719468;
}

void Rtc146818::civilFromDays(int64_t Days, int64_t &Y, unsigned &M, unsigned &D) {
  Days += 719468;
  const int64_t Era = floorDiv(Days, 146097);
  const int64_t DayOfEra = Days - Era * 146097;
  const int64_t YearOfEra =
      (DayOfEra - DayOfEra / 1460 + DayOfEra / 36524 - DayOfEra / 146096) / 365;
  const int64_t DayOfYear = DayOfEra - (365 * YearOfEra + YearOfEra / 4 - YearOfEra / 100);
  const int64_t Mp = (5 * DayOfYear + 2) / 153;
  D = unsigned(DayOfYear - (153 * Mp + 2) / 5 + 1);
  M = unsigned(Mp < 10 ? Mp + 3 : Mp - 9);
  Y = YearOfEra + Era * 400 + (M <= 2);
}

bool Rtc146818::parseBase(const std::string &S, int64_t &Out, std::string &Why) {
  constexpr int64_t kMaxSeconds = kMaxRtcBase;
  auto digitsAt = [&S](size_t Pos, size_t N, int64_t &V) {
    if (Pos + N > S.size())
      return false;
    V = 0;
    for (size_t I = Pos; I < Pos + N; ++I) {
      if (S[I] < '0' || S[I] > '9')
        return false;
      V = V * 10 + (S[I] - '0');
    }
    return true;
  };
  if (!S.empty() && S.find_first_not_of("0123456789") == std::string::npos) {
    if (S.size() > 12) {
      Why = "seconds since 1970 must be at most 253402300799 (9999-12-31T23:59:59)";
      return false;
    }
    int64_t V = 0;
    digitsAt(0, S.size(), V);
    if (V > kMaxSeconds) {
      Why = "seconds since 1970 must be at most 253402300799 (9999-12-31T23:59:59)";
      return false;
    }
    Out = V;
    return true;
  }
  int64_t Y, Mo, D, H, Mi, Se;
  const size_t Len = S.size() == 20 && S[19] == 'Z' ? 19 : S.size();
  if (Len != 19 || !digitsAt(0, 4, Y) || S[4] != '-' || !digitsAt(5, 2, Mo) || S[7] != '-' ||
      !digitsAt(8, 2, D) || (S[10] != 'T' && S[10] != ' ') || !digitsAt(11, 2, H) ||
      S[13] != ':' || !digitsAt(14, 2, Mi) || S[16] != ':' || !digitsAt(17, 2, Se)) {
    Why = "expected seconds since 1970 or YYYY-MM-DDTHH:MM:SS (UTC)";
    return false;
  }
  static constexpr unsigned MonthDays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool Leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
  if (Y < 1970 || Mo < 1 || Mo > 12 || D < 1 || D > MonthDays[Mo - 1] ||
      (Mo == 2 && D == 29 && !Leap) || H > 23 || Mi > 59 || Se > 59) {
    Why = "date or time field out of range (years 1970-9999)";
    return false;
  }
  Out = daysFromCivil(Y, unsigned(Mo), unsigned(D)) * kSecondsPerDay + H * 3600 + Mi * 60 + Se;
  return true;
}

Rtc146818::Rtc146818(int64_t BaseSeconds) : TimeAtRef(BaseSeconds) {
  Ram[RegA] = 0x26; // DV = 010 (32.768 kHz, running), RS = 0110 (1024 Hz)
  Ram[RegB] = k24Hour; // BCD, 24-hour
  Ram[RegD] = 0x80;    // VRT: valid RAM and time
}

uint64_t Rtc146818::updatesUpTo(uint64_t T) const {
  return T < FirstUpdate ? 0 : (T - FirstUpdate) / kCyclesPerSecond + 1;
}

uint64_t Rtc146818::nextUpdateAfter(uint64_t T) const {
  return FirstUpdate + updatesUpTo(T) * kCyclesPerSecond;
}

// The periodic rate (data sheet, "Periodic Interrupt Rate and Square-Wave Output
// Frequency", 32.768 kHz time base): RS 1 and 2 select 256 and 128 Hz, RS 3-15 select
// 32768 >> (RS - 1) Hz.
uint64_t Rtc146818::periodTicks() const {
  const unsigned Rs = Ram[RegA] & 0xf;
  if (Rs == 0)
    return 0;
  if (Rs <= 2)
    return uint64_t(1) << (Rs + 6);
  return uint64_t(1) << (Rs - 1);
}

uint64_t Rtc146818::periodicEventsUpTo(uint64_t T) const {
  const uint64_t P = periodTicks();
  if (!P || T < DivBase)
    return 0;
  const uint64_t Ticks = uint64_t((unsigned __int128)(T - DivBase) * kTickDen / kTickNum);
  return Ticks / P;
}

uint64_t Rtc146818::nextPeriodicAfter(uint64_t T) const {
  const uint64_t Tick = (periodicEventsUpTo(T) + 1) * periodTicks();
  return DivBase + uint64_t(((unsigned __int128)Tick * kTickNum + kTickDen - 1) / kTickDen);
}

int64_t Rtc146818::timeAt(uint64_t T) const {
  if (!updating() || T <= RefCycle)
    return TimeAtRef;
  return TimeAtRef + int64_t(updatesUpTo(T) - updatesUpTo(RefCycle));
}

void Rtc146818::fold(uint64_t T) {
  if (T < RefCycle)
    T = RefCycle; // a vCPU behind the last access: the clock does not run backwards
  TimeAtRef = timeAt(T);
  RefCycle = T;
}

int64_t Rtc146818::timeNow() {
  advanceTo(now());
  return timeAt(now());
}

uint64_t Rtc146818::nextTimerEvent() const {
  if (IrqLevel)
    return kNoTimerEvent; // no new edge until C is read
  uint64_t Ev = kNoTimerEvent;
  const uint8_t B = Ram[RegB];
  if ((B & kPie) && dividerRunning() && periodTicks())
    Ev = std::min(Ev, nextPeriodicAfter(Evaluated));
  // The alarm is checked at every update; an update that does not match raises nothing.
  if ((B & (kUie | kAie)) && updating())
    Ev = std::min(Ev, nextUpdateAfter(Evaluated));
  return Ev;
}

// Sets the flags of register C for every event in (Evaluated, T].
void Rtc146818::advanceTo(uint64_t T) {
  if (T <= Evaluated)
    return;
  const uint64_t From = Evaluated;
  uint8_t Flags = 0;
  if (dividerRunning() && periodicEventsUpTo(T) > periodicEventsUpTo(From))
    Flags |= kPf;
  if (updating()) {
    const uint64_t N = updatesUpTo(T) - updatesUpTo(std::max(From, RefCycle));
    if (N) {
      Flags |= kUf;
      // The times reached by those updates; an alarm that matches any of them matches
      // within a day, so no more than a day's worth need checking.
      const int64_t Last = timeAt(T);
      for (uint64_t I = 0; I < std::min<uint64_t>(N, kSecondsPerDay + 1); ++I)
        if (alarmMatches(Last - int64_t(I))) {
          Flags |= kAf;
          break;
        }
    }
  }
  Evaluated = T;
  Ram[RegC] |= Flags;
  updateIrq();
}

void Rtc146818::updateIrq() {
  const bool Level = Ram[RegC] & Ram[RegB] & (kPf | kAf | kUf);
  Ram[RegC] = uint8_t((Ram[RegC] & ~kIrqf) | (Level ? kIrqf : 0));
  if (Level != IrqLevel) {
    IrqLevel = Level;
    if (Irq)
      Irq(Level);
  }
}

uint8_t Rtc146818::encode(unsigned V) const {
  return (Ram[RegB] & kBinary) ? uint8_t(V) : uint8_t((V / 10 % 10) << 4 | V % 10);
}

unsigned Rtc146818::decode(uint8_t V) const {
  return (Ram[RegB] & kBinary) ? V : (V >> 4) * 10 + (V & 0xf);
}

uint8_t Rtc146818::timeRegister(uint8_t Idx, int64_t Secs) const {
  const int64_t Days = floorDiv(Secs, kSecondsPerDay);
  const int64_t Sod = Secs - Days * kSecondsPerDay;
  int64_t Y;
  unsigned M, D;
  civilFromDays(Days, Y, M, D);
  switch (Idx) {
  case Seconds:
    return encode(unsigned(Sod % 60));
  case Minutes:
    return encode(unsigned(Sod / 60 % 60));
  case Hours: {
    const unsigned H = unsigned(Sod / 3600);
    if (Ram[RegB] & k24Hour)
      return encode(H);
    // 12-hour mode: 12, 1, ..., 11 with bit 7 = PM (data sheet, "Time, Calendar and
    // Alarm Data Modes").
    return uint8_t(encode(H % 12 ? H % 12 : 12) | (H >= 12 ? 0x80 : 0));
  }
  case DayOfWeek:
    return encode(unsigned(floorMod(Days + 4 + DowOffset, 7) + 1)); // 1 = Sunday
  case DayOfMonth:
    return encode(D);
  case Month:
    return encode(M);
  case Year:
    return encode(unsigned(floorMod(Y, 100)));
  default: // Century
    return encode(unsigned(floorMod(floorDiv(Y, 100), 100)));
  }
}

void Rtc146818::writeTimeRegister(uint8_t Idx, uint8_t V) {
  const int64_t Secs = TimeAtRef;
  const int64_t Days = floorDiv(Secs, kSecondsPerDay);
  int64_t Sod = Secs - Days * kSecondsPerDay;
  int64_t H = Sod / 3600, Mi = Sod / 60 % 60, S = Sod % 60;
  int64_t Y;
  unsigned M, D;
  civilFromDays(Days, Y, M, D);
  const int64_t Dow = floorMod(Days + 4 + DowOffset, 7);
  switch (Idx) {
  case Seconds:
    S = decode(V);
    break;
  case Minutes:
    Mi = decode(V);
    break;
  case Hours:
    if (Ram[RegB] & k24Hour)
      H = decode(V);
    else
      H = decode(V & 0x7f) % 12 + ((V & 0x80) ? 12 : 0);
    break;
  case DayOfWeek:
    DowOffset += int64_t(decode(V)) - 1 - Dow;
    return;
  case DayOfMonth:
    D = decode(V);
    break;
  case Month:
    M = decode(V);
    break;
  case Year:
    Y = floorDiv(Y, 100) * 100 + decode(V);
    break;
  default: // Century
    Y = int64_t(decode(V)) * 100 + floorMod(Y, 100);
    break;
  }
  const int64_t NewDays = daysFromCivil(Y, M, D);
  TimeAtRef = NewDays * kSecondsPerDay + H * 3600 + Mi * 60 + S;
  // The day of week is a register of its own: a new date does not change it.
  DowOffset += Dow - floorMod(floorDiv(TimeAtRef, kSecondsPerDay) + 4 + DowOffset, 7);
}

bool Rtc146818::alarmMatches(int64_t Secs) const {
  static constexpr uint8_t Pairs[3][2] = {
      {SecondsAlarm, Seconds}, {MinutesAlarm, Minutes}, {HoursAlarm, Hours}};
  for (const auto &P : Pairs) {
    const uint8_t A = Ram[P[0]];
    if ((A & 0xc0) != 0xc0 && A != timeRegister(P[1], Secs)) // 0xc0-0xff: don't care
      return false;
  }
  return true;
}

uint8_t Rtc146818::peek(uint8_t Idx) {
  const uint64_t T = now();
  advanceTo(T);
  Idx &= 0x7f;
  if (isTimeRegister(Idx))
    return timeRegister(Idx, timeAt(T));
  switch (Idx) {
  case RegA: {
    const bool Uip = updating() && nextUpdateAfter(T) - T <= kUipCycles;
    return uint8_t((Ram[RegA] & 0x7f) | (Uip ? kUip : 0));
  }
  default:
    return Ram[Idx];
  }
}

void Rtc146818::setRam(uint8_t Idx, uint8_t Value) {
  if (Idx >= 0x0e && Idx < kBytes && Idx != Century)
    Ram[Idx] = Value;
}

uint8_t Rtc146818::readData() {
  const uint8_t V = peek(Index);
  if (Index == RegC) {
    Ram[RegC] = 0; // flags clear on read (data sheet, "Register C")
    updateIrq();
  }
  return V;
}

void Rtc146818::writeData(uint8_t V) {
  const uint64_t T = now();
  advanceTo(T);
  if (isTimeRegister(Index)) {
    fold(T);
    writeTimeRegister(Index, V);
    return;
  }
  switch (Index) {
  case RegA: {
    fold(T);
    const bool WasRunning = dividerRunning();
    Ram[RegA] = V & 0x7f; // UIP is read-only
    if (!WasRunning && dividerRunning()) {
      // Leaving divider reset: the chain starts now and the first update is half a
      // second later (data sheet, "Divider Control").
      DivBase = T;
      FirstUpdate = T + kCyclesPerSecond / 2;
    }
    return;
  }
  case RegB:
    fold(T);
    // SET = 1 also clears UIE (data sheet, "Register B", UIE).
    Ram[RegB] = (V & kSet) ? uint8_t(V & ~kUie) : V;
    updateIrq();
    return;
  case RegC:
  case RegD:
    return; // read-only
  default:
    Ram[Index] = V; // alarms and CMOS RAM
    return;
  }
}

uint32_t Rtc146818::ioRead(uint16_t Port, unsigned SizeBytes) {
  uint32_t V = 0;
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const uint16_t P = uint16_t(Port + I);
    const uint32_t B = P == kDataPort ? readData() : 0xff; // 0x70 is write-only
    V |= B << (8 * I);
  }
  return V;
}

void Rtc146818::ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) {
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const uint16_t P = uint16_t(Port + I);
    const uint8_t B = uint8_t(Value >> (8 * I));
    if (P == kIndexPort) {
      NmiMask = B & 0x80;
      Index = B & 0x7f;
    } else if (P == kDataPort) {
      writeData(B);
    }
  }
  rearmed();
}

} // namespace vmxsim
