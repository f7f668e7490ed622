// examples/firmware/console.hpp: text output and exit for the bare-metal image, through
// Arm semihosting (the "Semihosting for AArch32 and AArch64" spec: `bkpt 0xAB` in Thumb
// state, operation in r0, argument block in r1). QEMU implements it with
// `-semihosting-config enable=on,target=native`; a debug probe does too. On a board with
// no debugger attached `bkpt` faults: replace write() and exit() with the board's UART.
//
// No printf: newlib's stdio allocates its buffers, and the image must stay heap-free.
// Numbers are formatted with std::to_chars into a fixed line buffer.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace firmware {

namespace semihosting {
inline constexpr std::uint32_t sys_write0 = 0x04;         // write a NUL-terminated string
inline constexpr std::uint32_t sys_exit_extended = 0x20;  // report an exit code and stop
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
    return put(std::to_chars(scratch_, scratch_ + sizeof scratch_, v, std::chars_format::general, 4));
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
