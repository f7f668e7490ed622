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
inline constexpr std::uint32_t sys_elapsed = 0x30;          // ticks since start, 64-bit
inline constexpr std::uint32_t sys_tickfreq = 0x31;         // ticks per second
inline constexpr std::uint32_t application_exit = 0x20026;  // ADP_Stopped_ApplicationExit

inline std::uint32_t call(std::uint32_t operation, const void* argument) noexcept {
  register std::uint32_t r0 asm("r0") = operation;
  register const void* r1 asm("r1") = argument;
  asm volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}
}  // namespace semihosting

inline void write(const char* text) noexcept { semihosting::call(semihosting::sys_write0, text); }

/// Host time since start, in seconds (SYS_ELAPSED / SYS_TICKFREQ): under QEMU, the
/// emulator's wall-clock time, not the emulated CPU's.
inline double host_seconds() noexcept {
  std::uint32_t ticks[2] = {0, 0};
  semihosting::call(semihosting::sys_elapsed, ticks);
  const std::uint32_t frequency = semihosting::call(semihosting::sys_tickfreq, nullptr);
  const double count = static_cast<double>(ticks[0]) + static_cast<double>(ticks[1]) * 4294967296.0;
  return frequency == 0 || frequency == 0xFFFFFFFFu ? 0.0 : count / frequency;
}

/// The Cortex-M SysTick timer (ARMv7-M ARM B3.3) free-running on the processor clock: a
/// 24-bit down-counter. Under QEMU with -icount shift=0 its clock counts emulated
/// instructions (one per ns of virtual time; mps2-an500's clock is 25 MHz, so 40 per tick).
class systick {
 public:
  static constexpr std::uint32_t mask = 0xFFFFFF;
  static void start() noexcept {
    reg(0x14) = mask;  // SYST_RVR: the reload value
    reg(0x18) = 0;     // SYST_CVR: any write clears it
    reg(0x10) = 0b101; // SYST_CSR: enable, processor clock, no interrupt
  }
  [[nodiscard]] static std::uint32_t now() noexcept { return reg(0x18) & mask; }
  /// Ticks from `earlier` to `later` (fewer than 2^24 apart): the counter counts down.
  [[nodiscard]] static std::uint32_t between(std::uint32_t earlier, std::uint32_t later) noexcept {
    return (earlier - later) & mask;
  }

 private:
  static volatile std::uint32_t& reg(std::uint32_t offset) noexcept {
    return *reinterpret_cast<volatile std::uint32_t*>(0xE000E000u + offset);
  }
};

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
