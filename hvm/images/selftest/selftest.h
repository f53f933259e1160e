/* The self-check suite: each test returns TestPass, TestFail (with TestDetail filled)
   or TestSkip (the CPU lacks a feature it needs). */
#ifndef HVM_SELFTEST_SELFTEST_H
#define HVM_SELFTEST_SELFTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum TestResult { TestPass, TestFail, TestSkip };

/* Why the current test failed or was skipped; printed after its name. */
extern char TestDetail[192];

enum TestResult testFailed(int Line, const char *Expr, uint64_t Got, uint64_t Want);
enum TestResult testSkipped(const char *Why);

/* __FILE_NAME__, not __FILE__: the output must not depend on the checkout path. */
#define EXPECT_EQ(Got, Want)                                                     \
  do {                                                                           \
    uint64_t Got_ = (uint64_t)(Got), Want_ = (uint64_t)(Want);                   \
    if (Got_ != Want_)                                                           \
      return testFailed(__LINE__, __FILE_NAME__ ": " #Got, Got_, Want_);         \
  } while (0)
#define EXPECT_TRUE(Cond) EXPECT_EQ(!!(Cond), 1)

/* Keeps the compiler from folding a computation whose inputs it could see. */
#define OPAQUE(X)                                                                \
  ({                                                                             \
    __typeof__(X) Opaque_ = (X);                                                 \
    __asm__("" : "+r"(Opaque_));                                                 \
    Opaque_;                                                                     \
  })

#define SELFTEST_TESTS(X)                                                        \
  X(sort) X(hash) X(recursion) X(muldiv64) X(int128) X(bits) X(bmi) X(float)     \
  X(string) X(printf) X(struct_copy) X(switch_table) X(funcptr) X(varargs)       \
  X(volatile) X(atomics) X(rep_string) X(smc) X(exceptions)

#define DECLARE_TEST(Name) enum TestResult test_##Name(void);
SELFTEST_TESTS(DECLARE_TEST)
#undef DECLARE_TEST

#endif
