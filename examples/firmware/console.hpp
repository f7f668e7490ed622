// examples/firmware/console.hpp: text output and exit for the bare-metal image, through
// Arm semihosting (the "Semihosting for AArch32 and AArch64" spec: `bkpt 0xAB` in Thumb
// state, operation in r0, argument block in r1). QEMU implements it with
// `-semihosting-config enable=on,target=native`; a debug probe does too. On a board with
// no debugger attached `bkpt` faults: replace write() and exit() with the board's UART.
//
// No printf: newlib's stdio allocates its buffers, and the image must stay heap-free.
// Integers are formatted with std::to_chars; doubles by hand, in scientific notation with
// 4 significant digits, because libstdc++'s std::to_chars(double) links Ryu's tables
// (about 100 KB of flash) and asserts through newlib's stdio.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace firmware {

namespace semihosting {
inline constexpr std::uint32_t sys_write0 = 0x04;           // write a NUL-terminated string
inline constexpr std::uint32_t sys_exit_extended = 0x20;    // report an exit code and stop
inline constexpr std::uint32_t application_exit = 0x20026;  // ADP_Stopped_ApplicationExit

inline std::uint32_t call(std::uint32_t operation, const void* argument) noexcept {
  register std::uint32_t r0 asm("r0") = operation;
  register const void* r1 asm("r1") = argument;
  asm volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}
}  // namespace semihosting

inline void write(const char* text) noexcept { semihosting::call(semihosting::sys_write0, text); }

[[noreturn]] inline void exit(int code) noexcept {
  const std::uint32_t block[2] = {semihosting::application_exit, static_cast<std::uint32_t>(code)};
  semihosting::call(semihosting::sys_exit_extended, block);
  for (;;) asm volatile("wfi");
}

/// One output line built in a fixed buffer (cut when full) and written with `end()`.
class line {
 public:
  line& operator<<(std::string_view s) noexcept {
    for (char c : s)
      if (used_ + 2 < sizeof text_) text_[used_++] = c;
    return *this;
  }
  line& operator<<(const char* s) noexcept { return *this << std::string_view{s}; }
  line& operator<<(std::size_t v) noexcept { return put(std::to_chars(scratch_, scratch_ + sizeof scratch_, v)); }
  line& operator<<(double v) noexcept {
    if (v != v) return *this << "nan";
    if (v < 0) *this << "-", v = -v;
    if (v == 0) return *this << "0";
    if (v > 1e300) return *this << "inf";
    int exponent = 0;
    while (v >= 10) v /= 10, ++exponent;
    while (v < 1) v *= 10, --exponent;
    auto digits = static_cast<std::size_t>(v * 1000 + 0.5);  // 4 significant digits: 1000..10000
    if (digits >= 10000) digits /= 10, ++exponent;
    const char mantissa[] = {char('0' + digits / 1000), '.', char('0' + digits / 100 % 10),
                             char('0' + digits / 10 % 10), char('0' + digits % 10)};
    *this << std::string_view{mantissa, sizeof mantissa};
    if (exponent == 0) return *this;
    *this << "e" << (exponent < 0 ? "-" : "");
    return *this << static_cast<std::size_t>(exponent < 0 ? -exponent : exponent);
  }
  void end() noexcept {
    text_[used_++] = '\n';
    text_[used_] = '\0';
    write(text_);
    used_ = 0;
  }

 private:
  line& put(std::to_chars_result r) noexcept {
    return r.ec == std::errc{} ? *this << std::string_view{scratch_, static_cast<std::size_t>(r.ptr - scratch_)}
                               : *this << "?";
  }
  char text_[160];
  char scratch_[32];
  std::size_t used_ = 0;
};

}  // namespace firmware
