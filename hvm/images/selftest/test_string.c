/* The runtime's string.h and printf, which everything else relies on to report. */
#include "images/selftest/selftest.h"
#include "lib/printf.h"
#include "lib/string.h"

enum TestResult test_string(void) {
  char Buf[64];
  static const char Src[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  /* Every length and alignment around the 8-byte word loop. */
  for (size_t Off = 0; Off < 8; ++Off)
    for (size_t Len = 0; Len < 20; ++Len) {
      memset(Buf, 'X', sizeof(Buf));
      memcpy(Buf + Off, Src + 3, OPAQUE(Len));
      EXPECT_EQ(memcmp(Buf + Off, Src + 3, Len), 0);
      EXPECT_EQ(Buf[Off + Len], 'X');
      if (Off)
        EXPECT_EQ(Buf[Off - 1], 'X');
    }
  memset(Buf, 0, sizeof(Buf));
  strcpy(Buf, Src);
  memmove(Buf + 2, Buf, 10); /* overlapping, forward destination: copies backwards */
  EXPECT_EQ(memcmp(Buf, "010123456789cd", 14), 0);
  memmove(Buf, Buf + 4, 10); /* overlapping, backward destination */
  EXPECT_EQ(memcmp(Buf, "23456789cd89cd", 14), 0);
  memset(Buf + 1, 0xaa, OPAQUE(17));
  EXPECT_EQ((uint8_t)Buf[17], 0xaa);
  EXPECT_EQ((uint8_t)Buf[18], 'i'); /* the byte after the fill is untouched */
  EXPECT_EQ(strlen(Src), 36);
  EXPECT_EQ(strlen(""), 0);
  EXPECT_TRUE(strcmp("abc", "abd") < 0);
  EXPECT_TRUE(strcmp("abd", "abc") > 0);
  EXPECT_EQ(strcmp("same", "same"), 0);
  EXPECT_TRUE(strcmp("ab", "abc") < 0);
  EXPECT_TRUE(strcmp("\xff", "a") > 0); /* compared as unsigned char */
  EXPECT_EQ(strncmp("abcdef", "abcxyz", 3), 0);
  EXPECT_TRUE(strncmp("abcdef", "abcxyz", 4) < 0);
  EXPECT_EQ(strncmp("a", "a", 100), 0);
  EXPECT_EQ(strchr(Src, 'k') - Src, 20);
  EXPECT_TRUE(strchr(Src, '!') == 0);
  EXPECT_EQ(strchr(Src, '\0') - Src, 36);
  EXPECT_TRUE(memcmp("a\x01", "a\xff", 2) < 0);
  return TestPass;
}

#define EXPECT_FORMAT(Want, ...)                                                 \
  do {                                                                           \
    char Out_[96];                                                               \
    int N_ = snprintf(Out_, sizeof(Out_), __VA_ARGS__);                          \
    if (strcmp(Out_, Want) != 0 || N_ != (int)strlen(Want)) {                    \
      snprintf(TestDetail, sizeof(TestDetail), "line %d: got \"%s\" (%d), want \"%s\"", \
               __LINE__, Out_, N_, Want);                                        \
      return TestFail;                                                           \
    }                                                                            \
  } while (0)

enum TestResult test_printf(void) {
  EXPECT_FORMAT("42 -17 0", "%d %i %u", 42, -17, 0u);
  EXPECT_FORMAT("[   42][42   ][00042][-0042]", "[%5d][%-5d][%05d][%05d]", 42, 42, 42, -42);
  EXPECT_FORMAT("ff FF 0x00ff 777", "%x %X 0x%04x %o", 255u, 255u, 255u, 0777u);
  EXPECT_FORMAT("-9223372036854775808", "%lld", (long long)INT64_MIN);
  EXPECT_FORMAT("18446744073709551615", "%llu", (unsigned long long)UINT64_MAX);
  EXPECT_FORMAT("fedcba9876543210", "%lx", 0xfedcba9876543210ul);
  EXPECT_FORMAT("00000000deadbeef", "%016llx", 0xdeadbeefull);
  EXPECT_FORMAT("0x1000", "%p", (void *)0x1000);
  EXPECT_FORMAT("-1 65535 255", "%hd %hu %hhu", (short)-1, 0xffff, 0x1ff);
  EXPECT_FORMAT("[hi   ][  hi][abc]", "[%-5s][%4s][%.3s]", "hi", "hi", "abcdef");
  EXPECT_FORMAT("[x][ y]%", "[%c][%2c]%%", 'x', 'y');
  EXPECT_FORMAT("[   7][7   ]", "[%*d][%-*d]", 4, 7, 4, 7);
  const char *volatile Null = 0; /* volatile: gcc would warn about a literal NULL */
  EXPECT_FORMAT("(null)", "%s", Null);
  /* Truncation: the return value counts what did not fit. */
  char Small[5];
  EXPECT_EQ(snprintf(Small, sizeof(Small), "%s", "abcdefgh"), 8);
  EXPECT_EQ(strcmp(Small, "abcd"), 0);
  return TestPass;
}
